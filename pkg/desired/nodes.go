package desired

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	cloudapi "k8s.io/cloud-provider/api"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/config"
	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/inventory"
	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/report"
)

// Which Nodes may carry a VIP's or a pod CIDR's traffic, and at which
// addresses: those a cloud load balancer would send to.

// Node is a Node as the cloud sees it.
type Node struct {
	Name    string
	Machine string // its inventory machine, "" if unlisted
	// Carries is set for a Node that may be a load-balancer next hop:
	// Ready, not excluded from load balancers, initialised, with addresses
	// the cloud stands behind.
	Carries bool
	// Addresses are the addresses the cloud stands behind (see Judge); nil
	// with Err saying why.
	Addresses []v1.NodeAddress
	Err       error
	IPs       []netip.Addr // next-hop addresses: InternalIPs (or ExternalIPs), one per family
	MACs      []net.HardwareAddr
	// Labels are its machine's inventory labels with its zone and region
	// (the defaults' for an unlisted Node): what a router's nodeSelector
	// matches. Never the Node's own labels, which its kubelet may write.
	Labels map[string]string
}

// Pin is the addresses a Node (by UID) was first seen initialised with.
type Pin struct {
	UID   types.UID
	Addrs []v1.NodeAddress
}

// Nodes is every Node judged, by name, with the problems found.
type Nodes struct {
	ByName map[string]*Node
	// Carriers are the Nodes that may be next hops, sorted by name.
	Carriers []*Node
	Problems []report.Problem
}

// Judge is what the cloud makes of each Node. The addresses it stands
// behind are its machine's inventory addresses or, for a machine that
// lists none and for an allowed unlisted Node, those it was initialised
// with (pins; a later rewrite of its status is not followed). A Node the
// cloud has not initialised, or whose machine left the inventory, has
// none: a cloud load balancer sends nothing to an instance it does not
// know, so it is no next hop and no route target. Addresses no traffic may
// go to (loopback, link-local, multicast, unspecified) are left out, with
// a problem on the Node.
func Judge(nodes []*v1.Node, inv *inventory.Inventory, pins map[string]Pin) Nodes {
	out := Nodes{ByName: make(map[string]*Node, len(nodes))}
	for _, node := range nodes {
		j, problem := judge(node, inv, pins)
		out.ByName[node.Name] = j
		if j.Carries {
			out.Carriers = append(out.Carriers, j)
		}
		if problem != nil {
			out.Problems = append(out.Problems, *problem)
		}
	}
	slices.SortFunc(out.Carriers, func(a, b *Node) int { return strings.Compare(a.Name, b.Name) })
	return out
}

func judge(node *v1.Node, inv *inventory.Inventory, pins map[string]Pin) (*Node, *report.Problem) {
	j := &Node{Name: node.Name}
	if !Initialised(node) {
		j.Err = fmt.Errorf("the Node is not initialised by the cloud yet (it has the taint %s)", cloudapi.TaintExternalCloudProvider)
		return j, nil
	}
	m, ok := inv.FindMachine(NodeKeys(node)) // nil when unlisted
	var addrs []v1.NodeAddress
	switch {
	case ok && len(m.Addresses) > 0:
		addrs = MachineAddresses(m)
	case ok || inv.UnlistedNodes() == config.UnlistedAllow:
		pinned, err := pinnedOf(node, pins)
		if err != nil {
			j.Err = err
			return j, &report.Problem{Reason: "NodeAddressesChanged", Object: report.Node(node.Name),
				Log: "Node addresses not used", LogValues: []any{"reason", "NodeAddressesChanged", "detail", err.Error()}, Message: err.Error()}
		}
		addrs = pinned
	default:
		j.Err = errors.New("the Node matches no machine of inventory.machines")
		return j, nil
	}
	if m != nil {
		j.Machine, j.MACs = m.Name, machineMACs(m)
		j.Labels = m.SelectorLabels()
	} else {
		d := inv.Defaults()
		j.Labels = config.SelectorLabels(nil, d.Zone, d.Region)
	}
	for k, v := range node.Labels {
		if _, mine := j.Labels[k]; !mine && inv.ReadsNodeLabel(k) {
			j.Labels[k] = v
		}
	}
	usable, dropped := usableAddresses(addrs)
	j.Addresses, j.IPs = usable, nodeIPs(usable)
	j.Carries = Eligible(node) && Ready(node)
	if len(dropped) == 0 {
		return j, nil
	}
	msg := fmt.Sprintf("the Node's addresses %v are loopback, link-local, multicast or unspecified: no load-balancer or route traffic and no health check goes to them", dropped)
	return j, &report.Problem{Reason: "NodeAddressNotUsable", Object: report.Node(node.Name),
		Log: "Node addresses not used", LogValues: []any{"reason", "NodeAddressNotUsable", "detail", msg}, Message: msg}
}

