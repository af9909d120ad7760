package bfd

import (
	"maps"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
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

func newPair(t *testing.T, timers Timers) *pair { return newPairOf(t, timers, false, 0) }

// newPairOf is a pair of sessions, multihop (RFC 5883) if asked, each
// side taking the other's packets from minimumTTL up.
func newPairOf(t *testing.T, timers Timers, multihop bool, minimumTTL uint8) *pair {
	p := &pair{aAddr: netip.MustParseAddr("127.0.0.1"), bAddr: netip.MustParseAddr("127.0.0.2")}
	aPort, bPort := freePort(t), freePort(t)
	aOpts, bOpts := Options{ListenPort: aPort, PeerPort: bPort}, Options{ListenPort: bPort, PeerPort: aPort}
	if multihop {
		// Single-hop ports of their own, where no session listens.
		aOpts.MultihopListenPort, bOpts.MultihopPeerPort = aPort, aPort
		bOpts.MultihopListenPort, aOpts.MultihopPeerPort = bPort, bPort
		aOpts.ListenPort, bOpts.ListenPort = freePort(t), freePort(t)
		aOpts.PeerPort, bOpts.PeerPort = bOpts.ListenPort, aOpts.ListenPort
	}
	aOpts.OnChange = func(c Change) {
		p.mu.Lock()
		defer p.mu.Unlock()
		why := c.Diag.String()
		if c.AdminDown {
			why = "admin_down"
		}
		p.changes = append(p.changes, c.From.String()+"→"+c.To.String()+" "+why)
	}
	p.a, p.b = New(aOpts), New(bOpts)
	t.Cleanup(p.a.Close)
	t.Cleanup(p.b.Close)
	if err := p.a.Set([]Peer{{Address: p.bAddr, Source: p.aAddr, Timers: timers, Multihop: multihop, MinimumTTL: minimumTTL}}); err != nil {
		t.Fatal(err)
	}
	if err := p.b.Set([]Peer{{Address: p.aAddr, Source: p.bAddr, Timers: timers, Multihop: multihop, MinimumTTL: minimumTTL}}); err != nil {
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
	p.lastChange(t, "Up→Down detection_time_expired")
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
	p.lastChange(t, "Up→Down admin_down")
}

// lastChange waits for the owner to be told want: the state is read
// before the change is told, so it may come a moment after.
func (p *pair) lastChange(t *testing.T, want string) {
	t.Helper()
	var told []string
	for start := time.Now(); time.Since(start) < time.Second; time.Sleep(5 * time.Millisecond) {
		p.mu.Lock()
		told = slices.Clone(p.changes)
		p.mu.Unlock()
		if len(told) > 0 && told[len(told)-1] == want {
			return
		}
	}
	t.Errorf("changes told: %v, want the last to be %q", told, want)
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

// sendFrom sends b to a's listener from the address from with the TTL ttl,
// as any host on the router's link can.
func (p *pair) sendFrom(t *testing.T, from string, ttl int, b []byte) {
	t.Helper()
	p.send(t, from, p.aAddr.String(), p.a.opts.ListenPort, ttl, b)
}

// send sends b to a's port on address to, from address from, with ttl.
func (p *pair) send(t *testing.T, from, to string, port, ttl int, b []byte) {
	t.Helper()
	c, err := net.DialUDP("udp4", &net.UDPAddr{IP: net.ParseIP(from)}, &net.UDPAddr{IP: net.ParseIP(to), Port: port})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := ipv4.NewConn(c).SetTTL(ttl); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write(b); err != nil {
		t.Fatal(err)
	}
}

// A host on the router's link knows the router's address but not the
// discriminators: its Down (or AdminDown) naming no session, sent with TTL
// 255 from the router's address, must not end a session past Down (RFC
// 5880 §6.8.6 lets a session be selected by its discriminator alone).
// Before the rule, one such packet ended every replica's session, and
// with it the router's BGP session without graceful restart.
func TestForgedZeroDiscriminatorIsDropped(t *testing.T) {
	for _, st := range []State{Down, AdminDown, Init, Up} {
		t.Run(st.String(), func(t *testing.T) {
			p := newPair(t, fast)
			waitState(t, p.a, p.bAddr, Up, 5*time.Second)
			waitState(t, p.b, p.aAddr, Up, 5*time.Second)
			p.mu.Lock()
			seen := len(p.changes)
			p.mu.Unlock()
			drops, _ := testutil.GetCounterMetricValue(dropped.WithLabelValues("no_discriminator"))
			forged := packet{State: st, Diagnostic: AdministrativelyDown, DetectMult: 3, MyDisc: 0x5eed, DesiredMinTx: 10000, RequiredMinRx: 10000}.marshal()
			for range 50 {
				p.sendFrom(t, p.bAddr.String(), 255, forged)
				time.Sleep(10 * time.Millisecond)
			}
			time.Sleep(200 * time.Millisecond)
			p.mu.Lock()
			after := slices.Clone(p.changes[seen:])
			p.mu.Unlock()
			if len(after) > 0 || p.a.States()[p.bAddr] != Up {
				t.Fatalf("forged %s packets naming no session changed it: %v (now %s)", st, after, p.a.States()[p.bAddr])
			}
			// Init and Up naming no session are malformed (§6.8.6).
			if v, _ := testutil.GetCounterMetricValue(dropped.WithLabelValues("no_discriminator")); (st == Down || st == AdminDown) && v != drops+50 {
				t.Errorf("packets dropped for naming no session: %v, want %v", v-drops, 50)
			}
		})
	}
}

// router is a BFD peer the test speaks for, packet by packet: a's
// session's router at 127.0.0.2.
type router struct {
	conn    *net.UDPConn
	aListen *net.UDPAddr
	rx      chan received
}

type received struct {
	packet
	at time.Time
}

func newRouter(t *testing.T, timers Timers) (*Server, *router) {
	t.Helper()
	aAddr, bAddr := netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("127.0.0.2")
	aPort, bPort := freePort(t), freePort(t)
	conn, err := net.ListenUDP("udp4", &net.UDPAddr{IP: bAddr.AsSlice(), Port: bPort})
	if err != nil {
		t.Fatal(err)
	}
	if err := ipv4.NewConn(conn).SetTTL(255); err != nil {
		t.Fatal(err)
	}
	r := &router{conn: conn, aListen: &net.UDPAddr{IP: aAddr.AsSlice(), Port: aPort}, rx: make(chan received, 1000)}
	go func() {
		buf := make([]byte, 1500)
		for {
			n, err := conn.Read(buf)
			if err != nil {
				close(r.rx)
				return
			}
			if p, err := parse(buf[:n]); err == nil {
				r.rx <- received{p, time.Now()}
			}
		}
	}()
	a := New(Options{ListenPort: aPort, PeerPort: bPort})
	t.Cleanup(func() { a.Close(); conn.Close() })
	if err := a.Set([]Peer{{Address: bAddr, Source: aAddr, Timers: timers}}); err != nil {
		t.Fatal(err)
	}
	return a, r
}

func (r *router) send(t *testing.T, p packet) {
	t.Helper()
	if _, err := r.conn.WriteTo(p.marshal(), r.aListen); err != nil {
		t.Fatal(err)
	}
}

// next is a's next packet, within d.
func (r *router) next(t *testing.T, d time.Duration) received {
	t.Helper()
	select {
	case p := <-r.rx:
		return p
	case <-time.After(d):
		t.Fatalf("no packet from the session within %s", d)
		return received{}
	}
}

// A router heard once and then silent is forgotten after a detection
// time, even while the session is Down: its discriminator is not sent on
// for ever (RFC 5880 §6.8.1), where a restarted router would take it for
// a stale session's.
func TestSilentRouterIsForgottenInDown(t *testing.T) {
	_, r := newRouter(t, fast)
	first := r.next(t, 3*time.Second)
	// AdminDown keeps a's session Down and tells it the router's
	// discriminator; detection time 3 × 600 ms, and a sends at 0.75–1 s
	// while Down.
	r.send(t, packet{State: AdminDown, Diagnostic: AdministrativelyDown, DetectMult: 3, MyDisc: 0xbeef, YourDisc: first.MyDisc, DesiredMinTx: 600000, RequiredMinRx: 50000})
	named, forgotten := false, false
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) && !forgotten {
		p := r.next(t, 3*time.Second)
		if p.State != Down {
			t.Fatalf("the session went %s on the router's AdminDown", p.State)
		}
		named = named || p.YourDisc == 0xbeef
		forgotten = named && p.YourDisc == 0
	}
	if !named || !forgotten {
		t.Fatalf("the router's discriminator: named %v, forgotten %v; want it named, then forgotten after the detection time", named, forgotten)
	}
}

// New timers are sent with a Poll and run on only once the router has
// answered it with a Final (RFC 5880 §6.8.3): until then the router still
// expects packets at the old rate, and a session that slowed down at once
// would be declared down by it.
func TestSlowerTimersWaitForTheFinal(t *testing.T) {
	a, r := newRouter(t, fast)
	const routerDisc = 0xbeef
	aDisc := r.next(t, 3*time.Second).MyDisc
	r.send(t, packet{State: Init, DetectMult: 3, MyDisc: routerDisc, YourDisc: aDisc, DesiredMinTx: 50000, RequiredMinRx: 50000})
	waitState(t, a, netip.MustParseAddr("127.0.0.2"), Up, 2*time.Second)
	// The router keeps the session up, answering a's Polls with Final
	// until told to stop.
	answerPolls := make(chan bool, 1)
	answerPolls <- true
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		answer := true
		tick := time.NewTicker(40 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case answer = <-answerPolls:
			case <-tick.C:
				r.send(t, packet{State: Up, DetectMult: 3, MyDisc: routerDisc, YourDisc: aDisc, DesiredMinTx: 50000, RequiredMinRx: 50000, Final: answer})
			}
		}
	}()
	time.Sleep(300 * time.Millisecond) // the Poll of reaching Up ends
	answerPolls <- false
	slow := fast
	slow.TransmitInterval = time.Second
	a.Set([]Peer{{Address: netip.MustParseAddr("127.0.0.2"), Source: netip.MustParseAddr("127.0.0.1"), Timers: slow}})
	// Drain what was sent before the change, then time a's packets while
	// its Poll is unanswered.
	time.Sleep(20 * time.Millisecond)
	for len(r.rx) > 0 {
		<-r.rx
	}
	last := r.next(t, time.Second)
	var longest time.Duration
	polled := false
	for end := time.Now().Add(time.Second); time.Now().Before(end); {
		p := r.next(t, 2*time.Second)
		polled = polled || p.Poll
		longest = max(longest, p.at.Sub(last.at))
		last = p
	}
	if !polled {
		t.Fatal("the new timers were not sent with a Poll")
	}
	if longest > 100*time.Millisecond {
		t.Fatalf("a's packets %s apart before the router's Final, want the old rate (50 ms): the router would declare it down", longest)
	}
	answerPolls <- true
	time.Sleep(100 * time.Millisecond)
	for len(r.rx) > 0 {
		<-r.rx
	}
	first := r.next(t, 2*time.Second)
	second := r.next(t, 2*time.Second)
	if gap := second.at.Sub(first.at); gap < 500*time.Millisecond {
		t.Fatalf("a's packets %s apart after the router's Final, want the new rate (0.75–1 s)", gap)
	}
}

