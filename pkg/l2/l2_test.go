package l2

import (
	"bytes"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/mdlayher/arp"
	"github.com/mdlayher/ethernet"
	"github.com/mdlayher/ndp"
)

func nodes(n int) []string {
	var out []string
	for i := range n {
		out = append(out, fmt.Sprintf("node-%d", i))
	}
	return out
}

func vips(n int) []netip.Addr {
	var out []netip.Addr
	a := netip.MustParseAddr("192.0.2.0")
	for range n {
		a = a.Next()
		out = append(out, a)
	}
	return out
}

func TestChooseIsStableAndIndependentOfOrder(t *testing.T) {
	ns := nodes(5)
	reversed := []string{ns[4], ns[3], ns[2], ns[1], ns[0]}
	for _, vip := range vips(50) {
		if a, b := Choose(vip, ns), Choose(vip, reversed); a != b || a == "" {
			t.Fatalf("%s: %q from one order, %q from another", vip, a, b)
		}
	}
	if got := Choose(netip.MustParseAddr("192.0.2.1"), nil); got != "" {
		t.Errorf("no nodes: chose %q", got)
	}
}

func TestChooseSpreadsVIPsOverNodes(t *testing.T) {
	count := map[string]int{}
	for _, vip := range vips(1000) {
		count[Choose(vip, nodes(4))]++
	}
	for _, n := range nodes(4) {
		// 250 each on average; a fair split stays well inside this.
		if count[n] < 180 || count[n] > 320 {
			t.Errorf("1,000 VIPs over 4 nodes: %v", count)
			break
		}
	}
}

// Only the VIPs of a node that goes move, and only to the others; a node
// that comes takes VIPs only for itself.
func TestChooseMovesOnlyWhatItMust(t *testing.T) {
	all, without := nodes(4), nodes(3) // node-3 goes
	moved := 0
	for _, vip := range vips(1000) {
		before, after := Choose(vip, all), Choose(vip, without)
		if before != "node-3" && before != after {
			t.Fatalf("%s moved from %s to %s when node-3 went", vip, before, after)
		}
		if before == "node-3" {
			moved++
		}
	}
	if moved == 0 {
		t.Error("node-3 carried no VIP of 1,000")
	}
}

var (
	own    = net.HardwareAddr{0x02, 0, 0, 0, 0, 0x01}
	nodeHW = net.HardwareAddr{0x02, 0, 0, 0, 0, 0x11}
	client = net.HardwareAddr{0x02, 0, 0, 0, 0, 0x99}
)

func request(t *testing.T, from net.HardwareAddr, sender, target string) []byte {
	t.Helper()
	p, err := arp.NewPacket(arp.OperationRequest, from, netip.MustParseAddr(sender), net.HardwareAddr{0, 0, 0, 0, 0, 0}, netip.MustParseAddr(target))
	if err != nil {
		t.Fatal(err)
	}
	f, ok := arpFrame(p, from, broadcast)
	if !ok {
		t.Fatal("frame")
	}
	return f
}

func parse(t *testing.T, frame []byte) (*ethernet.Frame, *arp.Packet) {
	t.Helper()
	var f ethernet.Frame
	if err := f.UnmarshalBinary(frame); err != nil {
		t.Fatal(err)
	}
	var p arp.Packet
	if err := p.UnmarshalBinary(f.Payload); err != nil {
		t.Fatal(err)
	}
	return &f, &p
}

func TestARPReplyNamesTheNodeFromOurOwnAddress(t *testing.T) {
	vip := netip.MustParseAddr("192.0.2.10")
	table := Table{vip: nodeHW}
	tests := []struct {
		name  string
		frame []byte
		want  bool
	}{
		{"request for a VIP", request(t, client, "192.0.2.99", "192.0.2.10"), true},
		{"request for another address", request(t, client, "192.0.2.99", "192.0.2.11"), false},
		{"a gratuitous request for the VIP", request(t, client, "192.0.2.10", "192.0.2.10"), false},
		{"our own request", request(t, own, "192.0.2.99", "192.0.2.10"), false},
		{"not ARP", []byte{1, 2, 3}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, req, ok := arpPacket(tt.frame, own)
			var reply []byte
			if ok {
				reply, ok = arpReply(req, table, own)
			}
			if ok != tt.want {
				t.Fatalf("answered %v, want %v", ok, tt.want)
			}
			if !ok {
				return
			}
			f, p := parse(t, reply)
			// The switch must keep learning the node's address on the
			// node's port: the frame comes from us.
			if !bytes.Equal(f.Source, own) || !bytes.Equal(f.Destination, client) {
				t.Errorf("frame from %s to %s, want from %s (ours) to %s", f.Source, f.Destination, own, client)
			}
			if p.Operation != arp.OperationReply || !bytes.Equal(p.SenderHardwareAddr, nodeHW) || p.SenderIP != vip ||
				!bytes.Equal(p.TargetHardwareAddr, client) || p.TargetIP != netip.MustParseAddr("192.0.2.99") {
				t.Errorf("reply %+v: want %s is-at %s, to %s", p, vip, nodeHW, client)
			}
		})
	}
}

