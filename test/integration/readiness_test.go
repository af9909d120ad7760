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

// readinessSite is the readiness tests' site, less its peers.
const readinessSite = `
inventory:
  unlistedNodes: allow
loadBalancer:
  healthCheck: {enabled: false}
  pools:
  - name: public
    addresses: [192.0.2.0/28]
`

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
	s := newSite(t, readinessSite+framework.PeerConfig(router))
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
	each("not ready without the session", 30*time.Second, http.StatusServiceUnavailable, "BGP sessions established with 0 of 1 peers, 1 needed")
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

// Of two routers one stops (in maintenance, as one of a site's always is):
// the replica stays ready with the default --readiness-min-established
// (50%), so a rollout or a drain is not blocked by it; with both gone it
// is not ready; with 100% it needs both.
func TestReadinessWithOneRouterOfTwoDown(t *testing.T) {
	type router struct {
		addr   string
		port   int
		gobgpd *framework.GoBGPD
	}
	var routers []*router
	for i, addr := range []string{"127.0.0.2", "127.0.0.3"} {
		port, err := framework.FreePort()
		if err != nil {
			t.Fatal(err)
		}
		r := &router{addr: addr, port: port}
		r.gobgpd, err = framework.StartGoBGPDOnPort(t.TempDir(), fmt.Sprintf("tor-%d", i+1), addr, port, 64500,
			[]framework.GoBGPNeighbor{{Address: "127.0.0.1", ASN: 64512, AddPath: true}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(r.gobgpd.Stop)
		routers = append(routers, r)
	}
	var peers strings.Builder
	peers.WriteString("bgp:\n  localASN: 64512\n  routerID: 127.0.0.1\n  peers:\n")
	for _, r := range routers {
		fmt.Fprintf(&peers, "  - {address: %s, port: %d, asn: 64500, holdTime: 9s, connectRetryTime: 1s}\n", r.addr, r.port)
	}
	s := newSite(t, readinessSite+peers.String())
	readyz := map[string]string{}
	for _, c := range []struct {
		name string
		args []string
	}{{"default", nil}, {"every-peer", []string{"--readiness-min-established=100%"}}} {
		name, args := c.name, c.args
		p, err := framework.FreePort()
		if err != nil {
			t.Fatal(err)
		}
		readyz[name] = "http://127.0.0.1:" + strconv.Itoa(p) + "/readyz"
		s.startReplica("ready-"+name, append([]string{"--readiness-address=127.0.0.1:" + strconv.Itoa(p)}, args...)...)
		// A router takes one session from an address: one replica at a
		// time.
		expect := func(what string, want int, reason string) {
			t.Helper()
			framework.Eventually(t, 60*time.Second, name+": "+what, func() (bool, string) {
				c := http.Client{Timeout: 2 * time.Second}
				resp, err := c.Get(readyz[name])
				if err != nil {
					return false, err.Error()
				}
				defer resp.Body.Close()
				body, _ := io.ReadAll(resp.Body)
				return resp.StatusCode == want && strings.Contains(string(body), reason), fmt.Sprintf("%d %q", resp.StatusCode, body)
			})
		}
		// Ready needs one session of two: wait for the routers to have
		// both, or stopping one could leave none.
		for _, r := range routers {
			framework.Eventually(t, 60*time.Second, name+": "+r.addr+" established", func() (bool, string) {
				state, err := r.gobgpd.NeighborState("127.0.0.1")
				return state == "established", fmt.Sprint(state, err)
			})
		}
		expect("ready with both routers", http.StatusOK, "ok")
		routers[1].gobgpd.Stop()
		if name == "default" {
			expect("ready with one router of two stopped", http.StatusOK, "ok")
			framework.Consistently(t, 3*time.Second, name+" stays ready", func() (bool, string) {
				resp, err := (&http.Client{Timeout: 2 * time.Second}).Get(readyz[name])
				if err != nil {
					return false, err.Error()
				}
				resp.Body.Close()
				return resp.StatusCode == http.StatusOK, strconv.Itoa(resp.StatusCode)
			})
			routers[0].gobgpd.Stop()
			expect("not ready with no router", http.StatusServiceUnavailable, "0 of 2")
		} else {
			expect("not ready with one router of two stopped", http.StatusServiceUnavailable, "1 of 2 peers, 2 needed")
		}
		s.ccms[len(s.ccms)-1].Stop()
		// Both routers back for the next replica.
		for i, r := range routers {
			r.gobgpd.Stop()
			var err error
			r.gobgpd, err = framework.StartGoBGPDOnPort(t.TempDir(), fmt.Sprintf("tor-%d-again", i+1), r.addr, r.port, 64500,
				[]framework.GoBGPNeighbor{{Address: "127.0.0.1", ASN: 64512, AddPath: true}})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(r.gobgpd.Stop)
		}
	}
}