// A multihop session (RFC 5883) comes up on the multihop port, and takes
// only the router's packets that came no further than its minimum TTL
// allows, sent to the session's own address: a host farther away, or one
// that reaches another address of the replica's host, cannot end it. Each
// forged packet names the session and says AdminDown; the last, within
// the rules, shows that such a packet would have ended it.
func TestMultihopTakesOnlyPacketsWithinItsReach(t *testing.T) {
	p := newPairOf(t, fast, true, 253)
	waitState(t, p.a, p.bAddr, Up, 5*time.Second)
	waitState(t, p.b, p.aAddr, Up, 5*time.Second)
	p.a.mu.Lock()
	disc, kinds := p.a.sessions[p.bAddr].local, slices.Collect(maps.Keys(p.a.listeners))
	p.a.mu.Unlock()
	if !slices.Equal(kinds, []listenerKind{{is4: true, multihop: true}}) {
		t.Errorf("listeners %v, want the IPv4 multihop one only", kinds)
	}
	adminDown := packet{State: AdminDown, Diagnostic: AdministrativelyDown, DetectMult: 3, MyDisc: 0x5eed, YourDisc: disc, DesiredMinTx: 50000, RequiredMinRx: 50000}.marshal()
	for _, tc := range []struct {
		name     string
		to       string
		port     int
		ttl      int
		drop     string // the reason counted; "" taken
		wantDown bool
	}{
		{"from farther than the minimum TTL", "127.0.0.1", p.a.opts.MultihopListenPort, 252, "ttl", false},
		{"to another address of the host", "127.0.0.3", p.a.opts.MultihopListenPort, 255, "wrong_destination", false},
		{"to the single-hop port", "127.0.0.1", p.a.opts.ListenPort, 255, "", false},
		{"within reach", "127.0.0.1", p.a.opts.MultihopListenPort, 253, "", true},
	} {
		var before float64
		if tc.drop != "" {
			before, _ = testutil.GetCounterMetricValue(dropped.WithLabelValues(tc.drop))
		}
		p.mu.Lock()
		seen := len(p.changes)
		p.mu.Unlock()
		for range 5 {
			p.send(t, p.bAddr.String(), tc.to, tc.port, tc.ttl, adminDown)
		}
		time.Sleep(150 * time.Millisecond)
		p.mu.Lock()
		// The real router's packets bring a session that went down back.
		down := slices.Contains(p.changes[seen:], "Up→Down admin_down")
		p.mu.Unlock()
		if down != tc.wantDown {
			t.Errorf("%s: 5 forged AdminDown packets took the session down: %v, want %v", tc.name, down, tc.wantDown)
		}
		if tc.drop != "" {
			if v, _ := testutil.GetCounterMetricValue(dropped.WithLabelValues(tc.drop)); v != before+5 {
				t.Errorf("%s: %v dropped for %q, want 5", tc.name, v-before, tc.drop)
			}
		}
	}
}