func TestGratuitousARPUpdatesEveryHost(t *testing.T) {
	vip := netip.MustParseAddr("192.0.2.10")
	frame, ok := gratuitousARP(vip, nodeHW, own)
	if !ok {
		t.Fatal("no frame")
	}
	f, p := parse(t, frame)
	if !bytes.Equal(f.Destination, broadcast) || !bytes.Equal(f.Source, own) {
		t.Errorf("frame from %s to %s, want from ours to broadcast", f.Source, f.Destination)
	}
	// Linux takes a request whose sender and target are the same address
	// as gratuitous, and overrides its entry at once.
	if p.Operation != arp.OperationRequest || p.SenderIP != vip || p.TargetIP != vip || !bytes.Equal(p.SenderHardwareAddr, nodeHW) {
		t.Errorf("packet %+v, want a request for %s from %s at %s", p, vip, vip, nodeHW)
	}
}

func TestNeighborAdvertisement(t *testing.T) {
	vip := netip.MustParseAddr("2001:db8::10")
	asker := netip.MustParseAddr("fe80::99")
	table := Table{vip: nodeHW}

	na, to, ok := neighborAdvertisement(&ndp.NeighborSolicitation{TargetAddress: vip}, asker, table)
	if !ok || to != asker || !na.Solicited || !na.Override || na.TargetAddress != vip {
		t.Fatalf("answer %+v to %s (%v), want a solicited, overriding advertisement of %s to %s", na, to, ok, vip, asker)
	}
	if hw, _ := targetHardwareAddr(na); !bytes.Equal(hw, nodeHW) {
		t.Errorf("advertised %s, want the node's %s", hw, nodeHW)
	}
	// A duplicate address check, from ::, is answered to all nodes.
	if na, to, ok := neighborAdvertisement(&ndp.NeighborSolicitation{TargetAddress: vip}, netip.IPv6Unspecified(), table); !ok || na.Solicited || to != netip.IPv6LinkLocalAllNodes() {
		t.Errorf("duplicate address check answered %+v to %s (%v), want unsolicited to ff02::1", na, to, ok)
	}
	if _, _, ok := neighborAdvertisement(&ndp.NeighborSolicitation{TargetAddress: netip.MustParseAddr("2001:db8::11")}, asker, table); ok {
		t.Error("answered for an address not in the table")
	}
	// What is sent must survive the wire.
	b, err := ndp.MarshalMessage(unsolicitedAdvertisement(vip, nodeHW))
	if err != nil {
		t.Fatal(err)
	}
	m, err := ndp.ParseMessage(b)
	if err != nil {
		t.Fatal(err)
	}
	if got := m.(*ndp.NeighborAdvertisement); got.Solicited || !got.Override || got.TargetAddress != vip {
		t.Errorf("unsolicited advertisement read back as %+v", got)
	}
}

// Only an ARP reply to our own question teaches a node's MAC: sent to us,
// naming us as its target, from the MAC it names.
func TestARPAnswerTeachesOnlyRepliesToUs(t *testing.T) {
	own := net.HardwareAddr{0x02, 0, 0, 0, 0, 0x01}
	node := net.HardwareAddr{0x02, 0, 0, 0, 0, 0x0b}
	spoof := net.HardwareAddr{0x02, 0, 0, 0, 0, 0x66}
	other := net.HardwareAddr{0x02, 0, 0, 0, 0, 0x77}
	ip := netip.MustParseAddr("192.0.2.12")
	frame := func(op arp.Operation, sender, target, ethSrc, ethDst net.HardwareAddr, senderIP netip.Addr) []byte {
		p, err := arp.NewPacket(op, sender, senderIP, target, netip.MustParseAddr("192.0.2.1"))
		if err != nil {
			t.Fatal(err)
		}
		b, ok := arpFrame(p, ethSrc, ethDst)
		if !ok {
			t.Fatal("frame")
		}
		return b
	}
	zero := net.HardwareAddr{0, 0, 0, 0, 0, 0}
	for _, tc := range []struct {
		name  string
		frame []byte
		ok    bool
	}{
		{"the node's reply to us", frame(arp.OperationReply, node, own, node, own, ip), true},
		{"a reply to another host", frame(arp.OperationReply, spoof, other, spoof, other, ip), false},
		{"a reply to us naming another MAC than sent it", frame(arp.OperationReply, spoof, own, node, own, ip), false},
		{"a reply sent to us whose target is another host", frame(arp.OperationReply, spoof, other, spoof, own, ip), false},
		{"a gratuitous request", frame(arp.OperationRequest, spoof, zero, spoof, broadcast, ip), false},
		{"a request to us", frame(arp.OperationRequest, spoof, zero, spoof, own, ip), false},
		{"a reply broadcast", frame(arp.OperationReply, spoof, own, spoof, broadcast, ip), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, p, ok := arpPacket(tc.frame, own)
			var got netip.Addr
			var mac net.HardwareAddr
			if ok {
				got, mac, ok = arpAnswer(f, p, own)
			}
			if ok != tc.ok || ok && (got != ip || !bytes.Equal(mac, node)) {
				t.Errorf("arpAnswer: %v %v %v, want ok %v", got, mac, ok, tc.ok)
			}
		})
	}
}

