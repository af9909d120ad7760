// Package rendezvous chooses, for an address, some of a set of nodes by
// rendezvous (highest random weight) hashing: every replica that sees the
// same nodes chooses the same ones, addresses spread evenly over the
// nodes, and when a node comes or goes only the addresses whose choice it
// is in change.
package rendezvous

import (
	"net/netip"
	"slices"
)

const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

// Hasher scores nodes for one address.
type Hasher struct{ seed uint64 }

// For is the hasher of addr.
func For(addr netip.Addr) Hasher {
	h := uint64(fnvOffset)
	b := addr.As16()
	for _, c := range b {
		h = (h ^ uint64(c)) * fnvPrime
	}
	return Hasher{seed: h * fnvPrime} // and a zero byte, between address and name
}

// Score is node's weight for the address: FNV-1a of the address's 16
// bytes, a zero and the name, finished with splitmix64's mixer (FNV's low
// bits mix poorly for names that differ only at the end).
func (h Hasher) Score(node string) uint64 {
	x := h.seed
	for i := 0; i < len(node); i++ {
		x = (x ^ uint64(node[i])) * fnvPrime
	}
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// Top is the indexes in nodes of the n nodes with the highest weights for
// addr, highest first (all of them, so ranked, when there are no more than
// n). Equal weights go to the lesser name.
func Top(addr netip.Addr, nodes []string, n int) []int {
	h := For(addr)
	type scored struct {
		i     int
		score uint64
	}
	better := func(a, b scored) bool {
		return a.score > b.score || (a.score == b.score && nodes[a.i] < nodes[b.i])
	}
	// The best n so far, best first: n is small next to the nodes.
	best := make([]scored, 0, min(n, len(nodes)))
	for i, node := range nodes {
		s := scored{i, h.Score(node)}
		if len(best) == n && !better(s, best[n-1]) {
			continue
		}
		at, _ := slices.BinarySearchFunc(best, s, func(a, b scored) int {
			if better(a, b) {
				return -1
			}
			return 1
		})
		if len(best) == n {
			best = best[:n-1]
		}
		best = slices.Insert(best, at, s)
	}
	out := make([]int, len(best))
	for i, s := range best {
		out[i] = s.i
	}
	return out
}