// A replica too starved to read the router's packets in time (here its
// listener is held up, as by a host whose CPU is busy) does not take the
// router for dead while the packets wait in its socket: the verdict waits
// for them, up to one more detection time, and the session stays Up.
func TestUnreadPacketsAreNoSilence(t *testing.T) {
	p := newPair(t, fast)
	waitState(t, p.a, p.bAddr, Up, 5*time.Second)
	waitState(t, p.b, p.aAddr, Up, 5*time.Second)
	time.Sleep(300 * time.Millisecond)
	before, _ := testutil.GetCounterMetricValue(deferred)

	// a's listener blocks handing over its next packet; b's keep coming
	// and wait in a's socket, for longer than the detection time (150 ms).
	p.a.mu.Lock()
	time.Sleep(250 * time.Millisecond)
	p.a.mu.Unlock()
	time.Sleep(200 * time.Millisecond)

	if got := p.a.States()[p.bAddr]; got != Up {
		t.Errorf("the session is %s, want Up: the router's packets were there, unread", got)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.changes {
		if strings.Contains(c, "→Down") {
			t.Errorf("the session went down while the router's packets waited unread: %v", p.changes)
			break
		}
	}
	if after, _ := testutil.GetCounterMetricValue(deferred); after <= before {
		t.Errorf("baremetal_bfd_verdicts_deferred_total stayed at %v", after)
	}
}

// TestVerdict: when a detection timer that ran out declares the router
// down, and when it looks again.
func TestVerdict(t *testing.T) {
	t0 := time.Unix(1000, 0)
	const detect, interval = 900 * time.Millisecond, 300 * time.Millisecond
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	for _, tc := range []struct {
		name         string
		now, checkAt time.Time
		behind       bool
		down         bool
		wait         time.Duration
	}{
		{"on time, nothing unread: down", ms(1), t0, false, true, 0},
		{"on time, packets unread: look again an interval on", ms(1), t0, true, false, interval},
		{"late by over an interval: look again", ms(400), t0, false, false, interval},
		{"late by less than an interval, nothing unread: down", ms(200), t0, false, true, 0},
		{"still unread near the bound: look again at the bound", ms(800), ms(700), true, false, 100 * time.Millisecond},
		{"a detection time past the deadline: down whatever is unread", ms(900), ms(800), true, true, 0},
		{"a detection time past the deadline, late: down", ms(2000), ms(800), false, true, 0},
	} {
		down, wait := verdict(tc.now, tc.checkAt, t0, detect, interval, tc.behind)
		if down != tc.down || wait != tc.wait {
			t.Errorf("%s: down %v, wait %s; want %v, %s", tc.name, down, wait, tc.down, tc.wait)
		}
	}
}
