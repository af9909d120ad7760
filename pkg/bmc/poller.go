package bmc

import (
	"cmp"
	"context"
	"fmt"
	"hash/fnv"
	"slices"
	"sync"
	"time"
)

// Settings bound how BMCs are asked.
type Settings struct {
	// Interval between questions to a watched machine's BMC (a NotReady
	// node's); Background between questions to the others.
	Interval, Background time.Duration
	// Timeout of one question, login included.
	Timeout time.Duration
	// Concurrency is how many BMCs are asked at once.
	Concurrency int
	// MaxBackoff bounds the wait before asking a failing BMC again.
	MaxBackoff time.Duration
}

// DefaultMaxBackoff is Settings.MaxBackoff unless set.
const DefaultMaxBackoff = 2 * time.Minute

// Dialer opens a session with a target's BMC.
type Dialer func(ctx context.Context, t Target) (Conn, error)

// Poller asks every target's BMC for its power state: the watched ones
// every Interval, with their session kept, the others every Background,
// spread over it. A failing BMC is asked again later and later, up to
// MaxBackoff. Readings are kept until the target goes.
type Poller struct {
	// OnChange is called, outside the poller's lock, when a machine's
	// state changes (the first answer included, and the first failure).
	OnChange func(machine string, r Reading)
	// OnAsked is called after every question, for metrics.
	OnAsked func(t Target, err error, took time.Duration)

	dial Dialer
	now  func() time.Time

	mu       sync.Mutex
	settings Settings
	machines map[string]*machine
	inFlight int
	wake     chan struct{}
}

type machine struct {
	target  Target
	watched bool
	reading Reading
	due     time.Time
	asking  bool
	removed bool
	conn    Conn
}

// NewPoller returns a poller that opens sessions with dial (nil: the
// protocols' own).
func NewPoller(s Settings, dial Dialer) *Poller {
	if dial == nil {
		dial = Dial
	}
	return &Poller{dial: dial, now: time.Now, settings: withDefaults(s), machines: map[string]*machine{}, wake: make(chan struct{}, 1)}
}

func withDefaults(s Settings) Settings {
	if s.Concurrency < 1 {
		s.Concurrency = 1
	}
	if s.MaxBackoff == 0 {
		s.MaxBackoff = DefaultMaxBackoff
	}
	return s
}

// SetSettings takes new settings; what is due is not moved.
func (p *Poller) SetSettings(s Settings) {
	p.mu.Lock()
	p.settings = withDefaults(s)
	p.mu.Unlock()
	p.poke()
}

// SetTargets makes targets the machines asked about. A machine whose BMC
// changed starts over as not asked; one no longer listed is forgotten, its
// session closed.
func (p *Poller) SetTargets(targets []Target) {
	p.mu.Lock()
	defer p.poke()
	defer p.mu.Unlock()
	now := p.now()
	listed := make(map[string]bool, len(targets))
	for _, t := range targets {
		listed[t.Machine] = true
		m, ok := p.machines[t.Machine]
		if ok && m.target.same(t) {
			m.target.Credentials = t.Credentials
			continue
		}
		if ok {
			p.forget(m)
		}
		m = &machine{target: t, reading: Reading{State: Unknown, Err: errNotAsked, Since: now}}
		m.due = now.Add(p.spread(t.Machine))
		p.machines[t.Machine] = m
	}
	for name, m := range p.machines {
		if !listed[name] {
			p.forget(m)
			delete(p.machines, name)
		}
	}
}

// forget drops a machine's session, now or, while it is being asked,
// when the question ends.
func (p *Poller) forget(m *machine) {
	m.removed = true
	if !m.asking && m.conn != nil {
		go m.conn.Close()
		m.conn = nil
	}
}

// spread is when, within Background, a new unwatched machine is first
// asked: the same for a name every time, so that a thousand machines
// listed at once are not asked at once.
func (p *Poller) spread(name string) time.Duration {
	if p.settings.Background <= 0 {
		return 0
	}
	h := fnv.New64a()
	h.Write([]byte(name))
	return time.Duration(h.Sum64() % uint64(p.settings.Background))
}

// Watch makes the named machines the watched ones (NotReady nodes'):
// asked at once if not asked lately, then every Interval, their sessions
// kept. The others go back to Background.
func (p *Poller) Watch(machines []string) {
	p.mu.Lock()
	defer p.poke()
	defer p.mu.Unlock()
	watched := make(map[string]bool, len(machines))
	for _, n := range machines {
		watched[n] = true
	}
	now := p.now()
	for name, m := range p.machines {
		was := m.watched
		m.watched = watched[name]
		if m.watched && !was {
			if next := m.reading.Asked.Add(p.settings.Interval); next.Before(m.due) {
				m.due = next
			}
		}
		if !m.watched && was && m.due.Before(now.Add(p.settings.Background)) {
			m.due = m.reading.Asked.Add(p.settings.Background)
		}
	}
}

// Reading is the last word of a machine's BMC; false if it has none.
func (p *Poller) Reading(machine string) (Reading, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	m, ok := p.machines[machine]
	if !ok {
		return Reading{}, false
	}
	return m.reading, true
}