// pinnedOf is the addresses node was initialised with; an error once they
// changed. A Node not pinned yet (or another Node of the same name) is
// taken as it is.
func pinnedOf(node *v1.Node, pins map[string]Pin) ([]v1.NodeAddress, error) {
	had, ok := pins[node.Name]
	if !ok || had.UID != node.UID {
		return node.Status.Addresses, nil
	}
	if !slices.Equal(had.Addrs, node.Status.Addresses) {
		return nil, fmt.Errorf("the Node's status.addresses changed after it was initialised, from %v to %v, and its machine lists no addresses in inventory.machines; "+
			"it carries no load-balancer or route traffic until they are listed there", addressList(had.Addrs), addressList(node.Status.Addresses))
	}
	return had.Addrs, nil
}

func addressList(addrs []v1.NodeAddress) []string {
	out := make([]string, 0, len(addrs))
	for _, a := range addrs {
		out = append(out, string(a.Type)+"="+a.Address)
	}
	return out
}

// NodeKeys are what the inventory finds a Node's machine by.
func NodeKeys(node *v1.Node) inventory.NodeKeys {
	k := inventory.NodeKeys{ProviderID: node.Spec.ProviderID, Name: node.Name}
	for _, a := range node.Status.Addresses {
		k.Addresses = append(k.Addresses, a.Address)
	}
	return k
}

// MachineAddresses are a machine's inventory addresses as Node addresses.
func MachineAddresses(m *config.Machine) []v1.NodeAddress {
	var out []v1.NodeAddress
	for _, a := range m.Addresses {
		out = append(out, v1.NodeAddress{Type: v1.NodeAddressType(a.Type), Address: a.Address})
	}
	return out
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

// UsableNextHop is whether traffic may be sent to ip: never to this host
// (loopback), to an address valid only on one link, to a group, or to
// nowhere. A node credential must not make the CCM send VIP traffic, or
// its probes, to the control plane's own host or a link-local service.
func UsableNextHop(ip netip.Addr) bool {
	return ip.IsValid() && !ip.IsLoopback() && !ip.IsLinkLocalUnicast() && !ip.IsMulticast() &&
		!ip.IsUnspecified() && ip != netip.AddrFrom4([4]byte{255, 255, 255, 255})
}

// usableAddresses drops the IP addresses that are no usable next hop, and
// names them.
func usableAddresses(addrs []v1.NodeAddress) (out []v1.NodeAddress, dropped []string) {
	for _, a := range addrs {
		if a.Type == v1.NodeInternalIP || a.Type == v1.NodeExternalIP {
			if ip, err := netip.ParseAddr(a.Address); err == nil && !UsableNextHop(ip.Unmap()) {
				dropped = append(dropped, a.Address)
				continue
			}
		}
		out = append(out, a)
	}
	return out, dropped
}

// Eligible is the service controller's stable-node-set predicate: not
// being deleted, not labelled out of load balancers, not tainted for
// deletion by the cluster autoscaler.
func Eligible(node *v1.Node) bool {
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

// Ready is the Node's Ready condition.
func Ready(node *v1.Node) bool {
	ready, _ := Readiness(node)
	return ready
}

// Readiness is whether the Node is Ready, and when that last changed
// (zero without a Ready condition).
func Readiness(node *v1.Node) (bool, time.Time) {
	for _, c := range node.Status.Conditions {
		if c.Type == v1.NodeReady {
			return c.Status == v1.ConditionTrue, c.LastTransitionTime.Time
		}
	}
	return false, time.Time{}
}

// Initialised is whether the cloud node controller has initialised the
// Node: it takes the uninitialized taint off once it has.
func Initialised(node *v1.Node) bool {
	return !slices.ContainsFunc(node.Spec.Taints, func(t v1.Taint) bool { return t.Key == cloudapi.TaintExternalCloudProvider })
}

// Routing is what of a Node matters to its next hops and its routes: a
// change of it is worth a convergence.
func Routing(node *v1.Node) string {
	// Labels too: peers' nodeSelectors may read some (inventory.nodeLabels).
	return fmt.Sprint(Ready(node), node.Status.Addresses, Eligible(node), Initialised(node), node.Spec.ProviderID, node.Spec.PodCIDRs, node.Labels)
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

// HasFamily is whether one of ips is IPv4 (v4) or IPv6.
func HasFamily(ips []netip.Addr, v4 bool) bool {
	return slices.ContainsFunc(ips, func(ip netip.Addr) bool { return ip.Is4() == v4 })
}
