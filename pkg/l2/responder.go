package l2

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/mdlayher/ndp"
	"github.com/mdlayher/packet"
	"golang.org/x/net/ipv6"
	"golang.org/x/sys/unix"
	"k8s.io/klog/v2"
)

// Protocols, as the metrics name them.
const (
	ProtocolARP = "arp"
	ProtocolNDP = "ndp"
)

// Repeats are when a gratuitous announcement is sent again after the
// first: a host that updated its entry for the VIP within the last second
// (Linux's locktime) ignores a plain reply, and a frame can be lost.
var Repeats = []time.Duration{500 * time.Millisecond, 2 * time.Second}

// relearn is how often a learned hardware address is asked for again: a
// node's network card can be replaced.
const relearn = 30 * time.Second

// Learning trusts nothing it did not ask for (see learn):
//   - answerWindow: how long after a question its answers count;
//   - holdDown: a learned address changes at most once in this time, so
//     frames alternating between two answers cannot make VIPs flap;
//   - forgetAfter: a node no longer asked about (it left) is forgotten.
const (
	answerWindow = 2 * time.Second
	holdDown     = time.Minute
	forgetAfter  = 3 * relearn
)

// burstGap is the least time between two bursts of gratuitous
// announcements for one VIP: a VIP whose node changes again sooner is
// announced when the gap ends, naming its node as of then.
var burstGap = time.Second

// Reopening a socket that failed: the first try after reopenMin, then
// twice as long each time up to reopenMax.
var reopenMin, reopenMax = 100 * time.Millisecond, 5 * time.Second

// Responder answers for the VIPs of its table on one interface. It needs
// CAP_NET_RAW. Several may run on a segment (a replica each): they answer
// alike as long as their tables are alike.
type Responder struct {
	name string
	ifi  *net.Interface

	// OnReply and OnAnnounce count answers and gratuitous announcements by
	// protocol; OnLearned is called when a hardware address was learned or
	// changed; OnConflict when answers disagreed or changed within the
	// hold-down; OnSocket when a socket failed (err set) and when it works
	// again (err nil). Set them before Run.
	OnReply    func(protocol string)
	OnAnnounce func(protocol string)
	OnLearned  func()
	OnConflict func(ip netip.Addr, macs []net.HardwareAddr)
	OnSocket   func(protocol string, err error)

	mu        sync.Mutex
	arp       *packet.Conn
	ndp       *ndp.Conn // nil when the interface has no IPv6 link-local address
	table     Table
	groups    map[netip.Addr]int // solicited-node groups joined, by how many VIPs need them
	learned   map[netip.Addr]*learning
	bursts    map[netip.Addr]*burst
	lastSweep time.Time
	closed    bool
	// saidNoIPv6 is set once the lack of an IPv6 link-local address was
	// logged: it is looked for again every reopenMax.
	saidNoIPv6 bool
}

// learning is what is known of one address asked about.
type learning struct {
	mac     net.HardwareAddr // in force; nil while unknown
	changed time.Time        // when mac last changed
	asked   time.Time        // the last question
	answers []net.HardwareAddr
	// initial is set when mac was learned from the current question's
	// first answer, with nothing known before.
	initial bool
}

// burst is when a VIP was last announced, and whether another burst waits.
type burst struct {
	last    time.Time
	waiting bool
}

// Listen opens the responder's sockets on the named interface.
func Listen(name string) (*Responder, error) {
	r := &Responder{name: name, table: Table{}, groups: map[netip.Addr]int{},
		learned: map[netip.Addr]*learning{}, bursts: map[netip.Addr]*burst{},
		OnReply: func(string) {}, OnAnnounce: func(string) {}, OnLearned: func() {},
		OnConflict: func(netip.Addr, []net.HardwareAddr) {}, OnSocket: func(string, error) {}}
	if err := r.openARP(); err != nil {
		return nil, err
	}
	if _, err := r.openNDP(); err != nil {
		r.arp.Close()
		return nil, err
	}
	return r, nil
}

