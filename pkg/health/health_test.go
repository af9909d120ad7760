package health

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

var settings = Settings{Port: 10256, Path: "/healthz", Interval: time.Second, Timeout: time.Second, Unhealthy: 2, Healthy: 2}

func targets(names ...string) []Target {
	var out []Target
	for i, n := range names {
		out = append(out, Target{Name: n, Addr: netip.AddrFrom4([4]byte{10, 0, 0, byte(i + 1)})})
	}
	return out
}

// roundOf applies one round in which the named nodes fail.
func roundOf(c *Checker, failing string) Round {
	c.mu.Lock()
	var ts []Target
	for name, st := range c.targets {
		ts = append(ts, Target{Name: name, Addr: st.addr})
	}
	c.mu.Unlock()
	errs := make([]error, len(ts))
	for i, t := range ts {
		if strings.Contains(" "+failing+" ", " "+t.Name+" ") {
			errs[i] = errors.New("refused")
		}
	}
	return c.apply(ts, errs)
}

// serving names the targets in service.
func serving(c *Checker, names ...string) string {
	var out []string
	for _, n := range names {
		c.mu.Lock()
		_, target := c.targets[n]
		c.mu.Unlock()
		if target && c.Serving(n) {
			out = append(out, n)
		}
	}
	return strings.Join(out, " ")
}

func TestRounds(t *testing.T) {
	nodes := []string{"a", "b", "c"}
	for _, tc := range []struct {
		name string
		// rounds name the failing nodes of each round; "+d" before a round
		// adds node d as a target.
		rounds  []string
		serving string
		held    string
	}{
		{name: "all serve before the first round", rounds: nil, serving: "a b c"},
		{name: "one failure is not enough", rounds: []string{"a"}, serving: "a b c"},
		{name: "two failures in a row take a node out", rounds: []string{"a", "a"}, serving: "b c"},
		{name: "failures not in a row do not", rounds: []string{"a", "", "a"}, serving: "a b c"},
		{name: "one success is not enough to come back", rounds: []string{"a", "a", ""}, serving: "b c"},
		{name: "two successes bring it back", rounds: []string{"a", "a", "", ""}, serving: "a b c"},
		{name: "all failing at once are held", rounds: []string{"a b c", "a b c"}, serving: "a b c", held: "a b c"},
		{name: "the last good set is held", rounds: []string{"a", "a", "a b c", "a b c"}, serving: "b c", held: "b c"},
		// The failures counted while all were held are the prober's, not
		// the nodes': once one passes, the others are judged on new ones.
		{name: "held nodes are not taken out on the hold's failures once another passes", rounds: []string{"a b c", "a b c", "b c"}, serving: "a b c", held: ""},
		{name: "nor on one new failure", rounds: []string{"a b c", "a b c", "a b c", "b c", "b c"}, serving: "a b c", held: ""},
		{name: "held nodes that fail again go", rounds: []string{"a b c", "a b c", "b c", "b c", "b c"}, serving: "a", held: ""},
		{name: "held nodes that pass again stay", rounds: []string{"a b c", "a b c", "b c", "", "b c"}, serving: "a b c", held: ""},
		{name: "a node added after a round must pass first", rounds: []string{"", "+d", ""}, serving: "a b c"},
		{name: "then serves", rounds: []string{"", "+d", "", ""}, serving: "a b c d"},
		{name: "a failing new node never serves", rounds: []string{"", "+d", "d", "d"}, serving: "a b c"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := New(settings, nil)
			c.SetTargets(targets(nodes...))
			var last Round
			for _, r := range tc.rounds {
				if strings.HasPrefix(r, "+") {
					c.SetTargets(targets(append(slices.Clone(nodes), r[1:])...))
					continue
				}
				last = roundOf(c, r)
			}
			if got := serving(c, "a", "b", "c", "d"); got != tc.serving {
				t.Errorf("serving %q, want %q", got, tc.serving)
			}
			if got := strings.Join(last.Held, " "); got != tc.held {
				t.Errorf("held %q, want %q", got, tc.held)
			}
		})
	}
}

