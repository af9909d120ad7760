package bmc

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeBMC is one machine's BMC for the poller's rules: its answer is set
// by the test, and it counts sessions and questions.
type fakeBMC struct {
	mu       sync.Mutex
	state    PowerState
	err      error
	panics   bool
	block    chan struct{} // questions wait on it when set
	dials    int
	asks     int
	closes   int
	inFlight *atomic.Int32
	most     *atomic.Int32
}

func (f *fakeBMC) set(state PowerState, err error) {
	f.mu.Lock()
	f.state, f.err = state, err
	f.mu.Unlock()
}

func (f *fakeBMC) counts() (dials, asks, closes int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.dials, f.asks, f.closes
}

type fakeConn struct{ f *fakeBMC }

func (c fakeConn) Power(ctx context.Context) (PowerState, error) {
	f := c.f
	if f.inFlight != nil {
		n := f.inFlight.Add(1)
		defer f.inFlight.Add(-1)
		for {
			m := f.most.Load()
			if n <= m || f.most.CompareAndSwap(m, n) {
				break
			}
		}
	}
	f.mu.Lock()
	f.asks++
	block, state, err, panics := f.block, f.state, f.err, f.panics
	f.mu.Unlock()
	if block != nil {
		select {
		case <-block:
		case <-ctx.Done():
			return Unknown, ctx.Err()
		}
	}
	if panics {
		var m map[string]int
		m["x"]++ // a library's nil map on a hostile answer
	}
	return state, err
}

func (c fakeConn) Close() { c.f.mu.Lock(); c.f.closes++; c.f.mu.Unlock() }

type fakeSite struct {
	mu   sync.Mutex
	bmcs map[string]*fakeBMC
}

func (s *fakeSite) bmc(name string) *fakeBMC {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.bmcs[name] == nil {
		s.bmcs[name] = &fakeBMC{state: On}
	}
	return s.bmcs[name]
}

func (s *fakeSite) dial(_ context.Context, t Target) (Conn, error) {
	f := s.bmc(t.Machine)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.dials++
	return fakeConn{f}, nil
}

func targets(names ...string) []Target {
	var out []Target
	for _, n := range names {
		out = append(out, Target{Machine: n, Protocol: IPMI, Address: n + ":623"})
	}
	return out
}