// openARP opens (or opens again) the ARP socket. Callers must not hold
// r.mu.
func (r *Responder) openARP() error {
	ifi, err := net.InterfaceByName(r.name)
	if err != nil {
		return fmt.Errorf("interface %s: %w", r.name, err)
	}
	if len(ifi.HardwareAddr) != 6 {
		return fmt.Errorf("interface %s has no Ethernet address", r.name)
	}
	c, err := packet.Listen(ifi, packet.Raw, unix.ETH_P_ARP, nil)
	if err != nil {
		return fmt.Errorf("opening an ARP socket on %s (it needs CAP_NET_RAW): %w", r.name, err)
	}
	r.mu.Lock()
	r.ifi, r.arp = ifi, c
	r.mu.Unlock()
	return nil
}

// openNDP opens (or opens again) the NDP socket; an interface without an
// IPv6 link-local address has none (opened false). Callers must not hold
// r.mu.
func (r *Responder) openNDP() (opened bool, err error) {
	r.mu.Lock()
	ifi := r.ifi
	r.mu.Unlock()
	c, _, err := ndp.Listen(ifi, ndp.LinkLocal)
	if err != nil {
		r.mu.Lock()
		first := !r.saidNoIPv6
		r.saidNoIPv6 = true
		r.mu.Unlock()
		if first {
			klog.InfoS("No IPv6 on the interface; IPv6 VIPs are not answered there until it has a link-local address", "interface", r.name, "err", err)
		}
		return false, nil
	}
	if err := setupNDP(c); err != nil {
		c.Close()
		return false, fmt.Errorf("NDP socket on %s: %w", r.name, err)
	}
	r.mu.Lock()
	r.ndp = c
	r.groups = map[netip.Addr]int{} // a new socket has joined none
	r.setGroups(r.table)
	r.mu.Unlock()
	return true, nil
}

// openSocket opens a protocol's socket (again); opened is false for NDP on
// an interface without an IPv6 link-local address. Callers must not hold
// r.mu.
func (r *Responder) openSocket(protocol string) (opened bool, err error) {
	if protocol == ProtocolNDP {
		return r.openNDP()
	}
	err = r.openARP()
	return err == nil, err
}

// closeSocket closes a protocol's socket. Callers hold r.mu.
func (r *Responder) closeSocket(protocol string) {
	if protocol == ProtocolARP {
		r.arp.Close()
		return
	}
	if r.ndp != nil {
		r.ndp.Close()
		r.ndp = nil
	}
}

func setupNDP(c *ndp.Conn) error {
	var f ipv6.ICMPFilter
	f.SetAll(true)
	f.Accept(ipv6.ICMPTypeNeighborSolicitation)
	f.Accept(ipv6.ICMPTypeNeighborAdvertisement)
	if err := c.SetICMPFilter(&f); err != nil {
		return err
	}
	return c.SetControlMessage(ipv6.FlagHopLimit, true)
}

// Interface is the name of the responder's interface.
func (r *Responder) Interface() string { return r.name }

func (r *Responder) iface() *net.Interface {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ifi
}

// Subnets are the prefixes of the interface's addresses: the segment's.
func (r *Responder) Subnets() []netip.Prefix {
	addrs, err := r.iface().Addrs()
	if err != nil {
		return nil
	}
	var out []netip.Prefix
	for _, a := range addrs {
		if p, err := netip.ParsePrefix(a.String()); err == nil && !p.Addr().IsLinkLocalUnicast() {
			out = append(out, p.Masked())
		}
	}
	return out
}

// Run answers until ctx ends, then closes the sockets.
func (r *Responder) Run(ctx context.Context) {
	go r.readARP()
	go r.readNDP()
	<-ctx.Done()
	r.mu.Lock()
	r.closed = true
	r.arp.Close()
	if r.ndp != nil {
		r.ndp.Close()
	}
	r.mu.Unlock()
}

