package bfd

import (
	"net"
	"net/netip"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/ipv4"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/component-base/metrics/testutil"
)

func init() { legacyregistry.MustRegister(Metrics()...) }

func TestNext(t *testing.T) {
	for _, c := range []struct {
		local, remote State
		want          State
		diag          Diagnostic
	}{
		{Down, AdminDown, Down, NoDiagnostic},
		{Down, Down, Init, NoDiagnostic},
		{Down, Init, Up, NoDiagnostic},
		{Down, Up, Down, NoDiagnostic},
		{Init, AdminDown, Down, NeighborSignaledDown},
		{Init, Down, Init, NoDiagnostic},
		{Init, Init, Up, NoDiagnostic},
		{Init, Up, Up, NoDiagnostic},
		{Up, AdminDown, Down, NeighborSignaledDown},
		{Up, Down, Down, NeighborSignaledDown},
		{Up, Init, Up, NoDiagnostic},
		{Up, Up, Up, NoDiagnostic},
		{AdminDown, Up, AdminDown, NoDiagnostic},
	} {
		got, diag, changed := next(c.local, c.remote)
		if got != c.want || diag != c.diag || changed != (got != c.local) {
			t.Errorf("%s receiving %s: %s (%s, changed %v), want %s (%s)", c.local, c.remote, got, diag, changed, c.want, c.diag)
		}
	}
}

func TestParse(t *testing.T) {
	good := packet{State: Up, DetectMult: 3, MyDisc: 7, YourDisc: 9, DesiredMinTx: 300000, RequiredMinRx: 300000}
	if p, err := parse(good.marshal()); err != nil || p != good {
		t.Fatalf("a good packet: %+v %v, want %+v", p, err, good)
	}
	edit := func(f func(b []byte)) []byte { b := good.marshal(); f(b); return b }
	for name, c := range map[string]struct {
		b    []byte
		want error
	}{
		"short":                      {good.marshal()[:20], errShort},
		"version 0":                  {edit(func(b []byte) { b[0] &^= 0xe0 }), errVersion},
		"authentication":             {edit(func(b []byte) { b[1] |= flagAuth }), errAuth},
		"length beyond the datagram": {edit(func(b []byte) { b[3] = 48 }), errMalformed},
		"multipoint":                 {edit(func(b []byte) { b[1] |= flagMultipoint }), errMultipoint},
		"detect multiplier 0":        {edit(func(b []byte) { b[2] = 0 }), errMalformed},
		"my discriminator 0":         {edit(func(b []byte) { clear(b[4:8]) }), errMalformed},
		"Up naming no session":       {edit(func(b []byte) { clear(b[8:12]) }), errMalformed},
		"poll and final":             {edit(func(b []byte) { b[1] |= flagPoll | flagFinal }), errMalformed},
	} {
		if _, err := parse(c.b); err != c.want {
			t.Errorf("%s: %v, want %v", name, err, c.want)
		}
	}
	down := good
	down.State, down.YourDisc = Down, 0
	if _, err := parse(down.marshal()); err != nil {
		t.Errorf("Down naming no session: %v", err)
	}
}

// pair is two Servers on loopback addresses, each the other's router.
type pair struct {
	a, b         *Server
	aAddr, bAddr netip.Addr
	mu           sync.Mutex
	changes      []string // a's
}

func freePort(t *testing.T) int {
	t.Helper()
	c, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).Port
}

func newPair(t *testing.T, timers Timers) *pair {
	p := &pair{aAddr: netip.MustParseAddr("127.0.0.1"), bAddr: netip.MustParseAddr("127.0.0.2")}
	aPort, bPort := freePort(t), freePort(t)
	p.a = New(Options{ListenPort: aPort, PeerPort: bPort, OnChange: func(c Change) {
		p.mu.Lock()
		defer p.mu.Unlock()
		why := c.Diag.String()
		if c.AdminDown {
			why = "admin_down"
		}
		p.changes = append(p.changes, c.From.String()+"→"+c.To.String()+" "+why)
	}})
	p.b = New(Options{ListenPort: bPort, PeerPort: aPort})
	t.Cleanup(p.a.Close)
	t.Cleanup(p.b.Close)
	if err := p.a.Set([]Peer{{Address: p.bAddr, Source: p.aAddr, Timers: timers}}); err != nil {
		t.Fatal(err)
	}
	if err := p.b.Set([]Peer{{Address: p.aAddr, Source: p.bAddr, Timers: timers}}); err != nil {
		t.Fatal(err)
	}
	return p
}

