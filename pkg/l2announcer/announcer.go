// Package l2announcer answers ARP and Neighbor Solicitations for the
// desired state's layer 2 VIPs, on the segment the replica's host shares
// with the nodes and the clients (every replica answers, see
// provider.balancer.converge). It owns the segments (an l2.Responder each), the
// hardware addresses they learn, and the tables they answer from: for each
// VIP one node, chosen by rendezvous hashing among the VIP's carriers whose
// hardware address is known there, so VIPs spread over the nodes and only
// a leaving node's VIPs move. No agent runs on the nodes.
//
// A node's hardware address is the inventory's (macAddresses) when it
// lists one, and, when it lists several, the one seen on the segment; else
// it is learned by asking the segment for the node's address there. The
// inventory wins: it is what the operator states, and learning can be
// misled by a host that answers for others (proxy ARP).
package l2announcer

import (
	"context"
	"maps"
	"net"
	"net/netip"
	"slices"
	"sync"
	"time"

	"k8s.io/klog/v2"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/desired"
	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/l2"
	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/report"
)

// Segment is an interface answered on (an l2.Responder).
type Segment interface {
	Subnets() []netip.Prefix
	Learned(ip netip.Addr) (net.HardwareAddr, bool)
	Set(l2.Table)
}

// Retry is how often an interface that could not be opened is tried
// again, and learned addresses refreshed.
const Retry = 10 * time.Second

// settle is the least time between two convergences of the tables.
const settle = 100 * time.Millisecond

// learnWait bounds how long a replica whose segment opens waits for the
// nodes' hardware addresses before its first answers; one that answers
// later is a candidate from then on. Until then the other replicas answer.
const learnWait = time.Second

// Announcer answers for layer 2 VIPs while Run runs.
type Announcer struct {
	report *report.Reporter
	// Open starts answering on an interface until ctx ends (a seam for
	// tests; nil opens an l2.Responder).
	Open func(ctx context.Context, iface string, a *Announcer) (Segment, error)

	kick chan struct{}

	mu       sync.Mutex
	want     *desired.State
	running  bool
	segments map[string]*opened
	tried    map[string]time.Time // when each unopened interface was last tried
	failed   map[string]error     // why each would not open
	sockets  sockets
	vips     report.Gauges
	notOpen  report.Gauges
	answered map[netip.Addr][]Answer // by the last convergence, per interface
}

type opened struct {
	Segment
	stop context.CancelFunc
}

// New is an announcer reporting to r.
func New(r *report.Reporter) *Announcer {
	return &Announcer{report: r, kick: make(chan struct{}, 1), segments: map[string]*opened{},
		tried: map[string]time.Time{}, failed: map[string]error{}, vips: report.Gauges{Vec: vipsPerNode},
		notOpen: report.Gauges{Vec: interfaceNotOpen}}
}

// Apply makes st the state answered from.
func (a *Announcer) Apply(st *desired.State) {
	a.mu.Lock()
	a.want = st
	a.mu.Unlock()
	a.Converge()
}

// Converge asks for the tables to be converged; requests coalesce.
func (a *Announcer) Converge() {
	select {
	case a.kick <- struct{}{}:
	default:
	}
}

// Run answers until ctx ends: it opens the interfaces the state names and
// converges their tables on request.
func (a *Announcer) Run(ctx context.Context) {
	a.mu.Lock()
	a.running = true
	a.mu.Unlock()
	t := time.NewTicker(Retry)
	defer t.Stop()
	var last time.Time
	for {
		a.openSegments(ctx)
		a.converge()
		last = time.Now()
		select {
		case <-ctx.Done():
			a.mu.Lock()
			for _, s := range a.segments {
				s.stop()
			}
			clear(a.segments)
			a.running = false
			a.answered = nil
			a.mu.Unlock()
			return
		case <-a.kick:
		case <-t.C:
		}
		if wait := settle - time.Since(last); wait > 0 {
			time.Sleep(wait)
		}
	}
}

// Status is what readiness is judged on: the interfaces answered on (none
// while not running), whether each is open, and the sockets down, by
// "interface/protocol".
type Status struct {
	Interfaces []string
	Open       map[string]bool
	SocketDown map[string]bool
}

