package bgpannouncer

import (
	"context"
	"maps"
	"net/netip"
	"slices"
	"time"

	"k8s.io/klog/v2"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/bgp"
	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/config"
)

// A router's session cannot leave a GoBGP server without a NOTIFICATION
// (a Cease, or with RFC 8538 a Hard Reset), on which the router deletes
// every path of the session at once. Only a server that stops can close
// its sessions without one, and then a router that negotiated graceful
// restart (RFC 4724) keeps the paths as stale until a new session's
// End-of-RIB. So a router that must move to another speaker (a reload gave
// it another selection), or whose session's settings changed, is handed
// over: its speaker stops gracefully, and each of that speaker's routers
// gets a new speaker, of its selection, loaded with the stopped one's
// table, identifiers and all. The new session restarts gracefully and
// sends each router exactly the paths it kept, so the router replaces them
// all and its routes do not change; only then does the new speaker
// converge to its selection's table, path by path, by UPDATEs. A router
// whose paths were sent with identifiers of another table would keep the
// ones not sent again as stale, in use, after the End-of-RIB (FRR 8.4
// sweeps one per prefix).
//
// Routers of the stopped speaker that did not change take the same
// graceful restart, with the same paths. When one of them has graceful
// restart off, the speaker is not stopped (that router would lose its
// paths for nothing): the routers that must move leave it with a Cease.

// handover is a speaker started with the table of another, and the
// routers it took over.
type handover struct {
	to      *speaker
	routers []netip.Addr
	// waitFor are the routers whose sessions were established when they
	// were handed over: they kept the paths as stale.
	waitFor []netip.Addr
}

// handOverLimit bounds how long a speaker that took routers over keeps
// announcing the table it was loaded with, waiting for them to take it. A
// router that comes back later gets its selection's table, and keeps the
// paths not in it as stale until its restart time (FRR 8.4: in use).
var handOverLimit = 30 * time.Second

// syncPoll is how often a new speaker's sessions are looked at.
var syncPoll = 100 * time.Millisecond

// handOver hands the routers of s (mine, those in force and still wanted)
// of which changed must move or restart to new speakers loaded with s's
// table. false if it could not (the speakers are not running).
func (a *Announcer) handOver(ctx context.Context, b config.BGP, s *speaker, mine, changed []netip.Addr,
	inForce map[netip.Addr]bgp.Peer, keyOf map[netip.Addr]string, sessions map[netip.Addr]bgp.PeerState) ([]handover, bool) {
	if ctx == nil {
		return nil, false
	}
	table := s.Table()
	leaving := changed
	if !slices.ContainsFunc(mine, func(addr netip.Addr) bool { return !inForce[addr].GracefulRestart }) {
		leaving = mine
		a.stop(s)
	} else {
		var staying []bgp.Peer
		for _, addr := range mine {
			if !slices.Contains(changed, addr) {
				staying = append(staying, inForce[addr])
			}
		}
		klog.InfoS("BGP routers leave a speaker with a Cease: another router of it has graceful restart off, and stopping the speaker would end that router's session too", "routers", changed)
		if err := applyPeers(ctx, s.Speaker, staying); err != nil {
			klog.ErrorS(err, "Configuring BGP peers")
		}
	}
	byKey := map[string][]netip.Addr{}
	for _, addr := range leaving {
		byKey[keyOf[addr]] = append(byKey[keyOf[addr]], addr)
	}
	var out []handover
	for _, key := range slices.Sorted(maps.Keys(byKey)) {
		to := a.start(ctx, b, key, &table)
		if to == nil {
			continue // the routers go to a speaker of their selection's table, if one starts
		}
		h := handover{to: to, routers: byKey[key]}
		for _, addr := range h.routers {
			if sessions[addr].Established {
				h.waitFor = append(h.waitFor, addr)
			}
		}
		klog.InfoS("BGP routers handed over to a new speaker with the paths they have; their sessions restart gracefully", "routers", h.routers, "selection", key, "paths", table.Paths())
		out = append(out, h)
	}
	return out, true
}

// release lets the speaker of h converge to its selection's table once
// the routers it took over were sent the table it was loaded with (or
// handOverLimit passed), so that what changes reaches them as UPDATEs.
func (a *Announcer) release(ctx context.Context, h handover) {
	deadline := time.Now().Add(handOverLimit)
	t := time.NewTicker(syncPoll)
	defer t.Stop()
	pending := slices.Clone(h.waitFor)
	for len(pending) > 0 && a.runs(h.to) {
		pending = slices.DeleteFunc(pending, func(peer netip.Addr) bool {
			synced, _ := h.to.Synced(ctx, peer)
			return synced
		})
		if len(pending) == 0 {
			break
		}
		if time.Now().After(deadline) {
			klog.InfoS("BGP routers handed over to a new speaker have not taken its table in time; it announces its selection's table now", "routers", pending, "after", handOverLimit)
			break
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
	a.applyMu.Lock()
	defer a.applyMu.Unlock()
	a.mu.Lock()
	h.to.held = false
	paths, ok := a.tables[h.to.key]
	runs := slices.Contains(a.speakers, h.to)
	a.mu.Unlock()
	if ok && runs {
		if err := a.setPaths(h.to.Speaker, paths); err != nil {
			klog.ErrorS(err, "Converging BGP paths after a hand-over")
		}
	}
}

// runs is whether s is still one of the running speakers.
func (a *Announcer) runs(s *speaker) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Contains(a.speakers, s)
}
