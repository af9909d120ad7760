package integration

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/test/framework"
)

// The readiness probe the chart ships (--readiness-address, /readyz): a
// replica turns ready only once its BGP session is established, and not
// ready again when the router goes away. (Every replica judges its own
// sessions; replicas here would share 127.0.0.1, which a router takes one
// session from.)
func TestReadinessFollowsTheBGPSessions(t *testing.T) {
	port, err := framework.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	startRouter := func(name string) *framework.GoBGPD {
		t.Helper()
		peer, err := framework.StartGoBGPDOnPort(t.TempDir(), name, "127.0.0.1", port, 64500,
			[]framework.GoBGPNeighbor{{Address: "127.0.0.1", ASN: 64512, AddPath: true}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(peer.Stop)
		return peer
	}
	// The config names the router's port; the router is not up yet.
	router := startRouter("gobgpd")
	router.Stop()
	s := newSite(t, `
inventory:
  unlistedNodes: allow
loadBalancer:
  healthCheck: {enabled: false}
  pools:
  - name: public
    addresses: [192.0.2.0/28]
`+framework.PeerConfig(router))
	readyz := map[string]string{}
	for _, name := range []string{"ready"} {
		p, err := framework.FreePort()
		if err != nil {
			t.Fatal(err)
		}
		readyz[name] = "http://127.0.0.1:" + strconv.Itoa(p) + "/readyz"
		s.startReplica(name, "--readiness-address=127.0.0.1:"+strconv.Itoa(p))
	}
	probe := func(url string) (int, string) {
		c := http.Client{Timeout: 2 * time.Second}
		resp, err := c.Get(url)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, strings.TrimSpace(string(body))
	}
	each := func(what string, within time.Duration, want int, reason string) {
		t.Helper()
		framework.Eventually(t, within, what, func() (bool, string) {
			for name, url := range readyz {
				code, body := probe(url)
				if code != want || !strings.Contains(body, reason) {
					return false, fmt.Sprintf("%s: %d %q", name, code, body)
				}
			}
			return true, ""
		})
	}
	each("not ready without the session", 30*time.Second, http.StatusServiceUnavailable, "BGP sessions not established with 127.0.0.1")
	framework.Consistently(t, 3*time.Second, "not ready while the router is down", func() (bool, string) {
		for name, url := range readyz {
			if code, body := probe(url); code != http.StatusServiceUnavailable {
				return false, fmt.Sprintf("%s: %d %q", name, code, body)
			}
		}
		return true, ""
	})

	router = startRouter("gobgpd-up")
	each("ready once the session is up", 30*time.Second, http.StatusOK, "ok")
	router.Stop()
	// The hold time (9 s) or the closed connection ends the session.
	each("not ready again once the router is gone", 30*time.Second, http.StatusServiceUnavailable, "127.0.0.1")
}
