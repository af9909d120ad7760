package provider

import (
	"slices"

	v1 "k8s.io/api/core/v1"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/desired"
)

// A node credential (the kubelet's, or anyone who holds it) can rewrite
// its Node's status.addresses at any time. For a machine the inventory
// gives addresses, those are used and status is ignored. For one that
// lists none, and for an allowed unlisted Node, the addresses are what the
// Node was initialised with: pinned the first time this replica sees the
// Node initialised (desired.Judge compares). A kubelet run with
// --cloud-provider=external never changes them after that, so a change is
// not followed: the Node carries nothing until the inventory lists its
// addresses (or the CCM restarts and pins what it finds).

// pinnedAddresses are the addresses each Node was first seen initialised
// with, by name.
type pinnedAddresses struct {
	pins map[string]desired.Pin
}

func newPinnedAddresses() pinnedAddresses {
	return pinnedAddresses{pins: map[string]desired.Pin{}}
}

// pin records the addresses of the initialised Nodes looked at for the
// first time (or a new Node of a known name): as next hops, those that are
// Ready and eligible (a kubelet registers its Node NotReady and may report
// its addresses only then), and any route target. A Node that does not
// pass looked is not pinned.
func (p pinnedAddresses) pin(nodes []*v1.Node, looked func(*v1.Node) bool) {
	for _, node := range nodes {
		if had, ok := p.pins[node.Name]; (!ok || had.UID != node.UID) && desired.Initialised(node) && (looked == nil || looked(node)) {
			p.pins[node.Name] = desired.Pin{UID: node.UID, Addrs: slices.Clone(node.Status.Addresses)}
		}
	}
}

// keep forgets the Nodes not in nodes: the record would only grow.
func (p pinnedAddresses) keep(nodes []*v1.Node) {
	names := make(map[string]bool, len(nodes))
	for _, n := range nodes {
		names[n.Name] = true
	}
	for name := range p.pins {
		if !names[name] {
			delete(p.pins, name)
		}
	}
}