func runPoller(t *testing.T, s Settings, site *fakeSite) *Poller {
	t.Helper()
	p := NewPoller(s, site.dial)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { p.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return p
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not so after 5s: %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func state(p *Poller, name string) PowerState { r, _ := p.Reading(name); return r.State }

// TestNoAnswerIsUnknownNeverOff: a BMC that said Off and then fails (an
// error, a panic in the protocol library, a timeout) is Unknown at once,
// with the reason; Off again only when it answers Off.
func TestNoAnswerIsUnknownNeverOff(t *testing.T) {
	site := &fakeSite{bmcs: map[string]*fakeBMC{}}
	p := runPoller(t, Settings{Interval: 10 * time.Millisecond, Background: time.Hour, Timeout: 50 * time.Millisecond, Concurrency: 2, MaxBackoff: 10 * time.Millisecond}, site)
	var mu sync.Mutex
	var changes []string
	p.OnChange = func(m string, r Reading) {
		mu.Lock()
		changes = append(changes, fmt.Sprintf("%s %s", m, r.State))
		mu.Unlock()
	}
	p.SetTargets(targets("a"))
	if r, ok := p.Reading("a"); !ok || r.State != Unknown || r.Err == nil {
		t.Fatalf("before the first answer: %+v %v", r, ok)
	}
	p.Watch([]string{"a"})
	f := site.bmc("a")
	f.set(Off, nil)
	eventually(t, "a off", func() bool { return state(p, "a") == Off })

	for _, fail := range []struct {
		name   string
		breaks func()
		why    string
	}{
		{"error", func() { f.set(Off, errors.New("RAKP 2: bad HMAC")) }, "RAKP 2"},
		{"panic", func() { f.mu.Lock(); f.panics = true; f.mu.Unlock() }, "could not be read"},
		{"timeout", func() { f.mu.Lock(); f.block = make(chan struct{}); f.mu.Unlock() }, "deadline"},
		{"garbage state", func() { f.set("", nil) }, "no power state"},
	} {
		fail.breaks()
		eventually(t, fail.name+": unknown", func() bool { return state(p, "a") == Unknown })
		r, _ := p.Reading("a")
		if r.Err == nil || !strings.Contains(r.Err.Error(), fail.why) {
			t.Errorf("%s: reason %v, want one that says %q", fail.name, r.Err, fail.why)
		}
		f.mu.Lock()
		f.panics, f.block, f.state, f.err = false, nil, Off, nil
		f.mu.Unlock()
		eventually(t, fail.name+": off again", func() bool { return state(p, "a") == Off })
	}
	mu.Lock()
	defer mu.Unlock()
	if changes[0] != "a off" {
		t.Errorf("first change %q", changes[0])
	}
}

// TestSessionsKeptWhileWatched: a watched machine's session serves every
// question; an unwatched one logs out after each; a machine that leaves
// the inventory has its session closed.
func TestSessionsKeptWhileWatched(t *testing.T) {
	site := &fakeSite{bmcs: map[string]*fakeBMC{}}
	p := runPoller(t, Settings{Interval: 10 * time.Millisecond, Background: 30 * time.Millisecond, Timeout: 50 * time.Millisecond, Concurrency: 4}, site)
	p.SetTargets(targets("watched", "other"))
	p.Watch([]string{"watched"})
	w, o := site.bmc("watched"), site.bmc("other")
	eventually(t, "five questions to the watched one", func() bool { _, asks, _ := w.counts(); return asks >= 5 })
	eventually(t, "three questions to the other", func() bool { _, asks, _ := o.counts(); return asks >= 3 })
	if dials, _, closes := w.counts(); dials != 1 || closes != 0 {
		t.Errorf("watched: %d sessions, %d closed; want one, kept", dials, closes)
	}
	dials, asks, closes := o.counts()
	if dials < asks || closes < asks-1 {
		t.Errorf("unwatched: %d sessions, %d questions, %d closed; want a session a question, closed after it", dials, asks, closes)
	}
	p.SetTargets(targets("other"))
	eventually(t, "the removed machine's session closed", func() bool { _, _, closes := w.counts(); return closes == 1 })
	if _, ok := p.Reading("watched"); ok {
		t.Error("a machine no longer listed still has a reading")
	}
}

// TestConcurrencyBounded: however many BMCs are due, at most Concurrency
// are asked at once, and every one is asked.
func TestConcurrencyBounded(t *testing.T) {
	site := &fakeSite{bmcs: map[string]*fakeBMC{}}
	var inFlight, most atomic.Int32
	var names []string
	for i := range 40 {
		n := fmt.Sprintf("m%02d", i)
		names = append(names, n)
		f := site.bmc(n)
		f.inFlight, f.most = &inFlight, &most
		f.block = make(chan struct{})
		close(f.block) // answers at once, but after the count
	}
	p := runPoller(t, Settings{Interval: time.Second, Background: time.Hour, Timeout: time.Second, Concurrency: 3}, site)
	p.SetTargets(targets(names...))
	p.Watch(names)
	eventually(t, "every BMC answered", func() bool {
		for _, n := range names {
			if state(p, n) != On {
				return false
			}
		}
		return true
	})
	if m := most.Load(); m > 3 {
		t.Errorf("%d BMCs asked at once, concurrency 3", m)
	}
}

// TestBackOff is the rule of how long a failing BMC waits.
func TestBackOff(t *testing.T) {
	p := NewPoller(Settings{Interval: 10 * time.Second, Background: 10 * time.Minute, MaxBackoff: time.Minute}, nil)
	tests := []struct {
		watched  bool
		failures int
		want     time.Duration
	}{
		{true, 0, 10 * time.Second},
		{true, 1, 10 * time.Second},
		{true, 2, 20 * time.Second},
		{true, 3, 40 * time.Second},
		{true, 4, time.Minute},
		{true, 40, time.Minute},
		{false, 0, 10 * time.Minute},
		{false, 5, 10 * time.Minute},
	}
	for _, tt := range tests {
		m := &machine{watched: tt.watched, reading: Reading{Failures: tt.failures}}
		if got := p.wait(m); got != tt.want {
			t.Errorf("watched %v, %d failures: wait %s, want %s", tt.watched, tt.failures, got, tt.want)
		}
	}
}

// TestFirstQuestionsSpread: machines listed at once are first asked
// spread over the background interval, the same way on every start.
func TestFirstQuestionsSpread(t *testing.T) {
	p := NewPoller(Settings{Interval: 10 * time.Second, Background: 10 * time.Minute}, nil)
	var names []string
	for i := range 1000 {
		names = append(names, fmt.Sprintf("node-%04d", i))
	}
	p.SetTargets(targets(names...))
	perMinute := map[int]int{}
	for _, n := range names {
		d := p.spread(n)
		if d != p.spread(n) {
			t.Fatal("spread differs for one name")
		}
		perMinute[int(d/time.Minute)]++
	}
	for minute := range 10 {
		if c := perMinute[minute]; c < 50 || c > 150 {
			t.Errorf("minute %d: %d of 1000 first questions", minute, c)
		}
	}
}

// TestWatchedAskedAtOnce: a machine that becomes watched (its Node went
// NotReady) is asked at once, not at its background time.
func TestWatchedAskedAtOnce(t *testing.T) {
	site := &fakeSite{bmcs: map[string]*fakeBMC{}}
	p := runPoller(t, Settings{Interval: 20 * time.Millisecond, Background: time.Hour, Timeout: 50 * time.Millisecond, Concurrency: 1}, site)
	if d := p.spread("zz-late-in-the-hour"); d < time.Minute {
		t.Fatalf("the name's first question is %s into the hour; pick another name", d)
	}
	p.SetTargets(targets("zz-late-in-the-hour"))
	site.bmc("zz-late-in-the-hour").set(Off, nil)
	p.Watch([]string{"zz-late-in-the-hour"})
	eventually(t, "asked once watched", func() bool { return state(p, "zz-late-in-the-hour") == Off })
}

// expiringSite's sessions answer once: a BMC that ends idle sessions
// (its inactivity timeout, a reboot of the BMC) makes a kept session fail.
type expiringSite struct {
	mu    sync.Mutex
	dials int
}

type onceConn struct {
	s    *expiringSite
	used bool
}

func (c *onceConn) Power(context.Context) (PowerState, error) {
	if c.used {
		return Unknown, errors.New("session expired")
	}
	c.used = true
	return Off, nil
}

func (c *onceConn) Close() {}

func (s *expiringSite) dial(context.Context, Target) (Conn, error) {
	s.mu.Lock()
	s.dials++
	s.mu.Unlock()
	return &onceConn{s: s}, nil
}

// TestExpiredSessionIsNoUnknown: a kept session that the BMC ended is
// opened again within the same question; the machine's state does not
// flap to Unknown (which would restart the out-of-service grace period).
func TestExpiredSessionIsNoUnknown(t *testing.T) {
	site := &expiringSite{}
	p := NewPoller(Settings{Interval: 10 * time.Millisecond, Background: time.Hour, Timeout: 50 * time.Millisecond, Concurrency: 1}, site.dial)
	var mu sync.Mutex
	var changes []PowerState
	p.OnChange = func(_ string, r Reading) { mu.Lock(); changes = append(changes, r.State); mu.Unlock() }
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go p.Run(ctx)
	p.SetTargets(targets("a"))
	p.Watch([]string{"a"})
	eventually(t, "three sessions", func() bool { site.mu.Lock(); defer site.mu.Unlock(); return site.dials >= 3 })
	mu.Lock()
	defer mu.Unlock()
	if len(changes) != 1 || changes[0] != Off {
		t.Errorf("state changes %v, want [off]", changes)
	}
}
