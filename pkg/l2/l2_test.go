package l2

import (
	"bytes"
	"fmt"
	"net"
	"net/netip"
	"testing"

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
			req, ok := arpPacket(tt.frame, own)
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
