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

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/desired"
)

var _ cloudprovider.Routes = &Cloud{}

// route is a pod CIDR announced with its Node's address as next hop.
type route struct {
	desired.Route
	addresses []v1.NodeAddress // the Node's addresses when it was created
}

// routeTable is the routes the route controller created, by pod CIDR, and
// those it deleted a moment ago, still announced (routeLinger).
type routeTable struct {
	routes  map[string]*route
	leaving map[string]*route
}

func newRouteTable() routeTable {
	return routeTable{routes: map[string]*route{}, leaving: map[string]*route{}}
}

// table is every route to announce.
func (t routeTable) table() []desired.Route {
	out := make([]desired.Route, 0, len(t.routes)+len(t.leaving))
	for _, r := range t.routes {
		out = append(out, r.Route)
	}
	for key, r := range t.leaving {
		if _, back := t.routes[key]; !back {
			out = append(out, r.Route)
		}
	}
	return out
}

// Routes implements cloudprovider.Interface; it reports support only when
// the cloud config has a routes section.
func (c *Cloud) Routes() (cloudprovider.Routes, bool) {
	c.lb.mu.Lock()
	defer c.lb.mu.Unlock()
	return c, c.lb.cfg.Routes != nil
}

// ListRoutes returns the routes announced for this cluster: those whose
// Node the cloud still knows. The route controller creates the others
// again, and its CreateRoute error keeps the Node's NetworkUnavailable
// condition true while the route is not announced.
func (c *Cloud) ListRoutes(ctx context.Context, _ string) ([]*cloudprovider.Route, error) {
	b := c.lb
	if err := b.waitReady(ctx); err != nil {
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []*cloudprovider.Route
	for _, r := range b.routes.routes {
		if _, err := b.routeNextHop(r.Route); err != nil {
			continue
		}
		out = append(out, &cloudprovider.Route{
			Name: r.Node + "/" + r.CIDR.String(), TargetNode: types.NodeName(r.Node), DestinationCIDR: r.CIDR.String(),
			EnableNodeAddresses: true, TargetNodeAddresses: r.addresses,
		})
	}
	slices.SortFunc(out, func(a, b *cloudprovider.Route) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// CreateRoute announces the route's pod CIDR via its Node.
func (c *Cloud) CreateRoute(ctx context.Context, _ string, _ string, r *cloudprovider.Route) error {
	b := c.lb
	if err := b.waitReady(ctx); err != nil {
		return err
	}
	b.mu.Lock()
	rt, nextHop, err := b.newRoute(string(r.TargetNode), r.DestinationCIDR, r.TargetNodeAddresses)
	if err == nil {
		b.routes.routes[rt.CIDR.String()] = rt
		delete(b.routes.leaving, rt.CIDR.String())
	}
	b.mu.Unlock()
	if err != nil {
		return err
	}
	klog.InfoS("Route created", "node", rt.Node, "podCIDR", rt.CIDR, "nextHop", nextHop)
	b.announce()
	return nil
}

// DeleteRoute withdraws the route.
func (c *Cloud) DeleteRoute(ctx context.Context, _ string, r *cloudprovider.Route) error {
	b := c.lb
	if err := b.waitReady(ctx); err != nil {
		return err
	}
	p, err := netip.ParsePrefix(r.DestinationCIDR)
	if err != nil {
		return nil
	}
	key := p.Masked().String()
	b.mu.Lock()
	rt, ok := b.routes.routes[key]
	delete(b.routes.routes, key)
	if ok {
		b.routes.leaving[key] = rt
	}
	b.mu.Unlock()
	klog.InfoS("Route deleted", "node", r.TargetNode, "podCIDR", r.DestinationCIDR)
	// Withdrawn once it has lingered, unless created again meanwhile.
	time.AfterFunc(routeLinger, func() {
		b.mu.Lock()
		if b.routes.leaving[key] == rt {
			delete(b.routes.leaving, key)
		}
		b.mu.Unlock()
		b.announce()
	})
	return nil
}

// routeLinger is how long a deleted route stays announced. The route
// controller replaces a route whose Node's addresses changed by deleting
// it and creating it at once; the router must not see the pod CIDR
// withdrawn and announced again in between.
const routeLinger = time.Second

// newRoute is a Node's pod CIDR, with the next hop it has now. Callers hold
// b.mu.
func (b *balancer) newRoute(node, cidr string, addresses []v1.NodeAddress) (*route, netip.Addr, error) {
	if b.cfg.Routes == nil {
		return nil, netip.Addr{}, fmt.Errorf("route %s to Node %s: routes are off in the cloud config (no routes section)", cidr, node)
	}
	p, err := netip.ParsePrefix(cidr)
	if err != nil {
		return nil, netip.Addr{}, fmt.Errorf("route to Node %s: %q is not a CIDR", node, cidr)
	}
	if len(addresses) == 0 {
		if nd, err := b.cluster.nodes.Get(node); err == nil {
			addresses = nd.Status.Addresses
		}
	}
	rt := &route{Route: desired.Route{Node: node, CIDR: p.Masked()}, addresses: addresses}
	hop, err := b.routeNextHop(rt.Route)
	if err != nil {
		return nil, netip.Addr{}, err
	}
	return rt, hop, nil
}

// routeNextHop is where a route sends its pod CIDR now. Callers hold b.mu.
func (b *balancer) routeNextHop(r desired.Route) (netip.Addr, error) {
	return desired.RouteNextHop(b.cfg.Routes, r, b.judgedNode(r.Node))
}

// derive sets the routes to the Nodes' pod CIDRs, so that a new leader
// announces them before its sessions come up, and the route controller
// finds them in place. Callers hold b.mu.
func (b *balancer) deriveRoutes() {
	routes := map[string]*route{}
	if b.cfg.Routes != nil {
		nodes, err := b.cluster.nodes.List(labels.Everything())
		if err != nil {
			klog.ErrorS(err, "Listing Nodes to derive routes")
			return
		}
		for _, node := range nodes {
			for _, cidr := range node.Spec.PodCIDRs {
				if rt, _, err := b.newRoute(node.Name, cidr, node.Status.Addresses); err == nil {
					routes[rt.CIDR.String()] = rt
				}
			}
		}
	}
	b.routes.routes = routes
}