// Status is the segments' state now.
func (a *Announcer) Status() Status {
	st := Status{Open: map[string]bool{}, SocketDown: a.sockets.down()}
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.running || a.want == nil {
		return st
	}
	for iface := range a.want.Interfaces {
		st.Interfaces = append(st.Interfaces, iface)
		st.Open[iface] = a.segments[iface] != nil
	}
	slices.Sort(st.Interfaces)
	return st
}

// Answered is who answers for each layer 2 VIP since the last convergence,
// on each interface it is answered on; nil while not running.
func (a *Announcer) Answered() map[netip.Addr][]Answer {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.running {
		return nil
	}
	return maps.Clone(a.answered)
}

// openSegments opens the interfaces the state names that are not open,
// and closes those it no longer names. A failure is said once per error.
func (a *Announcer) openSegments(ctx context.Context) {
	a.mu.Lock()
	var want map[string]string
	if a.want != nil {
		want = a.want.Interfaces
	}
	for iface, s := range a.segments {
		if _, ok := want[iface]; !ok {
			s.stop()
			delete(a.segments, iface)
		}
	}
	for iface := range a.tried {
		if _, ok := want[iface]; !ok {
			delete(a.tried, iface)
			delete(a.failed, iface)
		}
	}
	var missing []string
	for iface := range want {
		if a.segments[iface] == nil && time.Since(a.tried[iface]) >= Retry {
			missing = append(missing, iface)
			a.tried[iface] = time.Now()
		}
	}
	open := a.Open
	a.mu.Unlock()
	if open == nil {
		open = listen
	}
	var fresh []Segment
	for _, iface := range missing {
		sctx, stop := context.WithCancel(ctx)
		seg, err := open(sctx, iface, a)
		a.mu.Lock()
		if err != nil {
			stop()
			a.failed[iface] = err
		} else {
			delete(a.failed, iface)
			delete(a.tried, iface)
			a.segments[iface] = &opened{Segment: seg, stop: stop}
			fresh = append(fresh, seg)
			klog.InfoS("Answering ARP and NDP for layer 2 VIPs", "interface", iface)
		}
		a.mu.Unlock()
	}
	a.reportUnopened(want)
	a.learnFirst(fresh)
}

// learnFirst asks newly opened segments for the hardware addresses of the
// nodes that carry traffic, and waits for them up to learnWait, so that a
// starting replica's first table is the one the others answer from:
// without it its VIPs would all go to the nodes the inventory gives a MAC,
// and clients would hear two stories until it learned the rest.
func (a *Announcer) learnFirst(segs []Segment) {
	if len(segs) == 0 {
		return
	}
	a.mu.Lock()
	var nodes []*desired.Node
	if a.want != nil {
		nodes = a.want.Carrying
	}
	a.mu.Unlock()
	for deadline := time.Now().Add(learnWait); ; time.Sleep(learnWait / 10) {
		missing := 0
		for _, seg := range segs {
			subnets := seg.Subnets()
			for _, node := range nodes {
				if !onSegment(node, subnets) {
					continue // nothing to learn
				}
				if _, ok, _ := macOn(seg, subnets, node); !ok {
					missing++
				}
			}
		}
		if missing == 0 || time.Now().After(deadline) {
			return
		}
	}
}

// converge gives each open segment its table.
func (a *Announcer) converge() {
	a.mu.Lock()
	if a.want == nil || len(a.segments) == 0 {
		a.mu.Unlock()
		return
	}
	st := a.want
	segs := make(map[string]Segment, len(a.segments))
	for iface, s := range a.segments {
		segs[iface] = s.Segment
	}
	a.mu.Unlock()
	ans := answer(st, segs)
	a.mu.Lock()
	a.answered = ans.chosen
	a.mu.Unlock()
	a.report.Report("l2", ans.problems, func(p report.Problem) bool {
		if p.Object.Kind != "Service" {
			return true
		}
		vip, err := netip.ParseAddr(p.Subject)
		return err == nil && st.Holds(vip)
	})
	a.vips.Set(ans.series)
	vipsUnanswered.Set(float64(ans.unanswered))
	for iface, s := range segs {
		s.Set(ans.tables[iface])
	}
}
