package l2

import (
	"bytes"
	"net"
	"net/netip"

	"github.com/mdlayher/arp"
	"github.com/mdlayher/ethernet"
	"github.com/mdlayher/ndp"
)

// The frames the responder reads and writes, built and parsed here without
// sockets. Every frame it sends carries its own interface's address as the
// Ethernet source, whatever node the ARP or NDP payload names: a switch
// must keep learning the nodes' addresses on the nodes' ports.

var broadcast = net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}

// Table is what the responder answers: VIP → the hardware address of the
// node that carries it.
type Table map[netip.Addr]net.HardwareAddr

// arpPacket parses an Ethernet frame and returns it with the ARP packet in
// it, if it is one that was not sent from own.
func arpPacket(frame []byte, own net.HardwareAddr) (*ethernet.Frame, *arp.Packet, bool) {
	var f ethernet.Frame
	if err := f.UnmarshalBinary(frame); err != nil || f.EtherType != ethernet.EtherTypeARP || bytes.Equal(f.Source, own) {
		return nil, nil, false
	}
	var p arp.Packet
	if err := p.UnmarshalBinary(f.Payload); err != nil {
		return nil, nil, false
	}
	return &f, &p, true
}

// arpAnswer is, for an ARP frame that answers one of own's questions, the
// address it answers for and the hardware address it names: a reply sent
// to own, whose Ethernet source is the hardware address it names. Anything
// else (a request, a gratuitous announcement, a reply to another host, a
// frame whose payload names another host than sent it) teaches nothing:
// one frame must not move a node's VIPs.
func arpAnswer(f *ethernet.Frame, p *arp.Packet, own net.HardwareAddr) (netip.Addr, net.HardwareAddr, bool) {
	if p.Operation != arp.OperationReply || !bytes.Equal(f.Destination, own) || !bytes.Equal(p.TargetHardwareAddr, own) ||
		!bytes.Equal(f.Source, p.SenderHardwareAddr) || len(p.SenderHardwareAddr) != 6 {
		return netip.Addr{}, nil, false
	}
	return p.SenderIP, p.SenderHardwareAddr, true
}

// arpReply is the reply to req naming mac as the hardware address of its
// target, sent from own to the asker; ok is false when the target is not
// in the table or req asks nothing.
func arpReply(req *arp.Packet, table Table, own net.HardwareAddr) (frame []byte, ok bool) {
	if req.Operation != arp.OperationRequest {
		return nil, false
	}
	mac, ok := table[req.TargetIP]
	if !ok || req.SenderIP == req.TargetIP { // a gratuitous request asks nothing
		return nil, false
	}
	p, err := arp.NewPacket(arp.OperationReply, mac, req.TargetIP, req.SenderHardwareAddr, req.SenderIP)
	if err != nil {
		return nil, false
	}
	return arpFrame(p, own, req.SenderHardwareAddr)
}

// gratuitousARP tells the whole segment that vip is at mac: a broadcast
// request for vip from vip, which updates the entries every host has.
func gratuitousARP(vip netip.Addr, mac, own net.HardwareAddr) ([]byte, bool) {
	p, err := arp.NewPacket(arp.OperationRequest, mac, vip, net.HardwareAddr{0, 0, 0, 0, 0, 0}, vip)
	if err != nil {
		return nil, false
	}
	return arpFrame(p, own, broadcast)
}

// arpQuestion asks the segment who has ip, from own at src (the
// unspecified address when own has no IPv4 address there).
func arpQuestion(ip, src netip.Addr, own net.HardwareAddr) ([]byte, bool) {
	if !src.IsValid() {
		src = netip.IPv4Unspecified()
	}
	p, err := arp.NewPacket(arp.OperationRequest, own, src, net.HardwareAddr{0, 0, 0, 0, 0, 0}, ip)
	if err != nil {
		return nil, false
	}
	return arpFrame(p, own, broadcast)
}

func arpFrame(p *arp.Packet, from, to net.HardwareAddr) ([]byte, bool) {
	payload, err := p.MarshalBinary()
	if err != nil {
		return nil, false
	}
	f := ethernet.Frame{Destination: to, Source: from, EtherType: ethernet.EtherTypeARP, Payload: payload}
	b, err := f.MarshalBinary()
	return b, err == nil
}

// neighborAdvertisement answers a Neighbor Solicitation for a VIP in the
// table: solicited and overriding, naming the node's hardware address, to
// be sent to the asker (or, for a duplicate address check from ::, to all
// nodes, unsolicited). ok is false for any other target.
func neighborAdvertisement(ns *ndp.NeighborSolicitation, from netip.Addr, table Table) (na *ndp.NeighborAdvertisement, to netip.Addr, ok bool) {
	mac, ok := table[ns.TargetAddress]
	if !ok {
		return nil, netip.Addr{}, false
	}
	if from.IsUnspecified() {
		return unsolicitedAdvertisement(ns.TargetAddress, mac), netip.IPv6LinkLocalAllNodes(), true
	}
	return &ndp.NeighborAdvertisement{
		Solicited: true, Override: true, TargetAddress: ns.TargetAddress,
		Options: []ndp.Option{&ndp.LinkLayerAddress{Direction: ndp.Target, Addr: mac}},
	}, from, true
}

// unsolicitedAdvertisement tells all nodes that vip is at mac, overriding
// the entries they have (RFC 4861 §7.2.6).
func unsolicitedAdvertisement(vip netip.Addr, mac net.HardwareAddr) *ndp.NeighborAdvertisement {
	return &ndp.NeighborAdvertisement{
		Override: true, TargetAddress: vip,
		Options: []ndp.Option{&ndp.LinkLayerAddress{Direction: ndp.Target, Addr: mac}},
	}
}

// neighborSolicitation asks for ip's hardware address, from own.
func neighborSolicitation(ip netip.Addr, own net.HardwareAddr) *ndp.NeighborSolicitation {
	return &ndp.NeighborSolicitation{TargetAddress: ip,
		Options: []ndp.Option{&ndp.LinkLayerAddress{Direction: ndp.Source, Addr: own}}}
}

// targetHardwareAddr is the hardware address a Neighbor Advertisement
// names for its target.
func targetHardwareAddr(na *ndp.NeighborAdvertisement) (net.HardwareAddr, bool) {
	for _, o := range na.Options {
		if l, ok := o.(*ndp.LinkLayerAddress); ok && l.Direction == ndp.Target {
			return l.Addr, true
		}
	}
	return nil, false
}
