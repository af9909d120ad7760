package provider

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/labels"
	cloudapi "k8s.io/cloud-provider/api"
	"k8s.io/klog/v2"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/config"
	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/inventory"
)

// Which Nodes may carry a VIP's or a pod CIDR's traffic, and at which
// addresses: those a cloud load balancer would send to.

// nodeRouting is what of a Node matters to its next hops and its routes.
func nodeRouting(node *v1.Node) string {
	return fmt.Sprint(nodeReady(node), node.Status.Addresses, nodeEligible(node), initialised(node), node.Spec.ProviderID, node.Spec.PodCIDRs)
}

// eligibleNode is a Node that may be a next hop, with its addresses and
// the hardware addresses its machine lists (for layer 2 pools).
type eligibleNode struct {
	name    string
	machine string // its inventory machine, "" if unlisted
	ips     []netip.Addr
	macs    []net.HardwareAddr
}

// readyNodes is every Ready Node that may be a next hop. Callers hold n.mu.
func (n *network) readyNodes() []eligibleNode {
	all, _ := n.nodes.List(labels.Everything())
	var out []eligibleNode
	names := make(map[string]bool, len(all))
	for _, node := range all {
		names[node.Name] = true
		if !nodeEligible(node) || !nodeReady(node) {
			continue
		}
		addrs, m, err := n.cloudAddresses(node)
		if err != nil {
			continue
		}
		e := eligibleNode{name: node.Name, ips: nodeIPs(addrs)}
		if m != nil {
			e.machine, e.macs = m.Name, machineMACs(m)
		}
		out = append(out, e)
	}
	n.pinned.keep(names)
	return out
}

// listed is every Node, once the informers have listed them; ok is false
// before.
func (n *network) listed() ([]*v1.Node, bool) {
	select {
	case <-n.informed:
	default:
		return nil, false
	}
	for _, synced := range n.synced {
		if !synced() {
			return nil, false
		}
	}
	all, err := n.nodes.List(labels.Everything())
	return all, err == nil
}

// listedNodes are the keys of every Node, once the informers have listed
// them; ok is false before.
func (n *network) listedNodes() ([]inventory.NodeKeys, bool) {
	all, ok := n.listed()
	keys := make([]inventory.NodeKeys, 0, len(all))
	for _, node := range all {
		keys = append(keys, nodeKeys(node))
	}
	return keys, ok
}

// nodeOfMachine names another Node than name that the cloud initialised as
// machine m (it has m's provider ID), or "".
func (n *network) nodeOfMachine(m *config.Machine, name string) string {
	all, _ := n.listed()
	id := m.EffectiveProviderID()
	for _, node := range all {
		if node.Name != name && node.Spec.ProviderID == id {
			return node.Name
		}
	}
	return ""
}

// cloudAddresses are the addresses of a Node that the cloud stands behind:
// its machine's inventory addresses, or, for a machine that lists none and
// for an allowed unlisted Node, those it was initialised with (pinned: a
// later rewrite of its status is not followed). A Node the cloud has not
// initialised, or whose machine left the inventory, has none: a cloud load
// balancer sends nothing to an instance it does not know, so it is no next
// hop and no route target. Addresses no traffic may go to (loopback,
// link-local, multicast, unspecified) are left out, with an Event on the
// Node. m is the Node's machine, nil for an allowed unlisted Node. Callers
// hold n.mu.
func (n *network) cloudAddresses(node *v1.Node) (_ []v1.NodeAddress, m *config.Machine, _ error) {
	if !initialised(node) {
		return nil, nil, fmt.Errorf("the Node is not initialised by the cloud yet (it has the taint %s)", cloudapi.TaintExternalCloudProvider)
	}
	m, ok := n.inv.FindMachine(nodeKeys(node)) // nil when unlisted
	var addrs []v1.NodeAddress
	switch {
	case ok && len(m.Addresses) > 0:
		addrs = machineAddresses(m)
	case ok || n.inv.UnlistedNodes() == config.UnlistedAllow:
		pinned, err := n.pinned.of(node)
		if err != nil {
			n.reportNodeAddresses(node.Name, "NodeAddressesChanged", err.Error())
			return nil, nil, err
		}
		addrs = pinned
	default:
		return nil, nil, errors.New("the Node matches no machine of inventory.machines")
	}
	usable, dropped := usableAddresses(addrs)
	if len(dropped) > 0 {
		n.reportNodeAddresses(node.Name, "NodeAddressNotUsable", fmt.Sprintf("the Node's addresses %v are loopback, link-local, multicast or unspecified: no load-balancer or route traffic and no health check goes to them", dropped))
	} else {
		n.reportNodeAddresses(node.Name, "", "")
	}
	return usable, m, nil
}