// Set puts a new table in force and announces, gratuitously, every VIP
// that is new or whose node changed: at once and at each of Repeats, at
// most one burst per VIP every burstGap.
func (r *Responder) Set(t Table) {
	r.mu.Lock()
	var now []netip.Addr
	for vip, mac := range t {
		if old, ok := r.table[vip]; ok && slices.Equal(old, mac) {
			continue
		}
		b := r.bursts[vip]
		if b == nil {
			b = &burst{}
			r.bursts[vip] = b
		}
		switch wait := burstGap - time.Since(b.last); {
		case wait <= 0:
			b.last = time.Now()
			now = append(now, vip)
		case !b.waiting:
			b.waiting = true
			time.AfterFunc(wait, func() { r.burstLater(vip) })
		}
	}
	for vip, b := range r.bursts {
		if _, ok := t[vip]; !ok && !b.waiting {
			delete(r.bursts, vip)
		}
	}
	r.setGroups(t)
	r.table = cloneTable(t)
	r.mu.Unlock()
	r.burst(now)
}

// burstLater sends the burst a VIP waited for.
func (r *Responder) burstLater(vip netip.Addr) {
	r.mu.Lock()
	b := r.bursts[vip]
	_, held := r.table[vip]
	if b != nil {
		b.waiting, b.last = false, time.Now()
		if !held {
			delete(r.bursts, vip)
		}
	}
	r.mu.Unlock()
	if held {
		r.burst([]netip.Addr{vip})
	}
}

// burst announces vips at once and at each of Repeats.
func (r *Responder) burst(vips []netip.Addr) {
	if len(vips) == 0 {
		return
	}
	r.announce(vips)
	for _, d := range Repeats {
		time.AfterFunc(d, func() { r.announce(vips) })
	}
}

func cloneTable(t Table) Table {
	out := make(Table, len(t))
	for k, v := range t {
		out[k] = slices.Clone(v)
	}
	return out
}

// setGroups joins the solicited-node multicast group of every IPv6 VIP of
// t, where its Neighbor Solicitations go, and leaves those no VIP needs.
// Callers hold r.mu.
func (r *Responder) setGroups(t Table) {
	if r.ndp == nil {
		return
	}
	want := map[netip.Addr]int{}
	for vip := range t {
		if vip.Is6() {
			if g, err := ndp.SolicitedNodeMulticast(vip); err == nil {
				want[g]++
			}
		}
	}
	for g := range want {
		if r.groups[g] == 0 {
			if err := r.ndp.JoinGroup(g); err != nil {
				klog.ErrorS(err, "Joining a solicited-node group; Neighbor Solicitations for its VIPs go unanswered", "group", g, "interface", r.ifi.Name)
				delete(want, g)
			}
		}
	}
	for g := range r.groups {
		if want[g] == 0 {
			r.ndp.LeaveGroup(g)
		}
	}
	r.groups = want
}

// announce sends a gratuitous ARP or an unsolicited Neighbor Advertisement
// for each of vips still in the table, naming its node as of now.
func (r *Responder) announce(vips []netip.Addr) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed || r.arp == nil {
		return
	}
	for _, vip := range vips {
		mac, ok := r.table[vip]
		if !ok {
			continue
		}
		if vip.Is4() {
			if f, ok := gratuitousARP(vip, mac, r.ifi.HardwareAddr); ok {
				if _, err := r.arp.WriteTo(f, &packet.Addr{HardwareAddr: broadcast}); err == nil {
					r.OnAnnounce(ProtocolARP)
				}
			}
		} else if r.ndp != nil {
			if err := r.ndp.WriteTo(unsolicitedAdvertisement(vip, mac), nil, netip.IPv6LinkLocalAllNodes()); err == nil {
				r.OnAnnounce(ProtocolNDP)
			}
		}
	}
}

func (r *Responder) readARP() {
	buf := make([]byte, 1500)
	for {
		r.mu.Lock()
		conn, own := r.arp, r.ifi.HardwareAddr
		r.mu.Unlock()
		n, _, err := conn.ReadFrom(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) && r.isClosed() || !r.reopen(ProtocolARP, err) {
				return
			}
			continue
		}
		f, p, ok := arpPacket(buf[:n], own)
		if !ok {
			continue
		}
		if ip, mac, ok := arpAnswer(f, p, own); ok {
			r.mu.Lock()
			r.learn(ip, mac)
			r.mu.Unlock()
			continue
		}
		r.mu.Lock()
		reply, ok := arpReply(p, r.table, own)
		r.mu.Unlock()
		if ok {
			if _, err := conn.WriteTo(reply, &packet.Addr{HardwareAddr: p.SenderHardwareAddr}); err == nil {
				r.OnReply(ProtocolARP)
			}
		}
	}
}