func TestRoundReportsChanges(t *testing.T) {
	c := New(settings, nil)
	c.SetTargets(targets("a", "b"))
	roundOf(c, "b")
	r := roundOf(c, "b")
	if len(r.Changes) != 1 || r.Changes[0].Name != "b" || r.Changes[0].Serving || r.Changes[0].Err == nil {
		t.Fatalf("changes %+v, want b out with its error", r.Changes)
	}
	if r.Probes != 2 || r.Failed != 1 {
		t.Errorf("probes %d failed %d, want 2 and 1", r.Probes, r.Failed)
	}
	roundOf(c, "")
	if r := roundOf(c, ""); len(r.Changes) != 1 || !r.Changes[0].Serving {
		t.Errorf("changes %+v, want b back", r.Changes)
	}
}

// A node put in service for the first time (added after the checker had
// looked) is told apart from one coming back: only the latter is news.
func TestFirstServingIsToldApart(t *testing.T) {
	for _, tc := range []struct {
		name   string
		rounds []string // as in TestRounds
		first  bool
	}{
		{name: "a node added after a round", rounds: []string{"", "+d", "", ""}, first: true},
		{name: "one failing at first, then passing", rounds: []string{"", "+d", "d", "", ""}, first: true},
		{name: "one that served, failed out and came back", rounds: []string{"", "+d", "", "", "d", "d", "", ""}, first: false},
		{name: "one there from the start, back", rounds: []string{"a", "a", "", ""}, first: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := New(settings, nil)
			c.SetTargets(targets("a", "b", "c"))
			var last Round
			for _, r := range tc.rounds {
				if strings.HasPrefix(r, "+") {
					c.SetTargets(targets("a", "b", "c", r[1:]))
					continue
				}
				last = roundOf(c, r)
			}
			if len(last.Changes) != 1 || !last.Changes[0].Serving || last.Changes[0].First != tc.first {
				t.Errorf("last round's changes %+v, want one node in service, first %v", last.Changes, tc.first)
			}
		})
	}
}

func TestRemovedTargetIsNotProbedAndServes(t *testing.T) {
	c := New(settings, nil)
	c.SetTargets(targets("a", "b"))
	roundOf(c, "b")
	roundOf(c, "b")
	c.SetTargets(targets("a"))
	if !c.Serving("b") {
		t.Error("a node the checker no longer probes must not be held out by it")
	}
	if r := roundOf(c, ""); r.Probes != 1 {
		t.Errorf("probed %d targets, want 1", r.Probes)
	}
}

// TestHTTPProbe probes real servers on loopback: only a 200 is healthy; a
// node that accepts the connection but never answers (a stopped
// kube-proxy) fails within the timeout.
func TestHTTPProbe(t *testing.T) {
	handlers := map[string]http.HandlerFunc{
		"ok":       func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) },
		"draining": func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusServiceUnavailable) },
		"frozen":   func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() },
	}
	for name, h := range handlers {
		t.Run(name, func(t *testing.T) {
			srv := httptest.NewServer(h)
			defer srv.Close()
			err := probeAt(t, srv.Listener.Addr().String())
			if (err == nil) != (name == "ok") {
				t.Errorf("probe: %v", err)
			}
		})
	}
	t.Run("nothing listening", func(t *testing.T) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close()
		if err := probeAt(t, addr); err == nil || !strings.Contains(err.Error(), "refused") {
			t.Errorf("probe: %v, want connection refused", err)
		}
	})
}

func probeAt(t *testing.T, hostport string) error {
	t.Helper()
	ap := netip.MustParseAddrPort(hostport)
	s := settings
	s.Port, s.Timeout = ap.Port(), 200*time.Millisecond
	c := New(s, nil)
	ctx, cancel := context.WithTimeout(context.Background(), s.Timeout)
	defer cancel()
	start := time.Now()
	err := c.probe(ctx, Target{Name: "n", Addr: ap.Addr()})
	if d := time.Since(start); d > time.Second {
		t.Errorf("the probe took %v, beyond its timeout", d)
	}
	return err
}

