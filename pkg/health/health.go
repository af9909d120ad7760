// Package health probes the nodes a load balancer sends to, as a cloud load
// balancer does (KEP-3836): kube-proxy's /healthz on every node, in rounds,
// with thresholds, and tells which nodes may carry traffic.
//
// It is a pure package: it knows nodes by name and address, nothing of
// Kubernetes API objects.
package health

import (
	"context"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Settings say how nodes are probed.
type Settings struct {
	Port     uint16
	Path     string
	Interval time.Duration
	Timeout  time.Duration
	// Unhealthy consecutive failures take a serving node out; Healthy
	// consecutive successes put a node in.
	Unhealthy, Healthy int
}

// Target is a node to probe, at one of its addresses.
type Target struct {
	Name string
	Addr netip.Addr
}

// Probe checks one target; nil means healthy.
type Probe func(ctx context.Context, t Target) error

// Change is a node put in or taken out of service by a round.
type Change struct {
	Name    string
	Serving bool
	// First is a node put in service for the first time: one added after
	// the checker had looked, never out before.
	First bool
	// Err is the last failure, for a node taken out.
	Err error
}

// Round is what one round of probes found.
type Round struct {
	Probes, Failed int
	Changes        []Change
	// Held are the serving nodes that all failed at once and are kept in
	// service: a prober cut off from every node must not withdraw them all.
	// Nil when nothing is held.
	Held []string
	// Errs are the failures of the held nodes, by name.
	Errs map[string]error
}

// Checker probes its targets in rounds until its context ends.
type Checker struct {
	probe Probe
	// OnRound, if set, is called after every round, from the probing
	// goroutine.
	OnRound func(Round)

	mu       sync.Mutex
	settings Settings
	targets  map[string]*state
	// probed is set once a round has probed at least one target: until
	// then every target serves, so a restarted CCM withdraws nothing before
	// it has looked. A round with no targets looked at nothing.
	probed bool
	// holding is set while every serving node is held (see apply): the
	// failures counted meanwhile are more likely the prober's than theirs.
	holding bool
	// wake starts a round at once (new targets, new settings).
	wake chan struct{}
	// prober keeps the connections of the HTTP probe.
	prober *prober
}

type state struct {
	addr       netip.Addr
	serving    bool
	fails, oks int
	lastErr    error
	// served is set once the node has served: a node added after the
	// checker had looked serves for the first time once it passes.
	served bool
}

// New returns a Checker that probes with HTTP GET (see HTTPProbe) unless
// probe is given.
func New(s Settings, probe Probe) *Checker {
	c := &Checker{settings: s, targets: map[string]*state{}, wake: make(chan struct{}, 1), prober: newProber()}
	c.probe = probe
	if probe == nil {
		c.probe = c.httpProbe
	}
	return c
}

// SetSettings changes how nodes are probed; their states stay.
func (c *Checker) SetSettings(s Settings) {
	c.mu.Lock()
	c.settings = s
	c.mu.Unlock()
	c.kick()
}

// SetTargets sets the nodes to probe. A node new to the checker serves at
// once only before the first round that probed a target; after it, it must
// pass Healthy probes first, as an instance added to a cloud load balancer
// does. No targets start it over: the next first ones serve until a round
// has looked.
func (c *Checker) SetTargets(ts []Target) {
	c.mu.Lock()
	if len(ts) == 0 {
		c.probed, c.holding = false, false
	}
	added := false
	keep := make(map[string]bool, len(ts))
	for _, t := range ts {
		keep[t.Name] = true
		if st, ok := c.targets[t.Name]; ok {
			st.addr = t.Addr
			continue
		}
		c.targets[t.Name] = &state{addr: t.Addr, serving: !c.probed, served: !c.probed}
		added = true
	}
	for name := range c.targets {
		if !keep[name] {
			delete(c.targets, name)
		}
	}
	c.mu.Unlock()
	if added {
		c.kick()
	}
}

// Targets are the nodes probed, by name.
func (c *Checker) Targets() []Target {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]Target, 0, len(c.targets))
	for name, st := range c.targets {
		out = append(out, Target{Name: name, Addr: st.addr})
	}
	slices.SortFunc(out, func(a, b Target) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Serving reports whether a node may carry traffic: a target in service,
// or a node the checker does not probe.
func (c *Checker) Serving(name string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	st, ok := c.targets[name]
	return !ok || st.serving
}

// NotServing counts the targets out of service.
func (c *Checker) NotServing() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := 0
	for _, st := range c.targets {
		if !st.serving {
			out++
		}
	}
	return out
}

func (c *Checker) kick() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// MaxRoundsPending bounds the rounds whose probes are awaited at once.
const MaxRoundsPending = 4

// roundsPending is how many rounds may await their probes at once: enough
// that one starts every interval while a dead node's probes wait out their
// timeout, so its failures come an interval apart and not a timeout apart.
func (s Settings) roundsPending() int {
	if s.Interval <= 0 {
		return 1
	}
	n := int((s.Timeout + s.Interval - 1) / s.Interval)
	return max(1, min(n, MaxRoundsPending))
}