// reportNodeAddresses tells a Node, once for as long as it stays so, what
// is wrong with its addresses; an empty reason clears it. Callers hold
// n.mu.
func (n *network) reportNodeAddresses(node, reason, msg string) {
	if !n.pinned.sayOnce(node, msg) {
		return
	}
	klog.ErrorS(nil, "Node addresses not used", "node", node, "reason", reason, "detail", msg)
	n.eventf(nodeRef(node), v1.EventTypeWarning, reason, "%s", msg)
}

// machineMACs are the hardware addresses the inventory lists for a
// machine.
func machineMACs(m *config.Machine) []net.HardwareAddr {
	var out []net.HardwareAddr
	for _, s := range m.MACAddresses {
		if hw, err := net.ParseMAC(s); err == nil {
			out = append(out, hw)
		}
	}
	return out
}

// nextHops is the addresses of the ready nodes that serve s: all of them
// (also for s nil), or with externalTrafficPolicy Local those with a ready
// endpoint of it, sorted.
func (n *network) nextHops(s *lbService, ready []eligibleNode) []netip.Addr {
	var hops []netip.Addr
	for _, node := range n.carriers(s, ready) {
		hops = append(hops, node.ips...)
	}
	slices.SortFunc(hops, netip.Addr.Compare)
	return slices.Compact(hops)
}

// carriers are the ready nodes that serve s: all of them, or with
// externalTrafficPolicy Local those with a ready endpoint of it.
func (n *network) carriers(s *lbService, ready []eligibleNode) []eligibleNode {
	if s == nil || !s.etpLocal {
		return ready
	}
	local := n.nodesWithReadyEndpoints(s.namespace, s.name)
	var out []eligibleNode
	for _, node := range ready {
		if local[node.name] {
			out = append(out, node)
		}
	}
	return out
}

func (n *network) nodesWithReadyEndpoints(namespace, name string) map[string]bool {
	out := map[string]bool{}
	sel := labels.SelectorFromSet(labels.Set{discoveryv1.LabelServiceName: name})
	list, _ := n.slices.EndpointSlices(namespace).List(sel)
	for _, sl := range list {
		for _, ep := range sl.Endpoints {
			if ep.NodeName != nil && (ep.Conditions.Ready == nil || *ep.Conditions.Ready) {
				out[*ep.NodeName] = true
			}
		}
	}
	return out
}

// nodeEligible is the service controller's stable-node-set predicate: not
// being deleted, not labelled out of load balancers, not tainted for
// deletion by the cluster autoscaler.
func nodeEligible(node *v1.Node) bool {
	if !node.DeletionTimestamp.IsZero() {
		return false
	}
	if v, ok := node.Labels[v1.LabelNodeExcludeBalancers]; ok {
		if excluded, err := strconv.ParseBool(v); err != nil || excluded {
			return false
		}
	}
	return !slices.ContainsFunc(node.Spec.Taints, func(t v1.Taint) bool { return t.Key == "ToBeDeletedByClusterAutoscaler" })
}

func nodeReady(node *v1.Node) bool {
	for _, c := range node.Status.Conditions {
		if c.Type == v1.NodeReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}

// nodeIPs are the next-hop addresses of a node: its InternalIPs, one per
// family, or else its ExternalIPs.
func nodeIPs(addresses []v1.NodeAddress) []netip.Addr {
	pick := func(t v1.NodeAddressType) []netip.Addr {
		var out []netip.Addr
		seen := map[bool]bool{}
		for _, a := range addresses {
			if a.Type != t {
				continue
			}
			if ip, err := netip.ParseAddr(a.Address); err == nil && !seen[ip.Is4()] {
				seen[ip.Is4()] = true
				out = append(out, ip.Unmap())
			}
		}
		return out
	}
	if ips := pick(v1.NodeInternalIP); len(ips) > 0 {
		return ips
	}
	return pick(v1.NodeExternalIP)
}

// initialised is whether the cloud node controller has initialised the
// Node: it takes the uninitialized taint off once it has.
func initialised(node *v1.Node) bool {
	return !slices.ContainsFunc(node.Spec.Taints, func(t v1.Taint) bool { return t.Key == cloudapi.TaintExternalCloudProvider })
}
