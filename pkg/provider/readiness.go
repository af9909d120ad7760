package provider

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/bgpannouncer"
)

// A replica is ready once routers and the segment hear from it what they
// should: a rollout that waits for it (the chart's readiness probe, its
// PodDisruptionBudget) never takes the last announcing replica away. Ready
// means its table is derived from the cluster and, where BGP is in use, at
// least minEstablished of its configured peers (a count or a share,
// rounded up, and at least one) have an established session: the speaker
// holds the whole table before any session opens, so an established peer
// has it. A router in maintenance is down for every replica alike; it
// must not make them all unready (a rollout would stall, and a drain could
// no longer tell the replicas routers rely on from the others). Every
// interface of a layer 2 pool has its sockets open.

// DefaultMinEstablished is the share of the peers a ready replica has
// sessions with unless --readiness-min-established says otherwise.
var DefaultMinEstablished = intstr.FromString("50%")

// readyState is what readiness is judged on, read under one lock.
type readyState struct {
	synced      bool // the informers have listed the cluster
	bgp         bool // the config announces over BGP
	speaking    bool // the speaker runs (not during an API-server outage)
	peers       []netip.Addr
	established map[netip.Addr]bool
	l2          []string // the interfaces answered on
	open        map[string]bool
	socketDown  map[string]bool // by "interface/protocol"
}

// notReady is why a replica is not ready, or "" when it is.
func notReady(s readyState, minEstablished intstr.IntOrString) string {
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
		want, err := intstr.GetScaledValueFromIntOrPercent(&minEstablished, len(s.peers), true)
		if err != nil {
			want = len(s.peers)
		}
		want = min(max(want, 1), len(s.peers))
		if up := len(s.peers) - len(down); up < want {
			return fmt.Sprintf("BGP sessions established with %d of %d peers, %d needed (--readiness-min-established %s); not with %s",
				up, len(s.peers), want, minEstablished.String(), strings.Join(down, ", "))
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

// SetMinEstablished sets how many of its BGP peers (a count, or a share
// such as "50%") a ready replica has established sessions with; call it
// before the readiness probe is served.
func (c *Cloud) SetMinEstablished(v intstr.IntOrString) { c.minEstablished = v }

// Ready is nil once this replica announces what it should; else it says
// why not.
func (c *Cloud) Ready() error {
	if why := notReady(c.lb.readyState(), c.minEstablished); why != "" {
		return fmt.Errorf("%s", why)
	}
	return nil
}

func (b *balancer) readyState() readyState {
	b.mu.Lock()
	speaks := bgpannouncer.Speaks(b.cfg)
	b.mu.Unlock()
	bs, ls := b.bgp.Status(), b.l2.Status()
	established := map[netip.Addr]bool{}
	for addr, st := range bs.Sessions {
		established[addr] = st.Established
	}
	return readyState{
		synced:      b.cluster.listed.Load(),
		bgp:         speaks,
		speaking:    bs.Speaking,
		peers:       bs.Peers,
		established: established,
		l2:          ls.Interfaces,
		open:        ls.Open,
		socketDown:  ls.SocketDown,
	}
}
