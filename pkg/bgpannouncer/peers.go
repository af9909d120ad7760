package bgpannouncer

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"os"
	"slices"
	"sync"
	"time"

	"k8s.io/klog/v2"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/bfd"
	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/bgp"
	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/config"
	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/report"
)

// passwordPoll is how often the peers' password files are read again: a
// mounted Secret is rotated in place of the file, without any edit of the
// cloud config.
const passwordPoll = 10 * time.Second

// peerBook is what is known of the peers: those handed to a speaker
// (inForce, with their passwords, and which speaker), those wanted, and
// their sessions. Its own lock, as the speakers report sessions from their
// goroutines.
type peerBook struct {
	set sync.Mutex // one setPeers (or stopAll) at a time

	mu        sync.Mutex
	inForce   map[netip.Addr]bgp.Peer
	speakerOf map[netip.Addr]*bgp.Speaker
	wanted    map[netip.Addr]bool
	sessions  map[netip.Addr]bgp.PeerState // as last reported
}

func newPeerBook() peerBook {
	return peerBook{inForce: map[netip.Addr]bgp.Peer{}, speakerOf: map[netip.Addr]*bgp.Speaker{}, wanted: map[netip.Addr]bool{}, sessions: map[netip.Addr]bgp.PeerState{}}
}

// speaker is the speaker peer is given to, nil if none.
func (b *peerBook) speaker(peer netip.Addr) *bgp.Speaker {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.speakerOf[peer]
}

func (b *peerBook) snapshot() (wanted map[netip.Addr]bool, sessions map[netip.Addr]bgp.PeerState) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return maps.Clone(b.wanted), maps.Clone(b.sessions)
}

// stopped forgets the sessions and the peers in force: the speaker is
// gone, and the next one starts with none.
func (b *peerBook) stopped() {
	b.mu.Lock()
	defer b.mu.Unlock()
	clear(b.inForce)
	clear(b.speakerOf)
	clear(b.sessions)
}

