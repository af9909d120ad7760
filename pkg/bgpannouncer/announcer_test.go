package bgpannouncer

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
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
	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/report"
)

func init() { legacyregistry.MustRegister(Metrics()...) }

const baseConfig = `
loadBalancer:
  pools:
  - {name: site, addresses: [10.1.0.0/24]}
bgp: {localASN: 64512, routerID: 10.0.0.254}
`

func mustParse(t *testing.T, s string) *config.Config {
	t.Helper()
	cfg, err := config.Parse([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func withPeers(t *testing.T, peers string) *config.Config {
	t.Helper()
	return mustParse(t, strings.Replace(baseConfig, "bgp: {localASN: 64512, routerID: 10.0.0.254}",
		"bgp: {localASN: 64512, routerID: 10.0.0.254, peers: ["+peers+"]}", 1))
}

// events records the Events said, as "Reason: message".
type events struct {
	mu  sync.Mutex
	all []string
}

func (e *events) add(_ report.Object, _, reason, msg string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.all = append(e.all, reason+": "+msg)
}

func (e *events) take() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := e.all
	e.all = nil
	return out
}

// speaking is an announcer whose speakers (one per selection of cfg) take
// their peers in applied, and stop in stopped. Speakers it starts (at a
// hand-over) are GoBGP servers without peers or a listener.
func speaking(t *testing.T, cfg *config.Config, applied func(*bgp.Speaker, []bgp.Peer), stopped func(*bgp.Speaker)) (*Announcer, *events) {
	t.Helper()
	ev := &events{}
	a := New(cfg, &report.Reporter{Events: ev.add})
	// Running, with no tables: no speaker is started.
	a.running, a.failed = t.Context(), map[string]bool{}
	sels, _ := cfg.BGP.Selections()
	for _, sel := range sels {
		// Never asked to speak: applyPeers and stopSpeaker are replaced.
		a.speakers = append(a.speakers, &speaker{Speaker: &bgp.Speaker{}, key: sel.Key()})
	}
	orig := applyPeers
	applyPeers = func(_ context.Context, s *bgp.Speaker, peers []bgp.Peer) error {
		if applied != nil {
			applied(s, peers)
		}
		return nil
	}
	origStop := stopSpeaker
	stopSpeaker = func(s *bgp.Speaker) {
		if stopped != nil {
			stopped(s)
		}
	}
	t.Cleanup(func() { applyPeers, stopSpeaker = orig, origStop })
	return a, ev
}

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
	started, release := make(chan struct{}), make(chan struct{})
	var mu sync.Mutex
	var last []string
	calls := 0
	a, _ := speaking(t, withPeers(t, "{address: 192.0.2.1, asn: 64500}"), func(_ *bgp.Speaker, peers []bgp.Peer) {
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
	}, nil)
	reread := make(chan struct{})
	go func() { a.setPeers(context.Background()); close(reread) }()
	<-started
	reloaded := make(chan struct{})
	go func() {
		a.SetConfig(context.Background(), withPeers(t, "{address: 192.0.2.2, asn: 64500}"))
		close(reloaded)
	}()
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
	a, _ := speaking(t, withPeers(t, "{address: 192.0.2.7, asn: 64500}, {address: 192.0.2.8, asn: 64500}"), nil, nil)
	a.setPeers(context.Background())
	for _, p := range []string{"192.0.2.7", "192.0.2.8"} {
		a.peerStateChanged(bgp.PeerState{Address: netip.MustParseAddr(p), State: "active", Speaker: a.peers.speaker(netip.MustParseAddr(p))})
	}
	a.SetConfig(context.Background(), withPeers(t, "{address: 192.0.2.8, asn: 64500}"))
	got := gathered(t, "baremetal_bgp_peer_established", "baremetal_bgp_peer_state_changes_total")
	if strings.Contains(got, "192.0.2.7") {
		t.Errorf("series of the removed peer 192.0.2.7 remain:\n%s", got)
	}
	if !strings.Contains(got, "192.0.2.8") {
		t.Errorf("series of the remaining peer 192.0.2.8 are gone:\n%s", got)
	}
	st := a.Status()
	if len(st.Peers) != 1 || st.Peers[0] != netip.MustParseAddr("192.0.2.8") {
		t.Errorf("peers wanted %v, want 192.0.2.8", st.Peers)
	}
	if _, ok := st.Sessions[netip.MustParseAddr("192.0.2.7")]; ok || len(st.Sessions) != 1 {
		t.Errorf("sessions after 192.0.2.7 left: %v", st.Sessions)
	}
	// A stopped speaker has no sessions: readiness must not count them.
	a.peers.stopped()
	if st := a.Status(); len(st.Sessions) != 0 {
		t.Errorf("sessions after the speaker stopped: %v", st.Sessions)
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
		for _, n := range names {
			if mf.GetName() == n {
				for _, m := range mf.GetMetric() {
					b.WriteString(n + " " + m.String() + "\n")
				}
			}
		}
	}
	return b.String()
}

// gauge is the value of an unlabelled gauge.
func gauge(t *testing.T, name string) float64 {
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

// What leaves VIPs unreachable without an error anywhere is said: pools
// announced over BGP to no peer, a peer that takes one next hop per VIP, a
// speaker that did not start. Each is a Warning Event on the Pod and a
// metric an alert watches.
func TestSilentDegradationsAreSaid(t *testing.T) {
	a, ev := speaking(t, mustParse(t, baseConfig), nil, nil) // a BGP pool, no peers
	a.setPeers(context.Background())
	a.setPeers(context.Background())
	said := ev.take()
	if got := strings.Count(strings.Join(said, "\n"), "BGPNoPeers: 1 pools are announced over BGP but the speaker has no peer"); got != 1 {
		t.Errorf("BGPNoPeers said %d times, want once: %v", got, said)
	}
	if v := gauge(t, "baremetal_bgp_pools_without_peers"); v != 1 {
		t.Errorf("baremetal_bgp_pools_without_peers %v, want 1", v)
	}

	a.peers.wanted = map[netip.Addr]bool{netip.MustParseAddr("192.0.2.9"): true, netip.MustParseAddr("192.0.2.10"): true}
	a.peerStateChanged(bgp.PeerState{Address: netip.MustParseAddr("192.0.2.9"), State: "established", Established: true})
	a.peerStateChanged(bgp.PeerState{Address: netip.MustParseAddr("192.0.2.10"), State: "established", Established: true, AddPath: true})
	if said := ev.take(); len(said) != 1 || !strings.HasPrefix(said[0], "BGPPeerWithoutAddPath: BGP peer 192.0.2.9") {
		t.Errorf("events %v, want one BGPPeerWithoutAddPath for 192.0.2.9", said)
	}
	got := gathered(t, "baremetal_bgp_peer_add_path")
	for _, want := range []string{`value:"192.0.2.9"`, `value:"192.0.2.10"`} {
		if !strings.Contains(got, want) {
			t.Errorf("no baremetal_bgp_peer_add_path series for %s:\n%s", want, got)
		}
	}

	t.Setenv(EnvPodIP, "")
	if err := a.checkRouterID(config.BGP{LocalASN: 64512}); err == nil {
		t.Fatal("a speaker may start without a router ID")
	}
	if said := ev.take(); len(said) != 1 || !strings.HasPrefix(said[0], "BGPNotStarted: ") {
		t.Errorf("events %v, want BGPNotStarted", said)
	}
	if v := gauge(t, "baremetal_bgp_speaker_not_started"); v != 1 {
		t.Errorf("baremetal_bgp_speaker_not_started %v, want 1", v)
	}
}

func TestRouterIDIsTheReplicasOwnAddressUnlessSet(t *testing.T) {
	t.Setenv(EnvPodIP, "10.0.0.7")
	if got := speakerGlobal(mustParse(t, baseConfig).BGP).RouterID; got != netip.MustParseAddr("10.0.0.254") {
		t.Errorf("router ID %v, want the configured 10.0.0.254", got)
	}
	if got := speakerGlobal(mustParse(t, strings.Replace(baseConfig, ", routerID: 10.0.0.254", "", 1)).BGP).RouterID; got != netip.MustParseAddr("10.0.0.7") {
		t.Errorf("router ID %v, want POD_IP 10.0.0.7", got)
	}
}

// A replica in a Pod on a Node the CCM has not initialised yet (the first
// start on a kubeadm cluster: the CCM initialises its own Node) has no
// POD_IP, as the kubelet knows no address for the Node. Its router ID is
// then the address it speaks to the routers from.
func TestRouterIDWithoutPodIPIsTheAddressTowardsThePeers(t *testing.T) {
	t.Setenv(EnvPodIP, "")
	cfg := mustParse(t, strings.Replace(baseConfig, "bgp: {localASN: 64512, routerID: 10.0.0.254}",
		"bgp: {localASN: 64512, peers: [{address: 127.0.0.1, asn: 64500}]}", 1))
	if got := speakerGlobal(cfg.BGP).RouterID; got != netip.MustParseAddr("127.0.0.1") {
		t.Errorf("router ID %v, want 127.0.0.1, this host's address towards its peer", got)
	}
}

// A replica stops speaking once the API server has been away for the
// whole apiLoss, and not for a shorter gap.
func TestAPILossIsTheWholeGrace(t *testing.T) {
	defer func(p time.Duration) { APIPoll = p }(APIPoll)
	APIPoll = 5 * time.Millisecond
	down := errors.New("connection refused")

	answers := make(chan error)
	reachable := func(ctx context.Context) error {
		select {
		case err := <-answers:
			return err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	lost := make(chan time.Time, 1)
	start := time.Now()
	go func() {
		if watchAPI(context.Background(), reachable, 200*time.Millisecond) {
			lost <- time.Now()
		}
	}()
	// Failures for a while, then an answer: not lost.
	deadline := time.Now().Add(150 * time.Millisecond)
	for time.Now().Before(deadline) {
		answers <- down
	}
	answers <- nil
	// Then failures until it gives up.
	failFrom := time.Now()
	for {
		select {
		case at := <-lost:
			if at.Sub(failFrom) < 200*time.Millisecond {
				t.Fatalf("gave up %v after the last answer (%v after start); the grace is 200ms", at.Sub(failFrom), at.Sub(start))
			}
			return
		case answers <- down:
		case <-time.After(5 * time.Second):
			t.Fatal("the replica never gave up on an API server that stopped answering")
		}
	}
}

// A reload that moves every router of a speaker to one other selection,
// their sessions' settings unchanged, has the speaker announce that
// selection's table: the sessions stay.
func TestASpeakerWhoseRoutersAllMoveTakesTheirSelection(t *testing.T) {
	a, _ := speaking(t, withPeers(t, "{address: 192.0.2.1, asn: 64500, maximumPaths: 4}, {address: 192.0.2.2, asn: 64500}"), nil, func(*bgp.Speaker) {
		t.Error("a speaker was stopped")
	})
	a.setPeers(context.Background())
	one, two := a.peers.speaker(netip.MustParseAddr("192.0.2.1")), a.peers.speaker(netip.MustParseAddr("192.0.2.2"))
	if one == nil || two == nil || one == two {
		t.Fatalf("192.0.2.1 on %p, 192.0.2.2 on %p: want a speaker each", one, two)
	}
	keys := func() map[*bgp.Speaker]string {
		out := map[*bgp.Speaker]string{}
		for _, s := range a.speakers {
			out[s.Speaker] = s.key
		}
		return out
	}
	a.SetConfig(context.Background(), withPeers(t, "{address: 192.0.2.1, asn: 64500, maximumPaths: 3}, {address: 192.0.2.2, asn: 64500}"))
	if got := keys(); len(got) != 2 || got[one] != "3" || got[two] != "255" || a.peers.speaker(netip.MustParseAddr("192.0.2.1")) != one {
		t.Errorf("after maximumPaths 4 became 3: speakers by selection %v; want 192.0.2.1's speaker now of selection 3, with its router", got)
	}
	a.SetConfig(context.Background(), withPeers(t, "{address: 192.0.2.1, asn: 64500}, {address: 192.0.2.2, asn: 64500}"))
	if got := keys(); len(got) != 2 || got[one] != "255" || got[two] != "255" || a.peers.speaker(netip.MustParseAddr("192.0.2.1")) != one {
		t.Errorf("after 192.0.2.1 joined the default selection: speakers by selection %v; want both of it, each with its router", got)
	}
}

// A reload that gives one of two routers sharing a speaker values of its
// own, or changes its session's settings, hands both routers over: their
// speaker stops (gracefully: the routers keep its paths), and each gets a
// new speaker of its selection loaded with the old one's table, held to
// it until they have it. Neither router is taken off a running speaker
// (a Cease: the router drops every path of the session at once).
func TestARouterSplitOffIsHandedOverGracefully(t *testing.T) {
	for _, tc := range []struct {
		name, peers string
		apart       bool // in different selections now
	}{
		{"a selection of its own", "{address: 192.0.2.1, asn: 64500}, {address: 192.0.2.2, asn: 64500, maximumPaths: 4}", true},
		{"a new hold time", "{address: 192.0.2.1, asn: 64500}, {address: 192.0.2.2, asn: 64500, holdTime: 30s}", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			applied := map[*bgp.Speaker][]string{}
			var stopped []*bgp.Speaker
			a, _ := speaking(t, withPeers(t, "{address: 192.0.2.1, asn: 64500}, {address: 192.0.2.2, asn: 64500}"), func(s *bgp.Speaker, peers []bgp.Peer) {
				var names []string
				for _, p := range peers {
					names = append(names, p.Address.String())
				}
				applied[s] = names
			}, func(s *bgp.Speaker) { stopped = append(stopped, s) })
			a.setPeers(context.Background())
			shared := a.peers.speaker(netip.MustParseAddr("192.0.2.1"))
			if shared == nil || a.peers.speaker(netip.MustParseAddr("192.0.2.2")) != shared {
				t.Fatalf("want both routers on one speaker")
			}
			clear(applied)
			a.SetConfig(context.Background(), withPeers(t, tc.peers))
			if !slices.Equal(stopped, []*bgp.Speaker{shared}) {
				t.Errorf("stopped %v, want the shared speaker %p", stopped, shared)
			}
			if names, ok := applied[shared]; ok {
				t.Errorf("the shared speaker was given %v: a router taken off it gets a Cease", names)
			}
			one, two := a.peers.speaker(netip.MustParseAddr("192.0.2.1")), a.peers.speaker(netip.MustParseAddr("192.0.2.2"))
			if one == nil || two == nil || (one == two) == tc.apart || one == shared || two == shared {
				t.Fatalf("192.0.2.1 on %p, 192.0.2.2 on %p (shared %p): want new speakers, one each: %v", one, two, shared, tc.apart)
			}
			if tc.apart && (!slices.Equal(applied[one], []string{"192.0.2.1"}) || !slices.Equal(applied[two], []string{"192.0.2.2"})) {
				t.Errorf("the new speakers were given %v and %v", applied[one], applied[two])
			}
			if !tc.apart && !slices.Equal(applied[one], []string{"192.0.2.1", "192.0.2.2"}) {
				t.Errorf("the new speaker was given %v", applied[one])
			}
			a.mu.Lock()
			for _, s := range a.speakers {
				if s.Speaker == shared {
					t.Errorf("the stopped speaker is still running")
				}
			}
			a.mu.Unlock()
		})
	}
}

// A speaker one of whose routers has graceful restart off is not stopped
// when another router of it moves: stopped, it would end that router's
// session (and its paths) for nothing. The router that moves leaves it.
func TestARouterWithoutGracefulRestartKeepsItsSpeaker(t *testing.T) {
	applied := map[*bgp.Speaker][]string{}
	a, _ := speaking(t, withPeers(t, "{address: 192.0.2.1, asn: 64500, gracefulRestart: {enabled: false}}, {address: 192.0.2.2, asn: 64500}"), func(s *bgp.Speaker, peers []bgp.Peer) {
		var names []string
		for _, p := range peers {
			names = append(names, p.Address.String())
		}
		applied[s] = names
	}, func(*bgp.Speaker) { t.Error("a speaker was stopped") })
	a.setPeers(context.Background())
	shared := a.peers.speaker(netip.MustParseAddr("192.0.2.1"))
	a.SetConfig(context.Background(), withPeers(t, "{address: 192.0.2.1, asn: 64500, gracefulRestart: {enabled: false}}, {address: 192.0.2.2, asn: 64500, maximumPaths: 4}"))
	if a.peers.speaker(netip.MustParseAddr("192.0.2.1")) != shared || !slices.Equal(applied[shared], []string{"192.0.2.1"}) {
		t.Errorf("192.0.2.1 (graceful restart off) on %p, its speaker given %v; want it alone on %p", a.peers.speaker(netip.MustParseAddr("192.0.2.1")), applied[shared], shared)
	}
	if two := a.peers.speaker(netip.MustParseAddr("192.0.2.2")); two == nil || two == shared {
		t.Errorf("192.0.2.2 on %p: want a speaker of its own", two)
	}
}

// bgp.listenPort is kept from the start (a restart changes it), so a
// reload can leave it set while splitting the peers into two selections:
// the second selection's speaker must not try to bind the port the first
// holds (it would not start at all). Only the first speaker listens; the
// others dial out, as they do anyway.
func TestOnlyOneSpeakerListens(t *testing.T) {
	port := freeTCPPort(t)
	cfg := mustParse(t, fmt.Sprintf(`
loadBalancer:
  pools:
  - {name: site, addresses: [10.1.0.0/24]}
bgp:
  localASN: 64512
  routerID: 127.0.0.1
  listenPort: %d
  listenAddresses: [127.0.0.1]
  peers:
  - {address: 127.0.0.2, port: %d, asn: 64500}
  - {address: 127.0.0.3, port: %d, asn: 64500}
`, port, freeTCPPort(t), freeTCPPort(t)))
	// As keepStartSettings leaves it after a reload that split the peers.
	cfg.BGP.Peers[1].MaximumPaths = 4
	a := New(cfg, &report.Reporter{Events: (&events{}).add})
	ctx, cancel := context.WithCancel(t.Context())
	a.running, a.failed = ctx, map[string]bool{}
	t.Cleanup(func() { cancel(); a.stopAll() })
	if err := a.Apply(map[string][]bgp.Announcement{"255": nil, "4": nil}); err != nil {
		t.Fatal(err)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.speakers) != 2 || a.speakers[0].key == a.speakers[1].key || len(a.failed) > 0 {
		t.Errorf("speakers %v, failed to start %v: want both selections' speakers running", a.speakers, a.failed)
	}
}

func freeTCPPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// Each peer's series say what it is sent, by the families it takes: its
// selection's table.
func TestPeerPathsCountWhatEachRouterIsSent(t *testing.T) {
	cfg := mustParse(t, fmt.Sprintf(`
loadBalancer:
  pools:
  - {name: site, addresses: [10.1.0.0/24, "2001:db8::/120"]}
bgp:
  localASN: 64512
  routerID: 127.0.0.1
  peers:
  - {address: 127.0.0.2, port: %d, asn: 64500, maximumPaths: 1, addressFamilies: [ipv4-unicast]}
  - {address: 127.0.0.3, port: %d, asn: 64500}
`, freeTCPPort(t), freeTCPPort(t)))
	a := New(cfg, &report.Reporter{Events: (&events{}).add})
	ctx, cancel := context.WithCancel(t.Context())
	a.running, a.failed = ctx, map[string]bool{}
	t.Cleanup(func() { cancel(); a.stopAll() })
	hops := func(addrs ...string) []netip.Addr {
		var out []netip.Addr
		for _, s := range addrs {
			out = append(out, netip.MustParseAddr(s))
		}
		return out
	}
	v4, v6 := netip.MustParsePrefix("10.1.0.1/32"), netip.MustParsePrefix("2001:db8::1/128")
	if err := a.Apply(map[string][]bgp.Announcement{
		"1":   {{Prefix: v4, NextHops: hops("192.0.2.1")}},
		"255": {{Prefix: v4, NextHops: hops("192.0.2.1", "192.0.2.2", "192.0.2.3")}, {Prefix: v6, NextHops: hops("2001:db8:1::1", "2001:db8:1::2")}},
	}); err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, line := range strings.Split(gathered(t, "baremetal_bgp_peer_paths"), "\n") {
		for _, peer := range []string{"127.0.0.2", "127.0.0.3"} {
			for _, family := range []string{"IPv4", "IPv6"} {
				if strings.Contains(line, `"`+peer+`"`) && strings.Contains(line, `"`+family+`"`) {
					var v float64
					fmt.Sscan(line[strings.LastIndex(line, "value:")+len("value:"):], &v)
					got[peer+" "+family] = v
				}
			}
		}
	}
	if want := map[string]float64{"127.0.0.2 IPv4": 1, "127.0.0.3 IPv4": 3, "127.0.0.3 IPv6": 2}; !maps.Equal(got, want) {
		t.Errorf("paths sent by peer and family %v, want %v (none of IPv6 for 127.0.0.2, which takes IPv4 only)", got, want)
	}
}