// TestRunTakesOutAStoppedNode runs rounds against two nodes on loopback
// addresses (127.0.0.1 and 127.0.0.2, one port) and stops one.
func TestRunTakesOutAStoppedNode(t *testing.T) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})
	la, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := netip.MustParseAddrPort(la.Addr().String()).Port()
	lb, err := net.Listen("tcp", net.JoinHostPort("127.0.0.2", strconv.Itoa(int(port))))
	if err != nil {
		t.Fatal(err)
	}
	a, b := &http.Server{Handler: ok}, &http.Server{Handler: ok}
	go a.Serve(la)
	go b.Serve(lb)
	defer a.Close()

	c := New(Settings{Port: port, Path: "/healthz", Interval: 10 * time.Millisecond, Timeout: 200 * time.Millisecond, Unhealthy: 2, Healthy: 2}, nil)
	rounds := make(chan Round, 100)
	c.OnRound = func(r Round) {
		select {
		case rounds <- r:
		default:
		}
	}
	c.SetTargets([]Target{{Name: "a", Addr: netip.MustParseAddr("127.0.0.1")}, {Name: "b", Addr: netip.MustParseAddr("127.0.0.2")}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go c.Run(ctx)
	if r := <-rounds; r.Failed != 0 {
		t.Fatalf("first round: %+v", r)
	}
	b.Close()
	deadline := time.After(10 * time.Second)
	for c.Serving("b") {
		select {
		case <-rounds:
		case <-deadline:
			t.Fatal("b still serving 10 s after its server stopped")
		}
	}
	if !c.Serving("a") {
		t.Error("a was taken out with b")
	}
}

// TestEmptyRoundsDoNotJudgeLaterTargets: the checker runs before anything
// gives it targets (a process start, a cluster's first Service, a new
// layer 2 leader). Rounds with nothing to probe have looked at no node, so
// the first targets still serve until a round has probed them.
func TestEmptyRoundsDoNotJudgeLaterTargets(t *testing.T) {
	c := New(settings, nil)
	roundOf(c, "")
	roundOf(c, "")
	c.SetTargets(targets("a", "b"))
	if got := serving(c, "a", "b"); got != "a b" {
		t.Fatalf("after rounds with no targets, the first targets serve %q, want \"a b\"", got)
	}
	// A round that probed them judges the ones added after it.
	roundOf(c, "")
	c.SetTargets(targets("a", "b", "c"))
	if got := serving(c, "a", "b", "c"); got != "a b" {
		t.Errorf("a node added after a round that probed: serving %q, want \"a b\"", got)
	}
}

// TestRunWithNoTargetsFirst runs the checker as the provider does: started
// before the first convergence sets its targets.
func TestRunWithNoTargetsFirst(t *testing.T) {
	s := settings
	s.Interval = 5 * time.Millisecond
	c := New(s, func(context.Context, Target) error { return nil })
	rounds := make(chan Round, 100)
	c.OnRound = func(r Round) {
		select {
		case rounds <- r:
		default:
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go c.Run(ctx)
	<-rounds
	<-rounds
	c.SetTargets(targets("a"))
	if !c.Serving("a") {
		t.Fatal("the first target is out of service before any round probed it")
	}
}

// TestHTTPProbeIsNotRedirected: whoever answers on a node's health port
// must not make the CCM fetch another URL (the control plane's own
// endpoints, a metadata service): a redirect is a failure, not followed,
// and no answer's body is read.
func TestHTTPProbeIsNotRedirected(t *testing.T) {
	followed := make(chan string, 10)
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		followed <- r.URL.String()
	}))
	defer target.Close()
	for _, code := range []int{http.StatusMovedPermanently, http.StatusFound, http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, target.URL+"/metrics", code)
		}))
		err := probeAt(t, srv.Listener.Addr().String())
		srv.Close()
		if err == nil {
			t.Errorf("%d redirect: the probe passed", code)
		} else if strings.Contains(err.Error(), target.URL) {
			t.Errorf("%d redirect: the error names the redirect's target: %v", code, err)
		}
	}
	select {
	case u := <-followed:
		t.Errorf("the probe followed a redirect to %s", u)
	default:
	}
	// An answer of 64 MiB is not read: the probe takes the status line
	// and hangs up, and the node's server cannot finish writing.
	wrote := make(chan error, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
		chunk := []byte(strings.Repeat("a", 1<<20))
		for range 64 {
			if _, err := w.Write(chunk); err != nil {
				wrote <- err
				return
			}
			w.(http.Flusher).Flush()
		}
		wrote <- nil
	}))
	defer srv.Close()
	if err := probeAt(t, srv.Listener.Addr().String()); err != nil {
		t.Errorf("a 200 with a long body: %v", err)
	}
	if err := <-wrote; err == nil {
		t.Error("the node's server wrote all of a 64 MiB answer: the probe read it")
	}
}