// setPeers gives each selection's speakers the peers of the config in
// force, with their password files read now, starting a speaker for a
// selection that has a table and none yet, and stopping those left with
// no peer and no selection of their own. A session whose password file
// cannot be read keeps the password it has: deleting the peer would drop
// every path at the router. Calls are serialised and each reads the config
// in force inside: a password re-read that started before a reload must
// not put the old peer set back after the reload's. The metric series of
// a peer that left are deleted with it.
//
// A speaker whose routers all move to one other selection, their sessions'
// settings unchanged, announces that selection's table from then on: the
// sessions stay, and the new table replaces the old path by path. A
// speaker some of whose routers move or change otherwise hands its
// routers over (see handOver).
func (a *Announcer) setPeers(ctx context.Context) {
	a.peers.set.Lock()
	defer a.peers.set.Unlock()
	a.mu.Lock()
	cfg, running, tables := a.cfg, a.running, a.tables
	speakers := slices.Clone(a.speakers)
	a.mu.Unlock()
	if len(speakers) == 0 && running == nil {
		return
	}
	a.peers.mu.Lock()
	inForce, speakerOf, sessions := maps.Clone(a.peers.inForce), maps.Clone(a.peers.speakerOf), maps.Clone(a.peers.sessions)
	a.peers.mu.Unlock()
	want, problems := peersOf(cfg.BGP, inForce)
	a.report.Report("bgp-peers", peerProblems(problems, cfg, len(want)), nil)
	sels, indexes := cfg.BGP.Selections()
	var keys []string
	keyOf := map[netip.Addr]string{}
	wantPeer := map[netip.Addr]bgp.Peer{}
	for k, sel := range sels {
		keys = append(keys, sel.Key())
		for _, i := range indexes[k] {
			if p, ok := want[i]; ok {
				keyOf[p.Address], wantPeer[p.Address] = sel.Key(), p
			}
		}
	}
	// A peer being removed still reports its session going down, after
	// its series were deleted: only the wanted peers' states count.
	a.peers.mu.Lock()
	a.peers.wanted = map[netip.Addr]bool{}
	for addr := range wantPeer {
		a.peers.wanted[addr] = true
	}
	a.peers.mu.Unlock()

	// on is the speaker each wanted peer is given to.
	on := map[netip.Addr]*speaker{}
	var handovers []handover
	for _, s := range speakers {
		var mine, changed []netip.Addr
		newKeys := map[string]bool{}
		for _, addr := range slices.SortedFunc(maps.Keys(speakerOf), netip.Addr.Compare) {
			if speakerOf[addr] != s.Speaker || wantPeer[addr].Address != addr {
				continue
			}
			mine = append(mine, addr)
			newKeys[keyOf[addr]] = true
			if wantPeer[addr] != inForce[addr] || keyOf[addr] != s.key {
				changed = append(changed, addr)
			}
		}
		settled := !slices.ContainsFunc(changed, func(addr netip.Addr) bool { return wantPeer[addr] != inForce[addr] })
		switch {
		case len(changed) == 0:
		case settled && len(newKeys) == 1:
			for key := range newKeys {
				a.rekey(s, key)
			}
		default:
			if h, ok := a.handOver(running, cfg.BGP, s, mine, changed, inForce, keyOf, sessions); ok {
				handovers = append(handovers, h...)
				for _, h := range h {
					for _, addr := range h.routers {
						on[addr] = h.to
					}
				}
				mine = slices.DeleteFunc(mine, func(addr netip.Addr) bool { return on[addr] != nil })
			}
		}
		if !a.runs(s) {
			continue // stopped, and a new speaker did not start: its routers go to one of their selection below
		}
		for _, addr := range mine {
			on[addr] = s
		}
	}
	// Peers new to the config (or not given to a speaker yet) go to a
	// speaker of their selection; a selection with a table and no speaker
	// gets one.
	for _, key := range keys {
		var fresh []netip.Addr
		for _, addr := range slices.SortedFunc(maps.Keys(wantPeer), netip.Addr.Compare) {
			if keyOf[addr] == key && on[addr] == nil {
				fresh = append(fresh, addr)
			}
		}
		a.mu.Lock()
		s := a.keyed(key)
		held := s != nil && s.held
		a.mu.Unlock()
		// A held speaker announces another's table for now: a new peer of
		// the selection gets a speaker with the selection's.
		if _, ok := tables[key]; ok && (s == nil || (held && len(fresh) > 0)) && running != nil && !a.failedToStart(key) {
			if started := a.start(running, cfg.BGP, key, nil); started != nil {
				s = started
			}
		}
		if s == nil {
			continue // started once its table is applied
		}
		for _, addr := range fresh {
			on[addr] = s
		}
	}
	// Each speaker gets its peers; one left with none is stopped unless it
	// is its selection's only one.
	applied := map[netip.Addr]bgp.Peer{}
	owners := map[netip.Addr]*bgp.Speaker{}
	given := map[*speaker][]bgp.Peer{}
	for _, addr := range slices.SortedFunc(maps.Keys(on), netip.Addr.Compare) {
		s := on[addr]
		given[s] = append(given[s], wantPeer[addr])
		applied[addr], owners[addr] = wantPeer[addr], s.Speaker
	}
	// The book names each session's speaker before any is handed its
	// peers: the state changes a speaker reports of a router it no longer
	// holds are ignored.
	a.peers.mu.Lock()
	for addr := range inForce {
		if _, ok := applied[addr]; !ok {
			forgetPeer(addr)
			delete(a.peers.sessions, addr)
		}
	}
	a.peers.inForce, a.peers.speakerOf = applied, owners
	a.peers.mu.Unlock()
	a.mu.Lock()
	speakers = slices.Clone(a.speakers)
	a.mu.Unlock()
	for _, s := range speakers {
		if len(given[s]) == 0 && (!slices.Contains(keys, s.key) || slices.ContainsFunc(speakers, func(o *speaker) bool { return o != s && o.key == s.key })) {
			a.stop(s)
			continue
		}
		if err := applyPeers(ctx, s.Speaker, given[s]); err != nil {
			klog.ErrorS(err, "Configuring BGP peers")
		}
	}
	for _, h := range handovers {
		go a.release(running, h)
	}
	a.countPeerPaths()
	a.setBFD(cfg.BGP, applied)
}

// rekey has s announce key's table from now on.
func (a *Announcer) rekey(s *speaker, key string) {
	a.applyMu.Lock()
	defer a.applyMu.Unlock()
	a.mu.Lock()
	s.key = key
	paths, ok := a.tables[key]
	a.mu.Unlock()
	if ok && !s.held {
		if err := a.setPaths(s.Speaker, paths); err != nil {
			klog.ErrorS(err, "Converging BGP paths to a new selection")
		}
	}
}

// stop stops s gracefully and forgets it.
func (a *Announcer) stop(s *speaker) {
	a.mu.Lock()
	a.speakers = slices.DeleteFunc(a.speakers, func(o *speaker) bool { return o == s })
	a.mu.Unlock()
	stopSpeaker(s.Speaker)
}

func (a *Announcer) failedToStart(key string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.failed[key]
}

