package provider

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/component-base/metrics/legacyregistry"

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

// A password re-read that read the config before a reload must not put
// the old peer set back after the reload's: the last peers handed to the
// speaker are the config's in force.
func TestSetPeersNeverPutsBackAStalePeerSet(t *testing.T) {
	c := newCloud(t, followConfig)
	c.net.speaker = &bgp.Speaker{} // never used: applyPeers is replaced
	started, release := make(chan struct{}), make(chan struct{})
	var mu sync.Mutex
	var last []string
	calls := 0
	orig := applyPeers
	applyPeers = func(_ context.Context, _ *bgp.Speaker, peers []bgp.Peer) error {
		mu.Lock()
		calls++
		first := calls == 1
		mu.Unlock()
		if first {
			close(started)
			<-release // the re-read is slow: a reload comes meanwhile
		}
		var names []string
		for _, p := range peers {
			names = append(names, p.Address.String())
		}
		mu.Lock()
		last = names
		mu.Unlock()
		return nil
	}
	t.Cleanup(func() { applyPeers = orig })
	with := func(peer string) *config.Config {
		return mustParse(t, strings.Replace(followConfig, "bgp: {localASN: 64512, routerID: 10.0.0.254}",
			"bgp: {localASN: 64512, routerID: 10.0.0.254, peers: [{address: "+peer+", asn: 64500}]}", 1))
	}
	c.net.mu.Lock()
	c.net.cfg = with("192.0.2.1")
	c.net.mu.Unlock()
	reread := make(chan struct{})
	go func() { c.net.setPeers(context.Background()); close(reread) }()
	<-started
	reloaded := make(chan struct{})
	go func() { c.apply(with("192.0.2.2")); close(reloaded) }()
	time.Sleep(50 * time.Millisecond) // the reload reaches setPeers
	close(release)
	<-reread
	<-reloaded
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(last, ",") != "192.0.2.2" {
		t.Errorf("the speaker's peers after a re-read and a reload: %v, want the reload's 192.0.2.2", last)
	}
}

// The series of a peer that left the config are deleted: a stale 0 would
// fire BaremetalBGPPeerUnreachable for ever.
func TestRemovedPeersSeriesAreDeleted(t *testing.T) {
	configLoaded(true) // registers the metrics
	c := newCloud(t, strings.Replace(followConfig, "bgp: {localASN: 64512, routerID: 10.0.0.254}",
		"bgp: {localASN: 64512, routerID: 10.0.0.254, peers: [{address: 192.0.2.7, asn: 64500}, {address: 192.0.2.8, asn: 64500}]}", 1))
	c.net.speaker = &bgp.Speaker{}
	orig := applyPeers
	applyPeers = func(context.Context, *bgp.Speaker, []bgp.Peer) error { return nil }
	t.Cleanup(func() { applyPeers = orig })
	c.net.setPeers(context.Background())
	for _, a := range []string{"192.0.2.7", "192.0.2.8"} {
		c.net.peerStateChanged(bgp.PeerState{Address: netip.MustParseAddr(a), State: "active"})
	}
	c.apply(mustParse(t, strings.Replace(followConfig, "bgp: {localASN: 64512, routerID: 10.0.0.254}",
		"bgp: {localASN: 64512, routerID: 10.0.0.254, peers: [{address: 192.0.2.8, asn: 64500}]}", 1)))
	got := gathered(t, "baremetal_bgp_peer_established", "baremetal_bgp_peer_state_changes_total")
	if strings.Contains(got, "192.0.2.7") {
		t.Errorf("series of the removed peer 192.0.2.7 remain:\n%s", got)
	}
	if !strings.Contains(got, "192.0.2.8") {
		t.Errorf("series of the remaining peer 192.0.2.8 are gone:\n%s", got)
	}
}

// gathered is the registered series of the named metrics, one a line.
func gathered(t *testing.T, names ...string) string {
	t.Helper()
	families, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, mf := range families {
		if !slices.Contains(names, mf.GetName()) {
			continue
		}
		for _, m := range mf.GetMetric() {
			fmt.Fprintln(&b, mf.GetName(), m.GetLabel())
		}
	}
	return b.String()
}

// What leaves VIPs unreachable without an error anywhere is said: pools
// announced over BGP to no peer, a peer that takes one next hop per VIP, a
// speaker that did not start. Each is a Warning Event on the Pod and a
// metric an alert watches.
func TestSilentDegradationsAreSaid(t *testing.T) {
	configLoaded(true)
	var said []string
	c := newCloud(t, followConfig) // a BGP pool, no peers
	c.net.podEventf = func(_, reason, format string, args ...any) {
		said = append(said, reason+": "+fmt.Sprintf(format, args...))
	}
	c.net.speaker = &bgp.Speaker{}
	orig := applyPeers
	applyPeers = func(context.Context, *bgp.Speaker, []bgp.Peer) error { return nil }
	t.Cleanup(func() { applyPeers = orig })

	c.net.setPeers(context.Background())
	c.net.setPeers(context.Background())
	if got := strings.Count(strings.Join(said, "\n"), "BGPNoPeers: 1 pools are announced over BGP but the speaker has no peer"); got != 1 {
		t.Errorf("BGPNoPeers said %d times, want once: %v", got, said)
	}
	if got := gathered(t, "baremetal_bgp_pools_without_peers"); !strings.Contains(got, "baremetal_bgp_pools_without_peers") {
		t.Errorf("no pools_without_peers series: %q", got)
	}
	if v := testutilGauge(t, "baremetal_bgp_pools_without_peers"); v != 1 {
		t.Errorf("baremetal_bgp_pools_without_peers %v, want 1", v)
	}

	said = nil
	c.net.peersWanted = map[netip.Addr]bool{netip.MustParseAddr("192.0.2.9"): true, netip.MustParseAddr("192.0.2.10"): true}
	c.net.peerStateChanged(bgp.PeerState{Address: netip.MustParseAddr("192.0.2.9"), State: "established", Established: true})
	c.net.peerStateChanged(bgp.PeerState{Address: netip.MustParseAddr("192.0.2.10"), State: "established", Established: true, AddPath: true})
	if len(said) != 1 || !strings.HasPrefix(said[0], "BGPPeerWithoutAddPath: BGP peer 192.0.2.9") {
		t.Errorf("events %v, want one BGPPeerWithoutAddPath for 192.0.2.9", said)
	}
	got := gathered(t, "baremetal_bgp_peer_add_path")
	for _, want := range []string{`value:"192.0.2.9"`, `value:"192.0.2.10"`} {
		if !strings.Contains(got, want) {
			t.Errorf("no baremetal_bgp_peer_add_path series for %s:\n%s", want, got)
		}
	}

	said = nil
	t.Setenv(envPodIP, "")
	if s := c.net.startSpeaker(context.Background(), config.BGP{LocalASN: 64512}); s != nil {
		t.Fatal("a speaker started without a router ID")
	}
	if len(said) != 1 || !strings.HasPrefix(said[0], "BGPNotStarted: ") {
		t.Errorf("events %v, want BGPNotStarted", said)
	}
	if v := testutilGauge(t, "baremetal_bgp_speaker_not_started"); v != 1 {
		t.Errorf("baremetal_bgp_speaker_not_started %v, want 1", v)
	}
}

// testutilGauge is the value of an unlabelled gauge.
func testutilGauge(t *testing.T, name string) float64 {
	t.Helper()
	families, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range families {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("no gauge %s", name)
	return 0
}
