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
	"hash/fnv"
	"net/netip"
)

// Choose picks the node that carries vip among nodes, by rendezvous
// (highest random weight) hashing: the choice is the same on every replica
// and at every start, VIPs spread evenly over the nodes, and when a node
// goes or comes only the VIPs it wins or loses move. "" when there is none.
func Choose(vip netip.Addr, nodes []string) string {
	best, bestScore := "", uint64(0)
	for _, node := range nodes {
		if s := score(vip, node); best == "" || s > bestScore || (s == bestScore && node < best) {
			best, bestScore = node, s
		}
	}
	return best
}

func score(vip netip.Addr, node string) uint64 {
	h := fnv.New64a()
	b := vip.As16()
	h.Write(b[:])
	h.Write([]byte{0})
	h.Write([]byte(node))
	// FNV's low bits mix poorly for inputs that differ only at the end;
	// finish with a 64-bit mixer (splitmix64's) so weights are uniform.
	x := h.Sum64()
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}