// Run probes in rounds until ctx ends: a round starts Interval after the
// last one started, or at once when a target is added, without waiting for
// the last round's probes unless roundsPending rounds await theirs. Rounds
// are applied, and OnRound called, in the order they started.
func (c *Checker) Run(ctx context.Context) {
	var wg sync.WaitGroup
	defer func() {
		wg.Wait()
		c.prober.forget(nil)
	}()
	// finished hears of each round done; its buffer holds every round that
	// can be pending, so no round waits to tell.
	finished := make(chan struct{}, MaxRoundsPending)
	pending := 0
	applied := make(chan struct{})
	close(applied)
	for {
		c.mu.Lock()
		limit := c.settings.roundsPending()
		c.mu.Unlock()
		for pending >= limit {
			select {
			case <-ctx.Done():
				return
			case <-finished:
				pending--
			}
		}
		start := time.Now()
		pending++
		wg.Add(1)
		prev, done := applied, make(chan struct{})
		applied = done
		go func() {
			defer wg.Done()
			targets, errs := c.probeAll(ctx)
			<-prev
			if ctx.Err() == nil {
				r := c.finish(targets, errs)
				if c.OnRound != nil {
					c.OnRound(r)
				}
			}
			close(done)
			finished <- struct{}{}
		}()
		c.mu.Lock()
		wait := time.NewTimer(c.settings.Interval - time.Since(start))
		c.mu.Unlock()
	waiting:
		for {
			select {
			case <-ctx.Done():
				wait.Stop()
				return
			case <-c.wake:
				break waiting
			case <-wait.C:
				break waiting
			case <-finished:
				pending--
			}
		}
		wait.Stop()
	}
}

// probeAll probes every target at once; their results are judged together
// (finish), so that nodes failing at once are judged together.
func (c *Checker) probeAll(ctx context.Context) ([]Target, []error) {
	c.mu.Lock()
	timeout := c.settings.Timeout
	targets := make([]Target, 0, len(c.targets))
	for name, st := range c.targets {
		targets = append(targets, Target{Name: name, Addr: st.addr})
	}
	c.mu.Unlock()

	errs := make([]error, len(targets))
	var wg sync.WaitGroup
	for i, t := range targets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			errs[i] = c.probe(pctx, t)
		}()
	}
	wg.Wait()
	return targets, errs
}

// finish applies a round's results and closes the kept connections of
// nodes no longer probed (removed, moved, the port changed): the prober
// keeps only this round's.
func (c *Checker) finish(targets []Target, errs []error) Round {
	c.mu.Lock()
	port := c.settings.Port
	c.mu.Unlock()
	keep := make(map[netip.AddrPort]bool, len(targets))
	for _, t := range targets {
		keep[netip.AddrPortFrom(t.Addr, port)] = true
	}
	c.prober.forget(keep)
	return c.apply(targets, errs)
}

// apply counts a round's results into the targets' states. Callers must
// not hold c.mu.
func (c *Checker) apply(targets []Target, errs []error) Round {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := Round{Probes: len(targets)}
	var out []string
	servingBefore := 0
	for _, st := range c.targets {
		if st.serving {
			servingBefore++
		}
	}
	for i, t := range targets {
		st, ok := c.targets[t.Name]
		if !ok || st.addr != t.Addr { // removed or moved while probed
			continue
		}
		if err := errs[i]; err != nil {
			r.Failed++
			st.fails, st.oks, st.lastErr = st.fails+1, 0, err
			if st.serving && st.fails >= c.settings.Unhealthy {
				out = append(out, t.Name)
			}
			continue
		}
		st.fails, st.oks, st.lastErr = 0, st.oks+1, nil
		if !st.serving && st.oks >= c.settings.Healthy {
			r.Changes = append(r.Changes, Change{Name: t.Name, Serving: true, First: !st.served})
			st.serving, st.served = true, true
		}
	}
	if len(targets) > 0 {
		c.probed = true
	}
	servingAfter := servingBefore + len(r.Changes) - len(out)
	if len(out) > 0 && servingAfter == 0 {
		// Every serving node failed at once: more likely the prober is cut
		// off than all nodes dead. Keep them; the next round judges again.
		slices.Sort(out)
		r.Held = out
		r.Errs = map[string]error{}
		for _, name := range out {
			r.Errs[name] = c.targets[name].lastErr
		}
		c.holding = true
		return r
	}
	if c.holding {
		// A node passes again: the prober is back. The held nodes' failures
		// were counted while it was not, so each is judged on new ones: a
		// starved prober that wakes up with one answer in hand would
		// otherwise withdraw every other node at once.
		c.holding = false
		for _, name := range out {
			c.targets[name].fails = 0
		}
		out = nil
	}
	for _, name := range out {
		st := c.targets[name]
		st.serving = false
		r.Changes = append(r.Changes, Change{Name: name, Err: st.lastErr})
	}
	slices.SortFunc(r.Changes, func(a, b Change) int { return strings.Compare(a.Name, b.Name) })
	return r
}

// URL is where a target is probed.
func (s Settings) URL(addr netip.Addr) string {
	return "http://" + net.JoinHostPort(addr.String(), strconv.Itoa(int(s.Port))) + s.Path
}