func waitState(t *testing.T, s *Server, peer netip.Addr, want State, within time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for time.Since(start) < within {
		if s.States()[peer] == want {
			return time.Since(start)
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("the session with %s is %s after %s, want %s", peer, s.States()[peer], within, want)
	return 0
}

var fast = Timers{TransmitInterval: 50 * time.Millisecond, ReceiveInterval: 50 * time.Millisecond, DetectMultiplier: 3}

// A router that goes silent (a cut link) is declared down within its
// detection time, and the next hop's owner is told so; one that says it is
// being deconfigured (AdminDown) is down at once.
func TestSilenceIsDetected(t *testing.T) {
	p := newPair(t, fast)
	waitState(t, p.a, p.bAddr, Up, 5*time.Second)
	waitState(t, p.b, p.aAddr, Up, 5*time.Second)
	// Up, they poll down to the configured rate; give it a few intervals.
	time.Sleep(300 * time.Millisecond)

	// b's sockets vanish without a word, as behind a cut cable.
	p.b.mu.Lock()
	for _, l := range p.b.listeners {
		l.conn.Close()
	}
	for _, s := range p.b.sessions {
		s.conn.Close()
	}
	p.b.mu.Unlock()
	took := waitState(t, p.a, p.bAddr, Down, 2*time.Second)
	t.Logf("down %s after the last packet could be sent (detection time %s)", took, 3*fast.ReceiveInterval)
	// Generous for a loaded CI machine; a session at the slow rate (1 s)
	// or waiting for the BGP hold time would be far beyond it.
	if took > 600*time.Millisecond {
		t.Errorf("down after %s, want within about the detection time of %s", took, 3*fast.ReceiveInterval)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if want := "Up→Down detection_time_expired"; len(p.changes) == 0 || p.changes[len(p.changes)-1] != want {
		t.Errorf("changes told: %v, want the last to be %q", p.changes, want)
	}
	if v, _ := testutil.GetCounterMetricValue(sessionDowns.WithLabelValues(p.bAddr.String(), "detection_time_expired")); v != 1 {
		t.Errorf("baremetal_bfd_session_downs_total{diagnostic=detection_time_expired} = %v, want 1", v)
	}
}

func TestRemovedRouterIsToldAdminDown(t *testing.T) {
	p := newPair(t, fast)
	waitState(t, p.a, p.bAddr, Up, 5*time.Second)
	if err := p.b.Set(nil); err != nil {
		t.Fatal(err)
	}
	took := waitState(t, p.a, p.bAddr, Down, time.Second)
	if took > 500*time.Millisecond {
		t.Errorf("down %s after the router was deconfigured, want at once", took)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if want := "Up→Down admin_down"; p.changes[len(p.changes)-1] != want {
		t.Errorf("changes told: %v, want the last to be %q", p.changes, want)
	}
}

// The attacker knows both discriminators and sends AdminDown: from off the
// link (TTL below 255) or from another address, it is dropped and the
// session stays Up. The same packet from the router, sent with TTL 255,
// does end it: the drops are not for a packet that would fail anyway.
func TestSpoofedPacketsAreDropped(t *testing.T) {
	p := newPair(t, fast)
	waitState(t, p.a, p.bAddr, Up, 5*time.Second)
	waitState(t, p.b, p.aAddr, Up, 5*time.Second)
	p.a.mu.Lock()
	aSess := p.a.sessions[p.bAddr]
	port := p.a.opts.ListenPort
	p.a.mu.Unlock()
	p.b.mu.Lock()
	bDisc := p.b.sessions[p.aAddr].local
	p.b.mu.Unlock()
	kill := packet{State: AdminDown, Diagnostic: AdministrativelyDown, DetectMult: 3, MyDisc: bDisc, YourDisc: aSess.local, DesiredMinTx: 50000, RequiredMinRx: 50000}.marshal()
	send := func(from string, ttl int) {
		t.Helper()
		c, err := net.DialUDP("udp4", &net.UDPAddr{IP: net.ParseIP(from)}, &net.UDPAddr{IP: net.ParseIP("127.0.0.1"), Port: port})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if err := ipv4.NewConn(c).SetTTL(ttl); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Write(kill); err != nil {
			t.Fatal(err)
		}
	}
	ttlDrops, _ := testutil.GetCounterMetricValue(dropped.WithLabelValues("ttl"))
	sourceDrops, _ := testutil.GetCounterMetricValue(dropped.WithLabelValues("wrong_source"))
	p.mu.Lock()
	seen := len(p.changes)
	p.mu.Unlock()
	send(p.bAddr.String(), 254)
	send("127.0.0.3", 255)
	time.Sleep(300 * time.Millisecond)
	p.mu.Lock()
	after := slices.Clone(p.changes[seen:])
	p.mu.Unlock()
	if len(after) > 0 {
		t.Fatalf("spoofed AdminDown packets changed the session: %v", after)
	}
	if v, _ := testutil.GetCounterMetricValue(dropped.WithLabelValues("ttl")); v != ttlDrops+1 {
		t.Errorf("packets dropped for their TTL: %v, want %v", v, ttlDrops+1)
	}
	if v, _ := testutil.GetCounterMetricValue(dropped.WithLabelValues("wrong_source")); v != sourceDrops+1 {
		t.Errorf("packets dropped for their source: %v, want %v", v, sourceDrops+1)
	}
	send(p.bAddr.String(), 255)
	// It comes back Up at once (the router never went): what counts is
	// that it fell.
	start := time.Now()
	for {
		p.mu.Lock()
		fell := slices.Contains(p.changes[seen:], "Up→Down admin_down")
		p.mu.Unlock()
		if fell {
			break
		}
		if time.Since(start) > time.Second {
			t.Fatal("AdminDown from the router itself did not end the session: the test could not fail")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A router gone from the config leaves no session and no listener behind.
func TestRemovedSessionsLeaveNothing(t *testing.T) {
	p := newPair(t, fast)
	waitState(t, p.a, p.bAddr, Up, 5*time.Second)
	p.a.Set(nil)
	p.a.mu.Lock()
	sessions, listeners := len(p.a.sessions), len(p.a.listeners)
	p.a.mu.Unlock()
	if sessions != 0 || listeners != 0 {
		t.Errorf("after Set(nil): %d sessions, %d listeners, want none", sessions, listeners)
	}
	// The listener's port is free again: a config without BFD holds none.
	c, err := net.ListenPacket("udp4", "0.0.0.0:"+strconv.Itoa(p.a.opts.ListenPort))
	if err != nil {
		t.Errorf("the listener's port is still held: %v", err)
	} else {
		c.Close()
	}
}
