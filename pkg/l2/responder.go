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

// Responder answers for the VIPs of its table on one interface. It needs
// CAP_NET_RAW. Only the leader runs one: two responders on a segment would
// answer the same question differently while their tables differ.
type Responder struct {
	ifi *net.Interface
	arp *packet.Conn
	ndp *ndp.Conn // nil when the interface has no IPv6 link-local address

	// OnReply and OnAnnounce count answers and gratuitous announcements by
	// protocol; OnLearned is called when a hardware address was learned or
	// changed. Set them before Run.
	OnReply    func(protocol string)
	OnAnnounce func(protocol string)
	OnLearned  func()

	mu      sync.Mutex
	table   Table
	groups  map[netip.Addr]int // solicited-node groups joined, by how many VIPs need them
	learned map[netip.Addr]net.HardwareAddr
	asked   map[netip.Addr]time.Time
	closed  bool
}

// Listen opens the responder's sockets on the named interface.
func Listen(name string) (*Responder, error) {
	ifi, err := net.InterfaceByName(name)
	if err != nil {
		return nil, fmt.Errorf("interface %s: %w", name, err)
	}
	if len(ifi.HardwareAddr) != 6 {
		return nil, fmt.Errorf("interface %s has no Ethernet address", name)
	}
	c, err := packet.Listen(ifi, packet.Raw, unix.ETH_P_ARP, nil)
	if err != nil {
		return nil, fmt.Errorf("opening an ARP socket on %s (it needs CAP_NET_RAW): %w", name, err)
	}
	r := &Responder{ifi: ifi, arp: c, table: Table{}, groups: map[netip.Addr]int{},
		learned: map[netip.Addr]net.HardwareAddr{}, asked: map[netip.Addr]time.Time{},
		OnReply: func(string) {}, OnAnnounce: func(string) {}, OnLearned: func() {}}
	if r.ndp, _, err = ndp.Listen(ifi, ndp.LinkLocal); err != nil {
		klog.InfoS("No IPv6 on the interface; IPv6 VIPs are not answered there", "interface", name, "err", err)
		r.ndp = nil
	} else if err := r.setupNDP(); err != nil {
		c.Close()
		r.ndp.Close()
		return nil, fmt.Errorf("NDP socket on %s: %w", name, err)
	}
	return r, nil
}

func (r *Responder) setupNDP() error {
	var f ipv6.ICMPFilter
	f.SetAll(true)
	f.Accept(ipv6.ICMPTypeNeighborSolicitation)
	f.Accept(ipv6.ICMPTypeNeighborAdvertisement)
	if err := r.ndp.SetICMPFilter(&f); err != nil {
		return err
	}
	return r.ndp.SetControlMessage(ipv6.FlagHopLimit, true)
}

// Interface is the name of the responder's interface.
func (r *Responder) Interface() string { return r.ifi.Name }

// Subnets are the prefixes of the interface's addresses: the segment's.
func (r *Responder) Subnets() []netip.Prefix {
	addrs, err := r.ifi.Addrs()
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
	if r.ndp != nil {
		go r.readNDP()
	}
	<-ctx.Done()
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	r.arp.Close()
	if r.ndp != nil {
		r.ndp.Close()
	}
}

// Set puts a new table in force and announces, gratuitously, every VIP
// that is new or whose node changed: at once and at each of Repeats.
func (r *Responder) Set(t Table) {
	r.mu.Lock()
	var changed []netip.Addr
	for vip, mac := range t {
		if old, ok := r.table[vip]; !ok || !slices.Equal(old, mac) {
			changed = append(changed, vip)
		}
	}
	r.setGroups(t)
	r.table = cloneTable(t)
	r.mu.Unlock()
	if len(changed) == 0 {
		return
	}
	r.announce(changed)
	for _, d := range Repeats {
		time.AfterFunc(d, func() { r.announce(changed) })
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
	if r.closed {
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
		n, _, err := r.arp.ReadFrom(buf)
		if err != nil {
			if !errors.Is(err, net.ErrClosed) && !r.isClosed() {
				klog.ErrorS(err, "Reading ARP; no more ARP answers on this interface", "interface", r.ifi.Name)
			}
			return
		}
		p, ok := arpPacket(buf[:n], r.ifi.HardwareAddr)
		if !ok {
			continue
		}
		r.mu.Lock()
		r.learn(p.SenderIP, p.SenderHardwareAddr)
		reply, ok := arpReply(p, r.table, r.ifi.HardwareAddr)
		r.mu.Unlock()
		if ok {
			if _, err := r.arp.WriteTo(reply, &packet.Addr{HardwareAddr: p.SenderHardwareAddr}); err == nil {
				r.OnReply(ProtocolARP)
			}
		}
	}
}

func (r *Responder) readNDP() {
	for {
		m, cm, from, err := r.ndp.ReadFrom()
		if err != nil {
			if !errors.Is(err, net.ErrClosed) && !r.isClosed() {
				klog.ErrorS(err, "Reading NDP; no more Neighbor Advertisements on this interface", "interface", r.ifi.Name)
			}
			return
		}
		// RFC 4861 §7.1: only messages no router forwarded.
		if cm == nil || cm.HopLimit != ndp.HopLimit {
			continue
		}
		switch m := m.(type) {
		case *ndp.NeighborAdvertisement:
			if mac, ok := targetHardwareAddr(m); ok {
				r.mu.Lock()
				r.learn(m.TargetAddress, mac)
				r.mu.Unlock()
			}
		case *ndp.NeighborSolicitation:
			r.mu.Lock()
			na, to, ok := neighborAdvertisement(m, from, r.table)
			r.mu.Unlock()
			if ok && r.ndp.WriteTo(na, nil, to) == nil {
				r.OnReply(ProtocolNDP)
			}
		}
	}
}

func (r *Responder) isClosed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.closed
}

// learn records ip's hardware address if it was asked for. Callers hold
// r.mu.
func (r *Responder) learn(ip netip.Addr, mac net.HardwareAddr) {
	if _, asked := r.asked[ip]; !asked || len(mac) != 6 {
		return
	}
	if old, ok := r.learned[ip]; ok && slices.Equal(old, mac) {
		return
	}
	r.learned[ip] = slices.Clone(mac)
	go r.OnLearned()
}

// Learned is the hardware address last seen for ip on the segment, and
// asks for it (again) if it is unknown or was last asked for a while ago.
func (r *Responder) Learned(ip netip.Addr) (net.HardwareAddr, bool) {
	r.mu.Lock()
	mac, ok := r.learned[ip]
	last, asked := r.asked[ip]
	due := !asked || time.Since(last) > relearn || (!ok && time.Since(last) > time.Second)
	if due {
		r.asked[ip] = time.Now()
	}
	r.mu.Unlock()
	if due {
		r.ask(ip)
	}
	return mac, ok
}

// ask sends an ARP request or a Neighbor Solicitation for ip.
func (r *Responder) ask(ip netip.Addr) {
	if ip.Is4() {
		if f, ok := arpQuestion(ip, r.sourceFor(ip), r.ifi.HardwareAddr); ok {
			r.arp.WriteTo(f, &packet.Addr{HardwareAddr: broadcast})
		}
		return
	}
	if r.ndp == nil {
		return
	}
	if group, err := ndp.SolicitedNodeMulticast(ip); err == nil {
		r.ndp.WriteTo(neighborSolicitation(ip, r.ifi.HardwareAddr), nil, group)
	}
}

// sourceFor is the interface's IPv4 address in ip's subnet, or its first.
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
