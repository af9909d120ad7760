package l2announcer

import (
	"bytes"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/desired"
	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/l2"
	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/report"
)

// Answer is who answers for a layer 2 VIP.
type Answer struct {
	Interface, Node string
	MAC             net.HardwareAddr
}

// convergence is one round over the segments: for each open segment, its
// VIPs with the hardware address of the node chosen for each (and that
// choice by VIP); the problems found; the VIPs per interface and node; and
// how many layer 2 VIPs are not answered.
type convergence struct {
	tables     map[string]l2.Table
	chosen     map[netip.Addr][]Answer
	problems   []report.Problem
	series     []report.Series
	unanswered int
}

func answer(st *desired.State, segs map[string]Segment) convergence {
	tables := map[string]l2.Table{}
	chosenBy := map[netip.Addr][]Answer{}
	subnets := map[string][]netip.Prefix{}
	for iface, s := range segs {
		tables[iface] = l2.Table{}
		subnets[iface] = s.Subnets()
	}
	var problems []report.Problem
	// Each node's MAC on each segment, found once per convergence, not
	// once per VIP: asking the segment takes its lock.
	macs := map[string]map[string]net.HardwareAddr{}
	for iface, seg := range segs {
		macs[iface] = map[string]net.HardwareAddr{}
		for _, node := range st.Carrying {
			mac, ok, unseen := macOn(seg, subnets[iface], node)
			if ok {
				macs[iface][node.Name] = mac
			}
			if unseen && onSegment(node, subnets[iface]) {
				problems = append(problems, macNotSeen(iface, node))
			}
		}
	}
	count := map[[2]string]float64{}
	unanswered := 0
	for _, v := range st.Layer2() {
		// A VIP is answered on each of its interfaces whose subnets hold
		// it; a pool over several segments has each VIP on one of them.
		var on, closed []string
		for _, iface := range v.Interfaces {
			switch {
			case segs[iface] == nil:
				closed = append(closed, iface) // said when it failed to open
			case containedIn(v.Addr, subnets[iface]):
				on = append(on, iface)
			}
		}
		if len(on) == 0 {
			unanswered++
			if len(closed) < len(v.Interfaces) {
				problems = append(problems, offSegment(v, subnets))
			}
			continue
		}
		for _, iface := range on {
			var names []string
			for _, node := range v.Carriers {
				if _, ok := macs[iface][node.Name]; ok {
					names = append(names, node.Name)
				}
			}
			chosen := l2.Choose(v.Addr, names)
			if chosen == "" {
				continue
			}
			tables[iface][v.Addr] = macs[iface][chosen]
			chosenBy[v.Addr] = append(chosenBy[v.Addr], Answer{Interface: iface, Node: chosen, MAC: macs[iface][chosen]})
			count[[2]string{iface, chosen}]++
		}
		if len(chosenBy[v.Addr]) == 0 {
			unanswered++
			problems = append(problems, unanswerable(v))
		}
	}
	series := make([]report.Series, 0, len(count))
	for k, c := range count {
		series = append(series, report.Series{Labels: []string{k[0], k[1]}, Value: c})
	}
	return convergence{tables: tables, chosen: chosenBy, problems: problems, series: series, unanswered: unanswered}
}

// macOn is the hardware address a node is reached at on a segment: the
// inventory's when it lists one; when it lists several, the one seen
// there, and none while none is (any of them may be on another segment:
// naming it would black-hole the node's VIPs); else the one learned for
// the node's address in the segment's subnets. unseen is set for a node
// listing several, none seen.
func macOn(seg Segment, subnets []netip.Prefix, node *desired.Node) (mac net.HardwareAddr, ok, unseen bool) {
	if len(node.MACs) == 1 {
		return node.MACs[0], true, false
	}
	var learned net.HardwareAddr
	for _, ip := range node.IPs {
		if containedIn(ip, subnets) {
			if mac, ok := seg.Learned(ip); ok {
				learned = mac
				break
			}
		}
	}
	if len(node.MACs) == 0 {
		return learned, learned != nil, false
	}
	for _, m := range node.MACs {
		if bytes.Equal(m, learned) {
			return m, true, false
		}
	}
	return nil, false, true
}

func onSegment(node *desired.Node, subnets []netip.Prefix) bool {
	return slices.ContainsFunc(node.IPs, func(ip netip.Addr) bool { return containedIn(ip, subnets) })
}

func containedIn(ip netip.Addr, prefixes []netip.Prefix) bool {
	for _, p := range prefixes {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

func macNotSeen(iface string, node *desired.Node) report.Problem {
	return report.Problem{Reason: "L2MACNotSeen", Object: report.Node(node.Name), Subject: iface,
		Log: "Node lists several MACs, none seen on the segment; it carries none of its layer 2 VIPs", LogValues: []any{"interface", iface, "macs", node.MACs},
		Message:  fmt.Sprintf("none of the macAddresses %v of machine %q answers on interface %s; the node carries none of its layer 2 VIPs until one does (list the one on that segment first, or only it)", node.MACs, node.Machine, iface),
		Resolved: "Node's MAC seen on the segment again; it carries layer 2 VIPs"}
}

func offSegment(v desired.VIP, subnets map[string][]netip.Prefix) report.Problem {
	var where []string
	for _, iface := range v.Interfaces {
		if sn, ok := subnets[iface]; ok {
			where = append(where, fmt.Sprintf("%s (%v)", iface, sn))
		}
	}
	field := "l2.interface"
	if len(v.Interfaces) > 1 {
		field = "l2.interfaces"
	}
	return report.Problem{Reason: "VIPOutsideSegment", Object: report.Service(v.Namespace, v.Name), Subject: v.Addr.String(),
		Log: "Layer 2 VIP is outside its interfaces' subnets; it is not answered", LogValues: []any{"address", v.Addr, "interfaces", where},
		Message: fmt.Sprintf("address %s is in no subnet of interface %s named by its pool's %s; it is not answered there: give the pool addresses of that segment", v.Addr, strings.Join(where, ", "), field)}
}

func unanswerable(v desired.VIP) report.Problem {
	return report.Problem{Reason: "VIPNotAnnounced", Object: report.Service(v.Namespace, v.Name), Subject: v.Addr.String(),
		Log: "Layer 2 VIP is not answered: no eligible node with a known hardware address", LogValues: []any{"address", v.Addr},
		Message:  fmt.Sprintf("address %s is not answered: no Ready, initialised, healthy node that may carry it has an %s address and a known hardware address on the segment (inventory macAddresses, or its address answering there)", v.Addr, desired.FamilyName(v.Addr)),
		Resolved: "Layer 2 VIP has a node to carry it again"}
}