// Readings are every machine's, by machine.
func (p *Poller) Readings() map[string]Reading {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[string]Reading, len(p.machines))
	for name, m := range p.machines {
		out[name] = m.reading
	}
	return out
}

func (p *Poller) poke() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// Run asks BMCs until ctx ends, then closes every session.
func (p *Poller) Run(ctx context.Context) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		next := p.start(ctx)
		timer.Reset(next)
		select {
		case <-ctx.Done():
			p.closeAll()
			return
		case <-p.wake:
		case <-timer.C:
		}
	}
}

// start begins the questions that are due, earliest first (then by
// name), as far as Concurrency allows, and says how long until the next.
func (p *Poller) start(ctx context.Context) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.now()
	var due []*machine
	next := time.Hour
	for _, m := range p.machines {
		if m.asking {
			continue
		}
		if wait := m.due.Sub(now); wait > 0 {
			next = min(next, wait)
			continue
		}
		due = append(due, m)
	}
	slices.SortFunc(due, func(a, b *machine) int {
		return cmp.Or(a.due.Compare(b.due), cmp.Compare(a.target.Machine, b.target.Machine))
	})
	for _, m := range due {
		if p.inFlight >= p.settings.Concurrency {
			// The rest wait for a question to end, which wakes the loop.
			return next
		}
		p.inFlight++
		m.asking = true
		go p.ask(ctx, m, m.target, m.conn, p.settings.Timeout)
	}
	return next
}

// ask asks one BMC, opening a session if none is kept.
func (p *Poller) ask(ctx context.Context, m *machine, t Target, conn Conn, timeout time.Duration) {
	start := p.now()
	qctx, cancel := context.WithTimeout(ctx, timeout)
	state, conn, err := question(qctx, p.dial, t, conn)
	cancel()
	took := p.now().Sub(start)
	if p.OnAsked != nil && ctx.Err() == nil {
		p.OnAsked(t, err, took)
	}

	p.mu.Lock()
	p.inFlight--
	m.asking = false
	now := p.now()
	r := m.reading
	first := r.Asked.IsZero()
	r.Asked = now
	if err != nil {
		r.Failures++
		state = Unknown
		if conn != nil {
			go conn.Close()
			conn = nil
		}
	} else {
		r.Failures = 0
		r.Answered = now
		r.Err = nil
	}
	changed := state != r.State || first
	if state != r.State {
		r.Since = now
	}
	r.State = state
	if err != nil {
		r.Err = err
	}
	m.reading = r
	switch {
	case m.removed:
		if conn != nil {
			go conn.Close()
		}
		changed = false
	case m.watched:
		m.conn = conn
	default:
		// Ready nodes' BMCs are asked every few minutes, longer than a
		// BMC keeps an idle session: log out now.
		if conn != nil {
			go conn.Close()
		}
		m.conn = nil
	}
	m.due = now.Add(p.wait(m))
	p.mu.Unlock()
	p.poke()
	if changed && p.OnChange != nil && ctx.Err() == nil {
		p.OnChange(t.Machine, r)
	}
}

// question asks for the power state, opening a session if conn is nil; a
// panic of a protocol library on a hostile answer is an error too.
func question(ctx context.Context, dial Dialer, t Target, conn Conn) (state PowerState, kept Conn, err error) {
	defer func() {
		if v := recover(); v != nil {
			state, err = Unknown, fmt.Errorf("the BMC's answer could not be read: %v", v)
			if kept != nil {
				kept.Close()
				kept = nil
			}
		}
	}()
	if conn != nil {
		kept = conn
		if state, err = conn.Power(ctx); err == nil {
			return checked(state, kept)
		}
		// A kept session may have ended at the BMC (its inactivity
		// timeout, a restart): one new session, within the same time.
		go conn.Close()
		kept = nil
	}
	if conn, err = dial(ctx, t); err != nil {
		return Unknown, nil, err
	}
	kept = conn
	state, err = conn.Power(ctx)
	if err != nil {
		return Unknown, kept, err
	}
	return checked(state, kept)
}

func checked(state PowerState, conn Conn) (PowerState, Conn, error) {
	if state != On && state != Off {
		return Unknown, conn, fmt.Errorf("the BMC's answer %q is no power state", state)
	}
	return state, conn, nil
}

// wait is how long until a machine is asked again: its interval, doubled
// for every failure in a row up to MaxBackoff (never less than the
// interval).
func (p *Poller) wait(m *machine) time.Duration {
	base := p.settings.Background
	if m.watched {
		base = p.settings.Interval
	}
	if m.reading.Failures == 0 {
		return base
	}
	limit := max(base, p.settings.MaxBackoff)
	d := base
	for i := 1; i < m.reading.Failures && d < limit; i++ {
		d *= 2
	}
	return min(d, limit)
}

func (p *Poller) closeAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, m := range p.machines {
		if m.conn != nil && !m.asking {
			m.conn.Close()
			m.conn = nil
		}
		m.removed = true
	}
}