// setBFD runs a BFD session with each router given to a speaker whose
// peer asks for BFD. Called under peers.set.
func (a *Announcer) setBFD(b config.BGP, applied map[netip.Addr]bgp.Peer) {
	var peers []bfd.Peer
	for _, p := range b.Peers {
		addr, _ := netip.ParseAddr(p.Address)
		if _, ok := applied[addr]; !ok || p.BFD == nil {
			continue
		}
		src, _ := netip.ParseAddr(p.SourceAddress)
		peers = append(peers, bfd.Peer{Address: addr, Source: src, Timers: bfd.Timers{
			TransmitInterval: p.BFD.TransmitInterval.Duration, ReceiveInterval: p.BFD.ReceiveInterval.Duration,
			DetectMultiplier: uint8(p.BFD.DetectMultiplier)},
			Multihop: p.EBGPMultihop > 0, MinimumTTL: uint8(p.BFD.MinimumTTL)})
	}
	if a.bfd == nil {
		if len(peers) == 0 {
			return
		}
		a.bfd = bfd.New(bfd.Options{OnChange: a.bfdChanged})
	}
	var problems []report.Problem
	if err := a.bfd.Set(peers); err != nil {
		problems = append(problems, report.Problem{Reason: "BFDNotStarted", Object: report.Self,
			Log: "BFD sessions could not start; the routers detect this replica's failure only after the BGP hold time", LogValues: []any{"err", err},
			Message: fmt.Sprintf("BFD could not start (%v): the routers detect this replica's failure only after the BGP hold time; is UDP port %d (%d for multihop sessions) in use by another BFD daemon on this host?", err, bfd.Port, bfd.MultihopPort)})
	}
	a.report.Report("bfd", problems, nil)
}

// bfdChanged ends the BGP session of a router that went silent (its BFD
// session's detection time passed): the path to it is gone, and the
// session should not wait for its hold time to say so. A router that says
// Down ends its own BGP session if it means to (it does when it stopped
// hearing this replica); it also says so when BFD is merely removed from
// the neighbour (FRR 8.4 sends Down, not AdminDown), which must not reset
// a working session.
func (a *Announcer) bfdChanged(c bfd.Change) {
	klog.InfoS("BFD session changed", "peer", c.Peer, "from", c.From, "to", c.To, "diagnostic", c.Diag, "adminDown", c.AdminDown, "routerDiagnostic", c.RemoteDiag)
	if c.From != bfd.Up || c.To != bfd.Down || c.Diag != bfd.DetectionTimeExpired {
		return
	}
	if s := a.peers.speaker(c.Peer); s != nil {
		go func() {
			if err := s.ResetPeer(context.Background(), c.Peer, "BFD session down: "+c.Diag.String()); err != nil {
				klog.ErrorS(err, "Resetting the BGP session after BFD went down", "peer", c.Peer)
			}
		}()
	}
}

// stopSpeaker ends a speaker's sessions gracefully.
var stopSpeaker = func(s *bgp.Speaker) { s.Stop(context.Background(), true) }

// applyPeers hands the speaker its peers.
var applyPeers = func(ctx context.Context, s *bgp.Speaker, peers []bgp.Peer) error { return s.SetPeers(ctx, peers) }

// rereadPasswords applies rotated password files until ctx ends.
func (a *Announcer) rereadPasswords(ctx context.Context) {
	t := time.NewTicker(passwordPoll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			a.setPeers(ctx)
		}
	}
}

// peerProblems are what is wrong with the peers: those that could not be
// configured, and pools announced over BGP to no one (every one of their
// VIPs is allocated and unreachable).
func peerProblems(problems []error, cfg *config.Config, peers int) []report.Problem {
	var out []report.Problem
	if err := errors.Join(problems...); err != nil {
		out = append(out, report.Problem{Reason: "BGPPeerNotConfigured", Object: report.Self,
			Log: "BGP peer", LogValues: []any{"err", err}, Message: err.Error()})
	}
	lb := &cfg.LoadBalancer
	pools := 0
	for i := range lb.Pools {
		if lb.Pools[i].Announced(lb) == config.AnnounceBGP {
			pools++
		}
	}
	if peers > 0 {
		pools = 0
	}
	poolsWithoutPeers.Set(float64(pools))
	if pools > 0 {
		out = append(out, report.Problem{Reason: "BGPNoPeers", Object: report.Self,
			Log: "Pools are announced over BGP, but the speaker has no peer; their VIPs reach no router", LogValues: []any{"pools", pools},
			Message: fmt.Sprintf("%d pools are announced over BGP but the speaker has no peer (bgp.peers is empty, or no peer's password file can be read): their VIPs reach no router", pools)})
	}
	return out
}

