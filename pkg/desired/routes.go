package desired

import (
	"fmt"
	"net/netip"

	v1 "k8s.io/api/core/v1"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/bgp"
	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/config"
)

// Route is a Node's pod CIDR.
type Route struct {
	Node string
	CIDR netip.Prefix
}

// RouteNextHop is where a route sends its pod CIDR: the address of
// routes.nextHopAddressType and the CIDR's family among the addresses the
// cloud stands behind for its Node (node nil: no such Node).
func RouteNextHop(rt *config.Routes, r Route, node *Node) (netip.Addr, error) {
	if node == nil {
		return netip.Addr{}, fmt.Errorf("route %s to Node %s: node %q not found", r.CIDR, r.Node, r.Node)
	}
	if node.Err != nil {
		return netip.Addr{}, fmt.Errorf("route %s to Node %s: %w; it is routed once the cloud knows the Node", r.CIDR, r.Node, node.Err)
	}
	want := v1.NodeAddressType(rt.NextHopAddressType)
	for _, a := range node.Addresses {
		if ip, err := netip.ParseAddr(a.Address); err == nil && a.Type == want && ip.Is4() == r.CIDR.Addr().Is4() {
			return ip.Unmap(), nil
		}
	}
	return netip.Addr{}, fmt.Errorf("route %s to Node %s: the Node has no %s of that family (routes.nextHopAddressType)", r.CIDR, r.Node, want)
}

// routePaths are the BGP paths of the routes whose Node has a next hop,
// and those Nodes.
func routePaths(rt *config.Routes, table []Route, nodes Nodes) ([]bgp.Announcement, []*Node) {
	if rt == nil {
		return nil, nil
	}
	attrs := AttributesOf(rt.BGP)
	paths := make([]bgp.Announcement, 0, len(table))
	via := make([]*Node, 0, len(table))
	for _, r := range table {
		node := nodes.ByName[r.Node]
		if hop, err := RouteNextHop(rt, r, node); err == nil {
			paths = append(paths, bgp.Announcement{Prefix: r.CIDR, NextHops: []netip.Addr{hop}, Attributes: attrs})
			via = append(via, node)
		}
	}
	return paths, via
}
