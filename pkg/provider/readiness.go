package provider

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"sync"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/config"
)

// A replica is ready once routers and the segment hear from it what they
// should: a rollout that waits for it (the chart's readiness probe, its
// PodDisruptionBudget) never takes the last announcing replica away. Ready
// means its table is derived from the cluster and, where BGP is in use,
// every configured peer has an established session (the speaker holds the
// whole table before any session opens, so an established peer has it);
// on the leader, every interface of a layer 2 pool has its sockets open.

// readyState is what readiness is judged on, read under one lock.
type readyState struct {
	synced      bool // the informers have listed the cluster
	bgp         bool // the config announces over BGP
	speaking    bool // the speaker runs (not during an API-server outage)
	peers       []netip.Addr
	established map[netip.Addr]bool
	l2          []string // the interfaces the leader answers on
	open        map[string]bool
	socketDown  map[string]bool // by "interface/protocol"
}

// notReady is why a replica is not ready, or "" when it is.
func notReady(s readyState) string {
	if !s.synced {
		return "the informers have not listed the cluster yet"
	}
	if s.bgp {
		if !s.speaking {
			return "the BGP speaker is not running"
		}
		if len(s.peers) == 0 {
			return "no BGP peer is configured"
		}
		var down []string
		for _, p := range s.peers {
			if !s.established[p] {
				down = append(down, p.String())
			}
		}
		if len(down) > 0 {
			return "BGP sessions not established with " + strings.Join(down, ", ")
		}
	}
	var closed []string
	for _, iface := range s.l2 {
		if !s.open[iface] {
			closed = append(closed, iface)
		}
	}
	for key, down := range s.socketDown {
		if down {
			closed = append(closed, key)
		}
	}
	if len(closed) > 0 {
		slices.Sort(closed)
		return "layer 2 sockets not open on " + strings.Join(closed, ", ")
	}
	return ""
}

// Ready is nil once this replica announces what it should; else it says
// why not.
func (c *Cloud) Ready() error {
	if why := notReady(c.net.readyState()); why != "" {
		return fmt.Errorf("%s", why)
	}
	return nil
}

// liveness is what the speaker and the sockets report of themselves; its
// own lock, as they report from their goroutines.
type liveness struct {
	mu          sync.Mutex
	established map[netip.Addr]bool
	socketDown  map[string]bool
}

func (l *liveness) session(peer netip.Addr, up bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.established == nil {
		l.established = map[netip.Addr]bool{}
	}
	l.established[peer] = up
}

// forgetSessions is for a peer that left, or every peer (none given) when
// the speaker stops.
func (l *liveness) forgetSessions(peers ...netip.Addr) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(peers) == 0 {
		clear(l.established)
	}
	for _, p := range peers {
		delete(l.established, p)
	}
}

// socket records a layer 2 socket's state; gone deletes it (its
// interface closed).
func (l *liveness) socket(iface, protocol string, down, gone bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.socketDown == nil {
		l.socketDown = map[string]bool{}
	}
	key := iface + "/" + protocol
	if gone {
		delete(l.socketDown, key)
		return
	}
	l.socketDown[key] = down
}

// speaksBGP is whether a config has the speaker run.
func speaksBGP(cfg *config.Config) bool {
	return (cfg.LoadBalancer.AnnouncesBGP() || cfg.Routes != nil) && cfg.BGP.LocalASN != 0
}

func (n *network) readyState() readyState {
	n.live.mu.Lock()
	established, socketDown := maps.Clone(n.live.established), maps.Clone(n.live.socketDown)
	n.live.mu.Unlock()
	n.mu.Lock()
	defer n.mu.Unlock()
	s := readyState{
		synced:      n.listedCluster,
		bgp:         speaksBGP(n.cfg),
		speaking:    n.speaker != nil,
		established: established,
		open:        map[string]bool{},
		socketDown:  socketDown,
	}
	for p := range n.peersWanted {
		s.peers = append(s.peers, p)
	}
	slices.SortFunc(s.peers, netip.Addr.Compare)
	if n.leading {
		for iface := range n.l2Interfaces() {
			s.l2 = append(s.l2, iface)
			s.open[iface] = n.segments[iface] != nil
		}
		slices.Sort(s.l2)
	}
	return s
}
