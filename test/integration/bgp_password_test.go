package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/test/framework"
)

// A TCP MD5 password kept in a file (a mounted Secret) is rotated at the
// router and in the file, with no edit of the cloud config: the session
// comes back with the new password. A file that cannot be read leaves the
// session as it is.
func TestPeerPasswordFileRotation(t *testing.T) {
	const ns = "bgp-password"
	createNamespace(t, ns)
	dir := t.TempDir()
	passwordFile := filepath.Join(dir, "password")
	if err := os.WriteFile(passwordFile, []byte("first-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// The router, on one port throughout, with the password it has now.
	port, err := framework.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	start := func(name, password string) *framework.GoBGPD {
		t.Helper()
		peer, err := framework.StartGoBGPDOnPort(t.TempDir(), name, "127.0.0.1", port, 64500,
			[]framework.GoBGPNeighbor{{Address: "127.0.0.1", ASN: 64512, AddPath: true, Password: password}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(peer.Stop)
		return peer
	}
	peer := start("gobgpd", "first-secret")
	s := &lbSite{site: newSite(t, `
inventory:
  unlistedNodes: allow
loadBalancer:
  # The nodes' addresses are not on this machine: nothing may dial them.
  healthCheck: {enabled: false}
  pools:
  - name: public
    addresses: [192.0.2.0/28]
`+framework.PeerConfig(peer)+"    passwordFile: "+passwordFile+"\n"), peer: peer, ns: ns}
	ccm := s.startCCM("ccm")
	lbNode(t, "pw-1", true, 31)
	createLBService(t, ns, "web", nil)
	vip := framework.WaitIngress(t, suite.Cluster.Admin, ns, "web", 1)[0] + "/32"
	s.waitRoute(vip, "203.0.113.31")

	// The router and the Secret get a new password.
	peer.Stop()
	rotated := start("gobgpd-rotated", "second-secret")
	s.peer = rotated
	// The passwords matter: with the old one the session does not come up.
	framework.Consistently(t, 4*time.Second, "no session while the CCM has the old password", func() (bool, string) {
		state, _ := rotated.NeighborState("127.0.0.1")
		return state != "established", "established with the old password: MD5 is not in force, the test proves nothing"
	})
	if err := os.WriteFile(passwordFile, []byte("second-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	rotatedAt := time.Now()
	s.waitRoute(vip, "203.0.113.31")
	t.Logf("the session was back with the new password %s after the rotation", time.Since(rotatedAt).Round(100*time.Millisecond))

	// The file goes away (a Secret deleted by mistake): the session stays.
	if err := os.Remove(passwordFile); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 30*time.Second, "the unreadable file is an Event on the CCM's Pod", func() (bool, string) {
		for _, ev := range events(t, "kube-system", "ccm", "BGPPeerNotConfigured") {
			if ev.Type == v1.EventTypeWarning && strings.Contains(ev.Message, "bgp.peers[0].passwordFile") && strings.Contains(ev.Message, "keeps the password it has") {
				return true, ""
			}
		}
		return false, "no such Event"
	})
	framework.Consistently(t, 12*time.Second, "the session and the path stay", func() (bool, string) {
		state, err := rotated.NeighborState("127.0.0.1")
		rib, _ := rotated.RIB("ipv4")
		return err == nil && state == "established" && len(rib[vip]) == 1, fmt.Sprintf("session %s (%v), RIB %v", state, err, rib)
	})
	if done, err := ccm.Exited(); done {
		t.Fatalf("the CCM exited: %v", err)
	}
}