func (r *Responder) readNDP() {
	for {
		r.mu.Lock()
		conn := r.ndp
		r.mu.Unlock()
		if conn == nil {
			// No IPv6 link-local address when it opened (or since a
			// failure): try again, as the address may come.
			if !r.reopen(ProtocolNDP, nil) {
				return
			}
			continue
		}
		m, cm, from, err := conn.ReadFrom()
		if err != nil {
			if errors.Is(err, net.ErrClosed) && r.isClosed() || !r.reopen(ProtocolNDP, err) {
				return
			}
			continue
		}
		// RFC 4861 §7.1: only messages no router forwarded.
		if cm == nil || cm.HopLimit != ndp.HopLimit {
			continue
		}
		switch m := m.(type) {
		case *ndp.NeighborAdvertisement:
			// Only a solicited answer, from the address it answers for.
			if mac, ok := targetHardwareAddr(m); ok && m.Solicited && from == m.TargetAddress {
				r.mu.Lock()
				r.learn(m.TargetAddress, mac)
				r.mu.Unlock()
			}
		case *ndp.NeighborSolicitation:
			r.mu.Lock()
			na, to, ok := neighborAdvertisement(m, from, r.table)
			r.mu.Unlock()
			if ok && conn.WriteTo(na, nil, to) == nil {
				r.OnReply(ProtocolNDP)
			}
		}
	}
}

// reopen opens a protocol's socket again after err (nil: it had none),
// waiting reopenMin, then twice as long each try up to reopenMax, until it
// opens or the responder closes. An interface that went down and up (a
// link bounce, netplan apply, a driver reset) ends reads with ENETDOWN
// once; a socket left closed would answer nothing until the process
// restarted. It reports false once the responder is closed.
func (r *Responder) reopen(protocol string, err error) bool {
	if err != nil {
		klog.ErrorS(err, "Reading from the interface failed; opening it again", "interface", r.name, "protocol", protocol)
		r.OnSocket(protocol, err)
	}
	wait := reopenMin
	if err == nil {
		wait = reopenMax // an interface without IPv6: look now and then
	}
	for {
		time.Sleep(wait)
		if r.isClosed() {
			return false
		}
		r.mu.Lock()
		r.closeSocket(protocol)
		r.mu.Unlock()
		opened, openErr := r.openSocket(protocol)
		r.mu.Lock()
		closed := r.closed
		if closed && opened {
			r.closeSocket(protocol) // closed while opening
		}
		r.mu.Unlock()
		if closed {
			return false
		}
		if opened {
			if err != nil {
				klog.InfoS("Interface open again; answering on it", "interface", r.name, "protocol", protocol)
				r.OnSocket(protocol, nil)
			}
			// What changed while it was closed is said again.
			r.mu.Lock()
			vips := make([]netip.Addr, 0, len(r.table))
			for vip := range r.table {
				if vip.Is4() == (protocol == ProtocolARP) {
					vips = append(vips, vip)
				}
			}
			r.mu.Unlock()
			r.burst(vips)
			return true
		}
		if err == nil {
			continue
		}
		klog.V(2).InfoS("Interface does not open yet", "interface", r.name, "protocol", protocol, "err", openErr)
		wait = min(2*wait, reopenMax)
	}
}

func (r *Responder) isClosed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.closed
}

