package provider

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/klog/v2"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/bgp"
)

var _ cloudprovider.Routes = &Cloud{}

// route is a pod CIDR announced with its Node's address as next hop.
type route struct {
	node      string
	cidr      netip.Prefix
	addresses []v1.NodeAddress // the Node's addresses when it was created
}

// Routes implements cloudprovider.Interface; it reports support only when
// the cloud config has a routes section.
func (c *Cloud) Routes() (cloudprovider.Routes, bool) {
	c.net.mu.Lock()
	defer c.net.mu.Unlock()
	return c, c.net.cfg.Routes != nil
}

// ListRoutes returns the routes announced for this cluster: those whose
// Node the cloud still knows. The route controller creates the others
// again, and its CreateRoute error keeps the Node's NetworkUnavailable
// condition true while the route is not announced.
func (c *Cloud) ListRoutes(ctx context.Context, _ string) ([]*cloudprovider.Route, error) {
	if err := c.net.waitReady(ctx); err != nil {
		return nil, err
	}
	c.net.mu.Lock()
	defer c.net.mu.Unlock()
	var out []*cloudprovider.Route
	for _, r := range c.net.routes {
		if _, err := c.net.routeNextHop(r); err != nil {
			continue
		}
		out = append(out, &cloudprovider.Route{
			Name: r.node + "/" + r.cidr.String(), TargetNode: types.NodeName(r.node), DestinationCIDR: r.cidr.String(),
			EnableNodeAddresses: true, TargetNodeAddresses: r.addresses,
		})
	}
	slices.SortFunc(out, func(a, b *cloudprovider.Route) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// CreateRoute announces the route's pod CIDR via its Node.
func (c *Cloud) CreateRoute(ctx context.Context, _ string, _ string, r *cloudprovider.Route) error {
	if err := c.net.waitReady(ctx); err != nil {
		return err
	}
	n := c.net
	n.mu.Lock()
	rt, nextHop, err := n.newRoute(string(r.TargetNode), r.DestinationCIDR, r.TargetNodeAddresses)
	if err == nil {
		n.routes[rt.cidr.String()] = rt
		delete(n.leaving, rt.cidr.String())
	}
	n.mu.Unlock()
	if err != nil {
		return err
	}
	klog.InfoS("Route created", "node", rt.node, "podCIDR", rt.cidr, "nextHop", nextHop)
	n.announce()
	return nil
}

// DeleteRoute withdraws the route.
func (c *Cloud) DeleteRoute(ctx context.Context, _ string, r *cloudprovider.Route) error {
	if err := c.net.waitReady(ctx); err != nil {
		return err
	}
	n := c.net
	p, err := netip.ParsePrefix(r.DestinationCIDR)
	if err != nil {
		return nil
	}
	key := p.Masked().String()
	n.mu.Lock()
	rt, ok := n.routes[key]
	delete(n.routes, key)
	if ok {
		n.leaving[key] = rt
	}
	n.mu.Unlock()
	klog.InfoS("Route deleted", "node", r.TargetNode, "podCIDR", r.DestinationCIDR)
	// Withdrawn once it has lingered, unless created again meanwhile.
	time.AfterFunc(routeLinger, func() {
		n.mu.Lock()
		if n.leaving[key] == rt {
			delete(n.leaving, key)
		}
		n.mu.Unlock()
		n.announce()
	})
	return nil
}

// routeLinger is how long a deleted route stays announced. The route
// controller replaces a route whose Node's addresses changed by deleting
// it and creating it at once; the router must not see the pod CIDR
// withdrawn and announced again in between.
const routeLinger = time.Second

// newRoute is a Node's pod CIDR, with the next hop it has now. Callers hold
// n.mu.
func (n *network) newRoute(node, cidr string, addresses []v1.NodeAddress) (*route, netip.Addr, error) {
	if n.cfg.Routes == nil {
		return nil, netip.Addr{}, fmt.Errorf("route %s to Node %s: routes are off in the cloud config (no routes section)", cidr, node)
	}
	p, err := netip.ParsePrefix(cidr)
	if err != nil {
		return nil, netip.Addr{}, fmt.Errorf("route to Node %s: %q is not a CIDR", node, cidr)
	}
	if len(addresses) == 0 {
		if nd, err := n.nodes.Get(node); err == nil {
			addresses = nd.Status.Addresses
		}
	}
	rt := &route{node: node, cidr: p.Masked(), addresses: addresses}
	hop, err := n.routeNextHop(rt)
	if err != nil {
		return nil, netip.Addr{}, err
	}
	return rt, hop, nil
}

// routeNextHop is where a route sends its pod CIDR now: the address of
// routes.nextHopAddressType and the CIDR's family among the Node's
// cloudAddresses. Callers hold n.mu.
func (n *network) routeNextHop(r *route) (netip.Addr, error) {
	node, err := n.nodes.Get(r.node)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("route %s to Node %s: %w", r.cidr, r.node, err)
	}
	addresses, _, err := n.cloudAddresses(node)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("route %s to Node %s: %w; it is routed once the cloud knows the Node", r.cidr, r.node, err)
	}
	want := v1.NodeAddressType(n.cfg.Routes.NextHopAddressType)
	for _, a := range addresses {
		if ip, err := netip.ParseAddr(a.Address); err == nil && a.Type == want && ip.Is4() == r.cidr.Addr().Is4() {
			return ip.Unmap(), nil
		}
	}
	return netip.Addr{}, fmt.Errorf("route %s to Node %s: the Node has no %s of that family (routes.nextHopAddressType)", r.cidr, r.node, want)
}

// derivedRoutes are the routes of the Nodes' pod CIDRs, so that a new
// leader announces them before its sessions come up, and the route
// controller finds them in place. Callers hold n.mu.
func (n *network) derivedRoutes() map[string]*route {
	routes := map[string]*route{}
	if n.cfg.Routes == nil {
		return routes
	}
	nodes, err := n.nodes.List(labels.Everything())
	if err != nil {
		klog.ErrorS(err, "Listing Nodes to derive routes")
		return n.routes
	}
	for _, node := range nodes {
		for _, cidr := range node.Spec.PodCIDRs {
			if rt, _, err := n.newRoute(node.Name, cidr, node.Status.Addresses); err == nil {
				routes[rt.cidr.String()] = rt
			}
		}
	}
	return routes
}

// routePaths are the BGP paths of the routes. Callers hold n.mu.
func (n *network) routePaths() []bgp.Announcement {
	if n.cfg.Routes == nil {
		return nil
	}
	attrs := attributesOf(n.cfg.Routes.BGP)
	paths := make([]bgp.Announcement, 0, len(n.routes)+len(n.leaving))
	add := func(r *route) {
		if hop, err := n.routeNextHop(r); err == nil {
			paths = append(paths, bgp.Announcement{Prefix: r.cidr, NextHops: []netip.Addr{hop}, Attributes: attrs})
		}
	}
	for _, r := range n.routes {
		add(r)
	}
	for key, r := range n.leaving {
		if _, back := n.routes[key]; !back {
			add(r)
		}
	}
	return paths
}
