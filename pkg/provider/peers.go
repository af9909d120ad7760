package provider

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/bgp"
	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/config"
)

// passwordPoll is how often the peers' password files are read again: a
// mounted Secret is rotated in place of the file, without any edit of the
// cloud config.
const passwordPoll = 10 * time.Second

// setPeers gives the speaker the peers of the config in force, with their
// password files read now. A session whose password file cannot be read
// keeps the password it has: deleting the peer would drop every path at
// the router. Calls are serialised and each reads the config in force
// inside: a password re-read that started before a reload must not put
// the old peer set back after the reload's. The metric series of a peer
// that left are deleted with it.
func (n *network) setPeers(ctx context.Context) {
	n.peersMu.Lock()
	defer n.peersMu.Unlock()
	n.mu.Lock()
	speaker, cfg, inForce := n.speaker, n.cfg.BGP, n.peersInForce
	n.mu.Unlock()
	if speaker == nil {
		return
	}
	want, problems := peersOf(cfg, inForce)
	n.reportPeerProblems(problems)
	n.reportNoPeers(len(want))
	// A peer being removed still reports its session going down, after
	// its series were deleted: only the wanted peers' states count.
	wanted := map[netip.Addr]bool{}
	for _, p := range want {
		wanted[p.Address] = true
	}
	n.mu.Lock()
	n.peersWanted = wanted
	n.mu.Unlock()
	if err := applyPeers(ctx, speaker, want); err != nil {
		klog.ErrorS(err, "Configuring BGP peers")
	}
	applied := map[netip.Addr]bgp.Peer{}
	for _, p := range want {
		applied[p.Address] = p
	}
	for addr := range inForce {
		if _, ok := applied[addr]; !ok {
			forgetPeer(addr)
			n.live.forgetSessions(addr)
		}
	}
	n.mu.Lock()
	n.peersInForce = applied
	n.mu.Unlock()
}

// applyPeers hands the speaker its peers.
var applyPeers = func(ctx context.Context, s *bgp.Speaker, peers []bgp.Peer) error { return s.SetPeers(ctx, peers) }

// rereadPasswords applies rotated password files until ctx ends.
func (n *network) rereadPasswords(ctx context.Context) {
	t := time.NewTicker(passwordPoll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			n.setPeers(ctx)
		}
	}
}

// reportNoPeers says, once while it lasts, that pools are announced over
// BGP to no one: every one of their VIPs is allocated and unreachable.
func (n *network) reportNoPeers(peers int) {
	n.mu.Lock()
	lb := &n.cfg.LoadBalancer
	pools := 0
	for i := range lb.Pools {
		if lb.Pools[i].Announced(lb) == config.AnnounceBGP {
			pools++
		}
	}
	if peers > 0 {
		pools = 0
	}
	said := n.noPeersSaid
	n.noPeersSaid = pools > 0
	n.mu.Unlock()
	poolsWithoutPeers.Set(float64(pools))
	if pools > 0 && !said {
		klog.ErrorS(nil, "Pools are announced over BGP, but the speaker has no peer; their VIPs reach no router", "pools", pools)
		n.podEventf(v1.EventTypeWarning, "BGPNoPeers", "%d pools are announced over BGP but the speaker has no peer (bgp.peers is empty, or no peer's password file can be read): their VIPs reach no router", pools)
	}
}

// reportPeerProblems logs the problems and puts them in an Event on the
// CCM's Pod, once for as long as they stay the same.
func (n *network) reportPeerProblems(problems []error) {
	text := errors.Join(problems...)
	msg := ""
	if text != nil {
		msg = text.Error()
	}
	n.mu.Lock()
	same := msg == n.peerErrors
	n.peerErrors = msg
	n.mu.Unlock()
	if same || text == nil {
		return
	}
	for _, err := range problems {
		klog.ErrorS(err, "BGP peer")
	}
	n.podEventf(v1.EventTypeWarning, "BGPPeerNotConfigured", "%v", text)
}

// peersOf is the speaker's peers from the bgp section, with their password
// files read now. A peer whose password file cannot be read is given as it
// is in inForce (a session keeps its password), or left out if it has none
// yet; each such peer is a problem.
func peersOf(b config.BGP, inForce map[netip.Addr]bgp.Peer) ([]bgp.Peer, []error) {
	var peers []bgp.Peer
	var problems []error
	for i, p := range b.Peers {
		addr, _ := netip.ParseAddr(p.Address)
		password, err := p.PeerPassword()
		if err != nil {
			if old, ok := inForce[addr]; ok {
				problems = append(problems, fmt.Errorf("bgp.peers[%d].passwordFile: %w; the session with %s keeps the password it has", i, err, addr))
				peers = append(peers, old)
			} else {
				problems = append(problems, fmt.Errorf("bgp.peers[%d].passwordFile: %w; no session with %s until it can be read", i, err, addr))
			}
			continue
		}
		src, _ := netip.ParseAddr(p.SourceAddress)
		peers = append(peers, bgp.Peer{
			Address: addr, Port: p.Port, ASN: p.ASN, Password: password, SourceAddress: src,
			HoldTime: p.HoldTime.Duration, Keepalive: p.KeepaliveTime.Duration, ConnectRetry: p.ConnectRetryTime.Duration,
			EBGPMultihopTTL: p.EBGPMultihop,
			IPv4:            slices.Contains(p.AddressFamilies, config.FamilyIPv4),
			IPv6:            slices.Contains(p.AddressFamilies, config.FamilyIPv6),
			GracefulRestart: p.GracefulRestart.On(), RestartTime: p.GracefulRestart.RestartTime.Duration,
		})
	}
	return peers, problems
}
