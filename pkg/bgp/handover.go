package bgp

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"

	"github.com/osrg/gobgp/v4/api"
)

// Table is what a speaker announces, with each path's ADD-PATH identifier
// as it is on the wire. A speaker that takes over routers from another
// (Load) sends them exactly what they kept as stale, so that a router
// after a graceful restart replaces every path it had and sweeps none:
// FRR 8.4 sweeps at most one stale path per prefix at the End-of-RIB.
type Table struct {
	prefixes map[netip.Prefix]*announced
}

// Table is what the speaker announces now. The entries are never changed
// in place (a convergence replaces them), so the copy is of the map only.
func (s *Speaker) Table() Table {
	s.mu.Lock()
	defer s.mu.Unlock()
	return Table{prefixes: maps.Clone(s.announced)}
}

// Paths is the number of paths in t.
func (t Table) Paths() int {
	n := 0
	for _, a := range t.prefixes {
		n += len(a.hops)
	}
	return n
}

// Load announces t, with its identifiers, from a speaker that has
// announced nothing yet and has no peers: its sessions then start with t,
// and a later SetPaths converges from it path by path, withdrawals sent
// as such. GoBGP numbers a prefix's paths in the order they come; the
// identifiers t does not use (paths gone before the snapshot) are taken by
// stand-ins, withdrawn before any session sees them.
func (s *Speaker) Load(t Table) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.announced) > 0 || len(s.peers) > 0 {
		return errors.New("loading a table into a speaker that announces or has peers")
	}
	b := newBatch(s.srv, s.asn)
	var standIns []func()
	for _, prefix := range slices.SortedFunc(maps.Keys(t.prefixes), comparePrefixes) {
		a := t.prefixes[prefix]
		if len(a.hops) == 0 {
			continue
		}
		pp := b.prefix(prefix, a.attrs)
		byID := map[uint32]hop{}
		for _, h := range a.hops {
			byID[h.id] = h
		}
		for id := uint32(1); id <= a.top; id++ {
			h, ok := byID[id]
			if !ok {
				standIn := hop{addr: a.hops[0].addr, id: id}
				h = standIn
				standIns = append(standIns, func() { b.queue(pp, standIn, true) })
			}
			b.queue(pp, h, false)
		}
	}
	b.flush()
	for _, withdraw := range standIns {
		withdraw()
	}
	b.flush()
	if b.err != nil {
		return fmt.Errorf("loading %d paths: %w", t.Paths(), b.err)
	}
	s.announced = maps.Clone(t.prefixes)
	for prefix, a := range t.prefixes {
		s.paths[family(prefix)] += len(a.hops)
	}
	return nil
}

// Synced is whether the session with peer is established and has been
// sent the speaker's table: a speaker that starts as restarting (RFC
// 4724) sends nothing until it has the End-of-RIB of its peers or its
// deferral time passed, and then its whole table. What SetPaths changes
// after that goes to the peer as updates of what it has.
func (s *Speaker) Synced(ctx context.Context, peer netip.Addr) (bool, error) {
	synced := false
	err := s.srv.ListPeer(ctx, &api.ListPeerRequest{Address: peer.String()}, func(p *api.Peer) {
		if p.State == nil || p.State.SessionState != api.PeerState_SESSION_STATE_ESTABLISHED {
			return
		}
		synced = p.GracefulRestart == nil || !p.GracefulRestart.LocalRestarting
	})
	return synced, err
}
