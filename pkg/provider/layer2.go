package provider

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/config"
	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/l2"
)

// Layer 2 pools: the leader answers ARP and Neighbor Solicitations for
// their VIPs on the segment it shares with the nodes and the clients,
// naming one node per VIP: chosen by rendezvous hashing among the nodes
// that would be its BGP next hops (Ready, initialised, passing health
// checks; for externalTrafficPolicy Local, with a ready endpoint), so VIPs
// spread over the nodes and only a leaving node's VIPs move. No agent runs
// on the nodes. A standby never answers: its table could differ from the
// leader's while the Services' status catches up.
//
// A node's hardware address is the inventory's (macAddresses) when it
// lists one, and, when it lists several, the one seen on the segment; else
// it is learned by asking the segment for the node's address there. The
// inventory wins: it is what the operator states, and learning can be
// misled by a host that answers for others (proxy ARP).

// segment is an interface the leader answers on (an l2.Responder).
type segment interface {
	Subnets() []netip.Prefix
	Learned(ip netip.Addr) (net.HardwareAddr, bool)
	Set(l2.Table)
}

// openSegment starts answering on an interface until ctx ends, reporting
// to n.
var openSegment = func(ctx context.Context, iface string, n *network) (segment, error) {
	r, err := l2.Listen(iface)
	if err != nil {
		return nil, err
	}
	r.OnReply = func(p string) { l2Replies.WithLabelValues(p).Inc() }
	r.OnAnnounce = func(p string) { l2Announcements.WithLabelValues(p).Inc() }
	r.OnLearned = n.announce
	r.OnConflict = func(ip netip.Addr, macs []net.HardwareAddr) {
		l2LearningConflicts.WithLabelValues(iface).Inc()
		klog.ErrorS(nil, "Conflicting or changing answers for a node's hardware address; keeping what is known", "interface", iface, "address", ip, "answers", macs)
	}
	r.OnSocket = func(protocol string, err error) {
		n.live.socket(iface, protocol, err != nil, false)
		if err == nil {
			l2SocketDown.WithLabelValues(iface, protocol).Set(0)
			return
		}
		l2SocketErrors.WithLabelValues(iface, protocol).Inc()
		l2SocketDown.WithLabelValues(iface, protocol).Set(1)
		n.podEventf(v1.EventTypeWarning, "L2SocketFailed", "reading %s on interface %s failed (%v); its layer 2 VIPs are not answered until it opens again (tried at once, then up to every 5s)", protocol, iface, err)
	}
	go func() {
		r.Run(ctx)
		for _, p := range []string{l2.ProtocolARP, l2.ProtocolNDP} {
			l2SocketDown.DeleteLabelValues(iface, p)
			n.live.socket(iface, p, false, true)
		}
	}()
	return r, nil
}

// openedSegment is a segment with what stops it.
type openedSegment struct {
	segment
	stop context.CancelFunc
}

// l2Retry is how often an interface that could not be opened is tried
// again, and learned addresses refreshed.
const l2Retry = 10 * time.Second

// answerLoop runs the leader's layer 2 answers until ctx ends: it opens
// the interfaces the config names and converges their tables on request.
func (n *network) answerLoop(ctx context.Context) {
	t := time.NewTicker(l2Retry)
	defer t.Stop()
	var last time.Time
	for {
		n.openSegments(ctx)
		n.convergeL2()
		last = time.Now()
		select {
		case <-ctx.Done():
			n.mu.Lock()
			for _, s := range n.segments {
				s.stop()
			}
			n.segments = map[string]*openedSegment{}
			n.mu.Unlock()
			return
		case <-n.l2kick:
		case <-t.C:
		}
		if wait := settle - time.Since(last); wait > 0 {
			time.Sleep(wait)
		}
	}
}

// l2Interfaces are the interfaces the config's layer 2 pools answer on,
// with the field that names each. Callers hold n.mu.
func (n *network) l2Interfaces() map[string]string {
	out := map[string]string{}
	lb := &n.cfg.LoadBalancer
	for i := range lb.Pools {
		p := &lb.Pools[i]
		if p.Announced(lb) == config.AnnounceL2 && p.L2 != nil {
			if _, ok := out[p.L2.Interface]; !ok {
				out[p.L2.Interface] = fmt.Sprintf("loadBalancer.pools[%d].l2.interface", i)
			}
		}
	}
	for _, iface := range n.vipL2 {
		if _, ok := out[iface]; !ok {
			out[iface] = "the l2.interface of a pool that left the config, whose VIPs are still in use,"
		}
	}
	return out
}

