package provider

import (
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/bgp"
	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/config"
)

func TestPeerPasswordFiles(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "password")
	peerAddr := netip.MustParseAddr("192.0.2.1")
	bgpCfg := config.BGP{LocalASN: 64512, RouterID: "192.0.2.254", Peers: []config.Peer{{Address: "192.0.2.1", ASN: 64500, PasswordFile: file}}}
	inForce := map[netip.Addr]bgp.Peer{peerAddr: {Address: peerAddr, ASN: 64500, Password: "old"}}

	// Rotated: the new password is taken.
	if err := os.WriteFile(file, []byte("new\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	got, problems := peersOf(bgpCfg, inForce)
	if len(problems) != 0 || len(got) != 1 || got[0].Password != "new" {
		t.Errorf("rotated file: peers %+v, problems %v", got, problems)
	}

	// Unreadable (a Secret being swapped, a removed file): the session keeps
	// its password, and the problem names the field.
	if err := os.Remove(file); err != nil {
		t.Fatal(err)
	}
	got, problems = peersOf(bgpCfg, inForce)
	if len(got) != 1 || got[0].Password != "old" {
		t.Errorf("unreadable file: the peer in force was not kept: %+v", got)
	}
	if len(problems) != 1 || !strings.Contains(problems[0].Error(), "bgp.peers[0].passwordFile") || !strings.Contains(problems[0].Error(), "keeps the password it has") {
		t.Errorf("unreadable file: problems %v", problems)
	}

	// A new peer whose file cannot be read is not configured yet.
	got, problems = peersOf(bgpCfg, nil)
	if len(got) != 0 || len(problems) != 1 || !strings.Contains(problems[0].Error(), "no session with 192.0.2.1") {
		t.Errorf("new peer with an unreadable file: peers %+v, problems %v", got, problems)
	}
}
