package provider

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// A node credential (the kubelet's, or anyone who holds it) can rewrite
// its Node's status.addresses at any time. For a machine the inventory
// gives addresses, those are used and status is ignored. For one that
// lists none, and for an allowed unlisted Node, the addresses are what the
// Node was initialised with: pinned the first time this replica sees the
// Node initialised. A kubelet run with --cloud-provider=external never
// changes them after that, so a change is not followed: the Node carries
// nothing until the inventory lists its addresses (or the CCM restarts and
// pins what it finds).

// pinnedAddresses are the addresses each Node was first seen initialised
// with, and what was last said of each Node's addresses.
type pinnedAddresses struct {
	pins map[string]pin
	said map[string]string
}

type pin struct {
	uid   types.UID
	addrs []v1.NodeAddress
}

func newPinnedAddresses() pinnedAddresses {
	return pinnedAddresses{pins: map[string]pin{}, said: map[string]string{}}
}

// of returns the addresses node was initialised with, pinning them now if
// this is the first look; an error once they changed.
func (p pinnedAddresses) of(node *v1.Node) ([]v1.NodeAddress, error) {
	had, ok := p.pins[node.Name]
	if !ok || had.uid != node.UID {
		p.pins[node.Name] = pin{uid: node.UID, addrs: slices.Clone(node.Status.Addresses)}
		return node.Status.Addresses, nil
	}
	if !slices.Equal(had.addrs, node.Status.Addresses) {
		return nil, fmt.Errorf("the Node's status.addresses changed after it was initialised, from %v to %v, and its machine lists no addresses in inventory.machines; "+
			"it carries no load-balancer or route traffic until they are listed there", addressList(had.addrs), addressList(node.Status.Addresses))
	}
	return had.addrs, nil
}

// keep forgets the Nodes not in names.
func (p pinnedAddresses) keep(names map[string]bool) {
	maps.DeleteFunc(p.pins, func(name string, _ pin) bool { return !names[name] })
	maps.DeleteFunc(p.said, func(name string, _ string) bool { return !names[name] })
}

// sayOnce reports whether msg is new for the Node, and records it; ""
// clears what was said.
func (p pinnedAddresses) sayOnce(node, msg string) bool {
	if p.said[node] == msg {
		return false
	}
	if msg == "" {
		delete(p.said, node)
	} else {
		p.said[node] = msg
	}
	return msg != ""
}

func addressList(addrs []v1.NodeAddress) []string {
	out := make([]string, 0, len(addrs))
	for _, a := range addrs {
		out = append(out, string(a.Type)+"="+a.Address)
	}
	return out
}

// usableNextHop is whether traffic may be sent to ip: never to this host
// (loopback), to an address valid only on one link, to a group, or to
// nowhere. A node credential must not make the CCM send VIP traffic, or
// its probes, to the control plane's own host or a link-local service.
func usableNextHop(ip netip.Addr) bool {
	return ip.IsValid() && !ip.IsLoopback() && !ip.IsLinkLocalUnicast() && !ip.IsMulticast() &&
		!ip.IsUnspecified() && ip != netip.AddrFrom4([4]byte{255, 255, 255, 255})
}

// usableAddresses drops the IP addresses that are no usable next hop, and
// names them.
func usableAddresses(addrs []v1.NodeAddress) (out []v1.NodeAddress, dropped []string) {
	for _, a := range addrs {
		if a.Type == v1.NodeInternalIP || a.Type == v1.NodeExternalIP {
			if ip, err := netip.ParseAddr(a.Address); err == nil && !usableNextHop(ip.Unmap()) {
				dropped = append(dropped, a.Address)
				continue
			}
		}
		out = append(out, a)
	}
	return out, dropped
}