// openSegments opens the interfaces the config names that are not open,
// and closes those it no longer names. A failure is said once per error.
func (n *network) openSegments(ctx context.Context) {
	n.mu.Lock()
	want := n.l2Interfaces()
	for iface, s := range n.segments {
		if _, ok := want[iface]; !ok {
			s.stop()
			delete(n.segments, iface)
			delete(n.segmentErrors, iface)
			delete(n.segmentTried, iface)
		}
	}
	var missing []string
	for iface := range want {
		if n.segments[iface] == nil && time.Since(n.segmentTried[iface]) >= l2Retry {
			missing = append(missing, iface)
			n.segmentTried[iface] = time.Now()
		}
	}
	n.mu.Unlock()
	var opened []segment
	defer func() { n.learnFirst(opened) }()
	for _, iface := range missing {
		sctx, stop := context.WithCancel(ctx)
		seg, err := openSegment(sctx, iface, n)
		n.mu.Lock()
		if err != nil {
			stop()
			if n.segmentErrors[iface] != err.Error() {
				n.segmentErrors[iface] = err.Error()
				klog.ErrorS(err, "Cannot answer ARP and NDP for layer 2 VIPs; tried again every 10s", "field", want[iface], "interface", iface)
				n.podEventf(v1.EventTypeWarning, "L2NotStarted", "%s %q: %v; the VIPs of its pools are not answered until it opens (tried again every %s)", want[iface], iface, err, l2Retry)
			}
		} else {
			delete(n.segmentErrors, iface)
			delete(n.segmentTried, iface)
			n.segments[iface] = &openedSegment{segment: seg, stop: stop}
			opened = append(opened, seg)
			klog.InfoS("Answering ARP and NDP for layer 2 VIPs", "interface", iface)
		}
		n.mu.Unlock()
	}
}

