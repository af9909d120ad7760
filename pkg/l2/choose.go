// Package l2 announces VIPs on an Ethernet segment without an agent on the
// nodes: every replica answers ARP requests (IPv4) and Neighbor Solicitations
// (IPv6) for each VIP with the hardware address of the node chosen to carry
// it, and tells the segment by gratuitous ARP and unsolicited Neighbor
// Advertisements when that node changes. Clients then send the VIP's frames
// straight to the node, where kube-proxy takes any packet for a
// load-balancer IP.
//
// It knows nothing of Kubernetes: the provider gives it a table of VIP to
// hardware address.
package l2

import (
	"net/netip"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/rendezvous"
)

// Choose picks the node that carries vip among nodes, by rendezvous
// hashing: the choice is the same on every replica and at every start, and
// it is the first of the nodes a BGP router is sent for the VIP. "" when
// there is none.
func Choose(vip netip.Addr, nodes []string) string {
	if top := rendezvous.Top(vip, nodes, 1); len(top) == 1 {
		return nodes[top[0]]
	}
	return ""
}