// peersOf is the peers of the bgp section, by their index in it, with
// their password files read now. A peer whose password file cannot be read
// is given as it is in inForce (a session keeps its password), or left out
// if it has none yet; each such peer is a problem.
func peersOf(b config.BGP, inForce map[netip.Addr]bgp.Peer) (map[int]bgp.Peer, []error) {
	peers := map[int]bgp.Peer{}
	var problems []error
	for i, p := range b.Peers {
		addr, _ := netip.ParseAddr(p.Address)
		password, err := p.PeerPassword()
		if err != nil {
			if old, ok := inForce[addr]; ok {
				problems = append(problems, fmt.Errorf("bgp.peers[%d].passwordFile: %w; the session with %s keeps the password it has", i, err, addr))
				peers[i] = old
			} else {
				problems = append(problems, fmt.Errorf("bgp.peers[%d].passwordFile: %w; no session with %s until it can be read", i, err, addr))
			}
			continue
		}
		src, _ := netip.ParseAddr(p.SourceAddress)
		peers[i] = bgp.Peer{
			Address: addr, Port: p.Port, ASN: p.ASN, Password: password, SourceAddress: src,
			HoldTime: p.HoldTime.Duration, Keepalive: p.KeepaliveTime.Duration, ConnectRetry: p.ConnectRetryTime.Duration,
			EBGPMultihopTTL: p.EBGPMultihop,
			IPv4:            slices.Contains(p.AddressFamilies, config.FamilyIPv4),
			IPv6:            slices.Contains(p.AddressFamilies, config.FamilyIPv6),
			GracefulRestart: p.GracefulRestart.On(), RestartTime: p.GracefulRestart.RestartTime.Duration,
		}
	}
	return peers, problems
}

// peerStateChanged counts a session's state and says, on the Pod, when an
// established peer takes no ADD-PATH: it gets one next hop per VIP, so all
// of a VIP's traffic goes to one node.
func (a *Announcer) peerStateChanged(st bgp.PeerState) {
	a.peers.mu.Lock()
	// A router handed to another speaker is reported going down by the
	// one it left, perhaps after the new one reported it up.
	wanted := a.peers.wanted[st.Address] && a.peers.speakerOf[st.Address] == st.Speaker
	if wanted {
		a.peers.sessions[st.Address] = st
	}
	a.peers.mu.Unlock()
	if !wanted {
		return
	}
	v := 0.0
	if st.Established {
		v = 1
	}
	peer := st.Address.String()
	peerEstablished.WithLabelValues(peer).Set(v)
	peerTransitions.WithLabelValues(peer, st.State).Inc()
	if !st.Established {
		return
	}
	if st.AddPath {
		peerAddPath.WithLabelValues(peer).Set(1)
		return
	}
	peerAddPath.WithLabelValues(peer).Set(0)
	a.report.Event(report.Problem{Reason: "BGPPeerWithoutAddPath", Object: report.Self,
		Log: "BGP peer did not negotiate ADD-PATH receive: it gets one next hop per VIP, not all of them, so no ECMP", LogValues: []any{"peer", peer},
		Message: fmt.Sprintf("BGP peer %s did not negotiate ADD-PATH receive (RFC 7911): it gets one next hop per VIP, so each VIP's traffic goes to one node; enable receiving additional paths on the router", peer)})
}

// speakerGlobal is the speaker's own identity and listener, without peers.
func speakerGlobal(b config.BGP) bgp.Config {
	cfg := bgp.Config{ASN: b.LocalASN, ListenPort: b.ListenPort, ListenAddresses: b.ListenAddresses}
	id := b.RouterID
	if id == "" {
		id = os.Getenv(EnvPodIP)
	}
	cfg.RouterID, _ = netip.ParseAddr(id)
	if !cfg.RouterID.Is4() && b.RouterID == "" {
		cfg.RouterID = addressTowards(b.Peers)
	}
	return cfg
}

// addressTowards is the IPv4 address this host speaks to its first IPv4
// peer from: a replica's own, when the kubelet has not given it POD_IP.
// That happens on a Node the CCM has yet to initialise (the kubelet knows
// no address for it), as on the first start of a kubeadm cluster, where
// the CCM initialises its own Node. Connecting a UDP socket sends nothing;
// the kernel only picks the route and the source.
func addressTowards(peers []config.Peer) netip.Addr {
	for _, p := range peers {
		if p.SourceAddress != "" {
			if a, err := netip.ParseAddr(p.SourceAddress); err == nil && a.Is4() {
				return a
			}
		}
		a, err := netip.ParseAddr(p.Address)
		if err != nil || !a.Is4() {
			continue
		}
		c, err := net.DialUDP("udp4", nil, net.UDPAddrFromAddrPort(netip.AddrPortFrom(a, 179)))
		if err != nil {
			continue
		}
		local := c.LocalAddr().(*net.UDPAddr).AddrPort().Addr().Unmap()
		c.Close()
		if local.Is4() {
			return local
		}
	}
	return netip.Addr{}
}