// learnFirst asks newly opened segments for the hardware addresses of the
// ready nodes it must learn, and waits for them up to learnWait, so that a
// new leader's first table already spreads the VIPs: without it they would
// all go to the nodes the inventory gives a MAC, then move.
func (n *network) learnFirst(segs []segment) {
	if len(segs) == 0 {
		return
	}
	n.mu.Lock()
	ready := n.readyNodes()
	n.mu.Unlock()
	for deadline := time.Now().Add(learnWait); ; time.Sleep(learnWait / 10) {
		missing := 0
		for _, seg := range segs {
			subnets := seg.Subnets()
			for _, node := range ready {
				if !slices.ContainsFunc(node.ips, func(ip netip.Addr) bool { return containedIn(ip, subnets) }) {
					continue // not on this segment: nothing to learn
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

// learnWait bounds how long a new leader waits for the nodes' hardware
// addresses before its first answers; one that answers later is a
// candidate from then on.
const learnWait = time.Second

// convergeL2 gives each open segment its table.
func (n *network) convergeL2() {
	n.mu.Lock()
	if !n.leading || len(n.segments) == 0 {
		n.mu.Unlock()
		return
	}
	tables := n.desiredL2()
	segs := map[string]segment{}
	for iface, s := range n.segments {
		segs[iface] = s.segment
	}
	n.mu.Unlock()
	for iface, s := range segs {
		s.Set(tables[iface])
	}
}

// desiredL2 is, for each open segment, its VIPs with the hardware address
// of the node chosen for each. Callers hold n.mu.
func (n *network) desiredL2() map[string]l2.Table {
	tables := map[string]l2.Table{}
	subnets := map[string][]netip.Prefix{}
	for iface, s := range n.segments {
		tables[iface] = l2.Table{}
		subnets[iface] = s.Subnets()
	}
	ready := n.healthy(n.readyNodes())
	// Each node's MAC on each segment, found once per convergence, not
	// once per VIP: asking the segment takes its lock.
	nodeMACs := map[string]map[string]net.HardwareAddr{}
	unseen := map[[2]string]eligibleNode{}
	for iface, seg := range n.segments {
		nodeMACs[iface] = map[string]net.HardwareAddr{}
		for _, node := range ready {
			mac, ok, notSeen := macOn(seg, subnets[iface], node)
			if ok {
				nodeMACs[iface][node.name] = mac
			}
			if notSeen && slices.ContainsFunc(node.ips, func(ip netip.Addr) bool { return containedIn(ip, subnets[iface]) }) {
				unseen[[2]string{iface, node.name}] = node
			}
		}
	}
	n.reportUnseenMACs(unseen)
	held := map[netip.Addr]bool{}
	count := map[[2]string]float64{}
	unanswered := 0
	for key, s := range n.services {
		carriers := n.carriers(s, ready)
		for _, vip := range n.alloc.Addresses(key) {
			held[vip] = true
			how, iface := n.announcedBy(vip)
			if how != config.AnnounceL2 {
				continue
			}
			if n.segments[iface] == nil {
				unanswered++ // said when the interface failed to open
				continue
			}
			if !containedIn(vip, subnets[iface]) {
				unanswered++
				n.reportOffSegment(s, vip, iface, subnets[iface])
				continue
			}
			delete(n.offSegment, vip) // said again if it leaves the segment again
			var names []string
			for _, node := range carriers {
				if _, ok := nodeMACs[iface][node.name]; ok && hasFamily(node.ips, vip.Is4()) {
					names = append(names, node.name)
				}
			}
			chosen := l2.Choose(vip, names)
			n.reportUnanswered(s, vip, chosen == "")
			if chosen == "" {
				unanswered++
				continue
			}
			tables[iface][vip] = nodeMACs[iface][chosen]
			count[[2]string{iface, chosen}]++
		}
	}
	n.forgetVIPsBut(held)
	for k := range n.l2Counted {
		if count[k] == 0 {
			l2VIPs.DeleteLabelValues(k[0], k[1])
		}
	}
	for k, c := range count {
		l2VIPs.WithLabelValues(k[0], k[1]).Set(c)
	}
	n.l2Counted = count
	l2VIPsUnanswered.Set(float64(unanswered))
	return tables
}

// announcedBy is how a VIP reaches the network, and for layer 2 on which
// interface: its pool's way; a VIP whose pool left the config keeps the
// way it was announced. Callers hold n.mu.
func (n *network) announcedBy(vip netip.Addr) (config.Announce, string) {
	lb := &n.cfg.LoadBalancer
	if name := n.alloc.PoolOf(vip); name != "" {
		for i := range lb.Pools {
			if p := &lb.Pools[i]; p.Name == name {
				how := p.Announced(lb)
				if how == config.AnnounceL2 && p.L2 != nil {
					n.vipL2[vip] = p.L2.Interface
					return how, p.L2.Interface
				}
				delete(n.vipL2, vip)
				return how, ""
			}
		}
	}
	if iface, ok := n.vipL2[vip]; ok {
		return config.AnnounceL2, iface
	}
	return lb.Announce, ""
}

// macOn is the hardware address a node is reached at on a segment: the
// inventory's when it lists one; when it lists several, the one seen
// there, and none while none is (any of them may be on another segment:
// naming it would black-hole the node's VIPs); else the one learned for
// the node's address in the segment's subnets. unseen is set for a node
// listing several, none seen.
func macOn(seg segment, subnets []netip.Prefix, node eligibleNode) (mac net.HardwareAddr, ok, unseen bool) {
	if len(node.macs) == 1 {
		return node.macs[0], true, false
	}
	var learned net.HardwareAddr
	for _, ip := range node.ips {
		if containedIn(ip, subnets) {
			if mac, ok := seg.Learned(ip); ok {
				learned = mac
				break
			}
		}
	}
	if len(node.macs) == 0 {
		return learned, learned != nil, false
	}
	for _, m := range node.macs {
		if bytes.Equal(m, learned) {
			return m, true, false
		}
	}
	return nil, false, true
}

func containedIn(ip netip.Addr, prefixes []netip.Prefix) bool {
	for _, p := range prefixes {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

func hasFamily(ips []netip.Addr, v4 bool) bool {
	for _, ip := range ips {
		if ip.Is4() == v4 {
			return true
		}
	}
	return false
}

// reportUnseenMACs tells each node listing several MACs, none seen on a
// segment it has an address on (by interface and node name), that it
// carries none of that segment's VIPs; once for as long as it stays so.
// Callers hold n.mu.
func (n *network) reportUnseenMACs(unseen map[[2]string]eligibleNode) {
	for k, node := range unseen {
		if _, said := n.macUnseen[k]; said {
			continue
		}
		klog.ErrorS(nil, "Node lists several MACs, none seen on the segment; it carries none of its layer 2 VIPs", "node", node.name, "interface", k[0], "macs", node.macs)
		n.eventf(nodeRef(node.name), v1.EventTypeWarning, "L2MACNotSeen",
			"none of the macAddresses %v of machine %q answers on interface %s; the node carries none of its layer 2 VIPs until one does (list the one on that segment first, or only it)", node.macs, node.machine, k[0])
	}
	for k := range n.macUnseen {
		if _, still := unseen[k]; !still {
			klog.InfoS("Node's MAC seen on the segment again; it carries layer 2 VIPs", "node", k[1], "interface", k[0])
		}
	}
	n.macUnseen = unseen
}

// reportOffSegment tells a Service, once, that the leader cannot answer
// for its VIP: the VIP is in no subnet of the pool's interface, so no
// client on that segment would ask for it there. Callers hold n.mu.
func (n *network) reportOffSegment(s *lbService, vip netip.Addr, iface string, subnets []netip.Prefix) {
	if n.offSegment[vip] {
		return
	}
	n.offSegment[vip] = true
	klog.ErrorS(nil, "Layer 2 VIP is outside its interface's subnets; it is not answered", "service", s.namespace+"/"+s.name, "address", vip, "interface", iface, "subnets", subnets)
	n.eventf(serviceRef(s.namespace, s.name), v1.EventTypeWarning, "VIPOutsideSegment",
		"address %s is in no subnet of interface %s (%v) named by its pool's l2.interface; it is not answered there: give the pool addresses of that segment", vip, iface, subnets)
}

// reportUnanswered tells a Service, once, that no node can carry its VIP
// on the segment. Callers hold n.mu.
func (n *network) reportUnanswered(s *lbService, vip netip.Addr, unanswered bool) {
	n.sayOnce(n.l2Stranded, s, vip, unanswered, "Layer 2 VIP has a node to carry it again", "Layer 2 VIP is not answered: no eligible node with a known hardware address",
		func() string {
			return fmt.Sprintf("address %s is not answered: no Ready, initialised, healthy node that may carry it has an %s address and a known hardware address on the segment (inventory macAddresses, or its address answering there)", vip, familyName(vip))
		})
}