// learn takes an answer naming mac for ip, if it answers a question asked
// within answerWindow. The first answer to the first question is used at
// once; a change of what is known is put in force only when the window
// ends with one answer, and at most once every holdDown. Answers that
// disagree change nothing (and forget a first answer): a host answering
// for another (spoofing, a proxy) must not move its VIPs. Callers hold
// r.mu.
func (r *Responder) learn(ip netip.Addr, mac net.HardwareAddr) {
	l, ok := r.learned[ip]
	if !ok || time.Since(l.asked) > answerWindow {
		return
	}
	if !slices.ContainsFunc(l.answers, func(m net.HardwareAddr) bool { return slices.Equal(m, mac) }) {
		l.answers = append(l.answers, slices.Clone(mac))
	}
	switch {
	case len(l.answers) == 1 && l.mac == nil:
		l.mac, l.changed, l.initial = l.answers[0], time.Now(), true
		go r.OnLearned()
	case len(l.answers) > 1 && l.initial:
		l.mac, l.initial = nil, false
		go r.OnLearned()
	}
}

// settle puts in force what a question's window taught of ip. Callers
// must not hold r.mu.
func (r *Responder) settle(ip netip.Addr, asked time.Time) {
	r.mu.Lock()
	l, ok := r.learned[ip]
	if !ok || l.asked != asked {
		r.mu.Unlock()
		return
	}
	answers, was := slices.Clone(l.answers), l.mac
	changed := false
	switch {
	case len(answers) > 1:
		defer r.OnConflict(ip, answers)
	case len(answers) == 1 && was != nil && !slices.Equal(was, answers[0]):
		if time.Since(l.changed) < holdDown {
			defer r.OnConflict(ip, []net.HardwareAddr{was, answers[0]})
			break
		}
		l.mac, l.changed, changed = answers[0], time.Now(), true
	}
	l.initial = false
	r.mu.Unlock()
	if changed {
		r.OnLearned()
	}
}

// Learned is the hardware address last learned for ip on the segment, and
// asks for it (again) if it is unknown or was last asked for a while ago.
func (r *Responder) Learned(ip netip.Addr) (net.HardwareAddr, bool) {
	r.mu.Lock()
	now := time.Now()
	r.sweep(now)
	l, ok := r.learned[ip]
	if !ok {
		l = &learning{}
		r.learned[ip] = l
	}
	mac := l.mac
	due := l.asked.IsZero() || now.Sub(l.asked) > relearn || (mac == nil && now.Sub(l.asked) > time.Second)
	if due {
		l.asked, l.answers, l.initial = now, nil, false
	}
	r.mu.Unlock()
	if due {
		time.AfterFunc(answerWindow, func() { r.settle(ip, now) })
		r.ask(ip)
	}
	return mac, mac != nil
}

// sweep forgets, now and then, the addresses no longer asked about.
// Callers hold r.mu.
func (r *Responder) sweep(now time.Time) {
	if now.Sub(r.lastSweep) < relearn {
		return
	}
	r.lastSweep = now
	for ip, l := range r.learned {
		if now.Sub(l.asked) > forgetAfter {
			delete(r.learned, ip)
		}
	}
}

// ask sends an ARP request or a Neighbor Solicitation for ip.
func (r *Responder) ask(ip netip.Addr) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return
	}
	if r.ifi == nil || r.arp == nil {
		return // not opened (a unit test's responder)
	}
	own := r.ifi.HardwareAddr
	if ip.Is4() {
		if f, ok := arpQuestion(ip, r.sourceFor(ip), own); ok {
			r.arp.WriteTo(f, &packet.Addr{HardwareAddr: broadcast})
		}
		return
	}
	if r.ndp == nil {
		return
	}
	if group, err := ndp.SolicitedNodeMulticast(ip); err == nil {
		r.ndp.WriteTo(neighborSolicitation(ip, own), nil, group)
	}
}

// sourceFor is the interface's IPv4 address in ip's subnet, or its first.
// Callers hold r.mu.
func (r *Responder) sourceFor(ip netip.Addr) netip.Addr {
	addrs, _ := r.ifi.Addrs()
	var first netip.Addr
	for _, a := range addrs {
		p, err := netip.ParsePrefix(a.String())
		if err != nil || !p.Addr().Is4() {
			continue
		}
		if p.Contains(ip) {
			return p.Addr()
		}
		if !first.IsValid() {
			first = p.Addr()
		}
	}
	return first
}