// BenchmarkHTTPProbe is one probe of a kube-proxy-like /healthz on
// loopback: the client's and the server's work together (cpu-ns/op is the
// process's CPU, both sides).
func BenchmarkHTTPProbe(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"lastUpdated": "2026-12-05 10:00:00 +0000 UTC","currentTime": "2026-12-05 10:00:01 +0000 UTC", "nodeEligible": true}`))
	}))
	defer srv.Close()
	ap := netip.MustParseAddrPort(srv.Listener.Addr().String())
	s := settings
	s.Port = ap.Port()
	c := New(s, nil)
	t := Target{Name: "n", Addr: ap.Addr()}
	var before, after syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &before)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		if err := c.probe(ctx, t); err != nil {
			b.Fatal(err)
		}
		cancel()
	}
	b.StopTimer()
	syscall.Getrusage(syscall.RUSAGE_SELF, &after)
	cpu := time.Duration(after.Utime.Nano() + after.Stime.Nano() - before.Utime.Nano() - before.Stime.Nano())
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
}

// TestDeadNodeFailsAnIntervalApart: a dead node's probes each wait out
// the timeout. Rounds do not wait for them, so its second failure comes an
// interval after its first, not a timeout after it, and it is out well
// within a timeout of its first failed probe; no more rounds than
// roundsPending await their probes at once.
func TestDeadNodeFailsAnIntervalApart(t *testing.T) {
	s := Settings{Interval: 50 * time.Millisecond, Timeout: 600 * time.Millisecond, Unhealthy: 2, Healthy: 2}
	var mu sync.Mutex
	dead, waiting, mostWaiting := false, 0, 0
	c := New(s, func(ctx context.Context, tg Target) error {
		mu.Lock()
		d := dead && tg.Name == "b"
		if d {
			waiting++
			mostWaiting = max(mostWaiting, waiting)
		}
		mu.Unlock()
		if !d {
			return nil
		}
		<-ctx.Done()
		mu.Lock()
		waiting--
		mu.Unlock()
		return ctx.Err()
	})
	type seen struct {
		at time.Time
		r  Round
	}
	rounds := make(chan seen, 1000)
	c.OnRound = func(r Round) { rounds <- seen{time.Now(), r} }
	c.SetTargets(targets("a", "b"))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go c.Run(ctx)
	<-rounds
	mu.Lock()
	dead = true
	mu.Unlock()
	var firstFailure time.Time
	deadline := time.After(10 * time.Second)
	for c.Serving("b") {
		select {
		case sn := <-rounds:
			if sn.r.Failed > 0 && firstFailure.IsZero() {
				firstFailure = sn.at
			}
		case <-deadline:
			t.Fatal("b still serving 10 s after it died")
		}
	}
	out := time.Since(firstFailure)
	if out >= s.Timeout/2 {
		t.Errorf("b out %v after its first failed probe, want within an interval or so (%v), well within the timeout (%v)", out.Round(time.Millisecond), s.Interval, s.Timeout)
	}
	if !c.Serving("a") {
		t.Error("a was taken out with b")
	}
	mu.Lock()
	defer mu.Unlock()
	if want := s.roundsPending(); mostWaiting > want {
		t.Errorf("%d probes of b awaited at once, want at most %d", mostWaiting, want)
	}
}

func TestRoundsPending(t *testing.T) {
	for _, tc := range []struct {
		interval, timeout time.Duration
		want              int
	}{
		{500 * time.Millisecond, time.Second, 2},
		{500 * time.Millisecond, 1200 * time.Millisecond, 3},
		{time.Second, 10 * time.Millisecond, 1},
		{time.Second, time.Second, 1},
		{100 * time.Millisecond, time.Minute, MaxRoundsPending},
	} {
		s := Settings{Interval: tc.interval, Timeout: tc.timeout}
		if got := s.roundsPending(); got != tc.want {
			t.Errorf("interval %v timeout %v: %d rounds pending, want %d", tc.interval, tc.timeout, got, tc.want)
		}
	}
}