// learner is a responder without sockets, for the rules of learning and
// announcing.
func learner() *Responder {
	return &Responder{table: Table{}, groups: map[netip.Addr]int{}, learned: map[netip.Addr]*learning{}, bursts: map[netip.Addr]*burst{},
		OnLearned: func() {}, OnConflict: func(netip.Addr, []net.HardwareAddr) {}}
}

func TestLearningTrustsOnlyAnswersToItsQuestions(t *testing.T) {
	node := net.HardwareAddr{0x02, 0, 0, 0, 0, 0x0b}
	spoof := net.HardwareAddr{0x02, 0, 0, 0, 0, 0x66}
	ip := netip.MustParseAddr("192.0.2.12")
	// Steps: ask (a question), again (the next relearn's question), node
	// and spoof (answers naming those MACs), late (the question's window
	// passes), old (the hold-down since the last change passes), settle
	// (the window ends), and =MAC checks what is known at that point.
	for _, tc := range []struct {
		name      string
		steps     string
		want      string // known at the end ("" for nothing)
		conflicts int
	}{
		{"nothing asked, nothing learned", "spoof", "", 0},
		{"an answer after the window is ignored", "ask late node", "", 0},
		{"the first answer is used at once", "ask node =node settle", "node", 0},
		{"two answers to one question: neither", "ask node spoof settle", "", 1},
		{"a known MAC stays against a disagreeing answer", "ask node settle again spoof node =node settle", "node", 1},
		{"a change is held down", "ask node settle again spoof settle", "node", 1},
		{"then taken (a replaced network card)", "ask node settle again spoof settle old again spoof settle", "spoof", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var conflicts int
			r := learner()
			r.OnConflict = func(netip.Addr, []net.HardwareAddr) { conflicts++ }
			names := map[string]string{node.String(): "node", spoof.String(): "spoof"}
			known := func() string {
				r.mu.Lock()
				defer r.mu.Unlock()
				if l := r.learned[ip]; l != nil && l.mac != nil {
					return names[l.mac.String()]
				}
				return ""
			}
			age := func(f func(l *learning)) {
				r.mu.Lock()
				f(r.learned[ip])
				r.mu.Unlock()
			}
			for _, step := range strings.Fields(tc.steps) {
				switch step {
				case "ask":
					r.Learned(ip)
				case "again":
					age(func(l *learning) { l.asked = time.Now().Add(-relearn - time.Second) })
					r.Learned(ip)
				case "node", "spoof":
					mac := map[string]net.HardwareAddr{"node": node, "spoof": spoof}[step]
					r.mu.Lock()
					r.learn(ip, mac)
					r.mu.Unlock()
				case "late":
					age(func(l *learning) { l.asked = time.Now().Add(-answerWindow - time.Second) })
				case "old":
					age(func(l *learning) { l.changed = time.Now().Add(-holdDown - time.Second) })
				case "settle":
					r.mu.Lock()
					asked := r.learned[ip].asked
					r.mu.Unlock()
					r.settle(ip, asked)
				default:
					if got := known(); got != step[1:] {
						t.Fatalf("at %s: known %q", step, got)
					}
				}
			}
			if got := known(); got != tc.want {
				t.Errorf("known %q, want %q", got, tc.want)
			}
			if conflicts != tc.conflicts {
				t.Errorf("%d conflicts said, want %d", conflicts, tc.conflicts)
			}
		})
	}
}

// A VIP whose node changes again within burstGap is announced once more
// when the gap ends, not at every change: alternating tables cannot make
// the responder flood the segment.
func TestBurstsAreSpacedPerVIP(t *testing.T) {
	gap := burstGap
	burstGap = 200 * time.Millisecond
	defer func() { burstGap = gap }()
	r := learner()
	vip := netip.MustParseAddr("192.0.2.200")
	a, b := net.HardwareAddr{2, 0, 0, 0, 0, 0xa}, net.HardwareAddr{2, 0, 0, 0, 0, 0xb}
	for i := range 50 {
		mac := a
		if i%2 == 1 {
			mac = b
		}
		r.Set(Table{vip: mac})
	}
	r.mu.Lock()
	bu := r.bursts[vip]
	waiting := bu != nil && bu.waiting
	r.mu.Unlock()
	if !waiting {
		t.Fatal("no burst waits for the gap after 50 changes")
	}
	time.Sleep(300 * time.Millisecond)
	r.mu.Lock()
	waiting = r.bursts[vip].waiting
	r.mu.Unlock()
	if waiting {
		t.Error("the waiting burst was not sent when the gap ended")
	}
	r.Set(Table{})
	time.Sleep(10 * time.Millisecond)
	r.mu.Lock()
	left := len(r.bursts)
	r.mu.Unlock()
	if left != 0 {
		t.Errorf("%d bursts kept for VIPs no longer in the table", left)
	}
}
