package desired

import (
	"math"
	"net/netip"
	"slices"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/config"
	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/rendezvous"
)

// Rendezvous hashing spreads a router's paths evenly only on average: with
// every VIP choosing its nodes on its own, node loads follow a binomial
// law, and the busiest node carries about twice the least busy one's
// share at any size. A selection with maximumLoad bounds the load instead
// (consistent hashing with bounded loads, Mirrokni, Thorup and
// Zadimoghaddam): VIPs choose in address order, each its maximumPaths
// best-ranked nodes that are below the bound, where the bound is the
// maximumLoad multiple of the mean paths per node. The choice is made
// from the objects alone, in an order every replica shares, so replicas
// agree. Its price: a node's death, or a VIP more or less, changes other
// VIPs' choices too, a small share of them (docs/concepts.md).

// boundedChoices are, for each VIP of sel that has more candidates than
// its maximumPaths, the nodes it is sent via.
func (s *State) boundedChoices(sel config.PathSelection, matches func(*Node) bool) map[netip.Addr][]*Node {
	type choice struct {
		vip   netip.Addr
		nodes []*Node
	}
	// Each family's routes are a table of their own at the router: its
	// paths are balanced among themselves.
	byFamily := map[bool][]choice{}
	for i := range s.VIPs {
		v := &s.VIPs[i]
		if v.Announce != config.AnnounceBGP {
			continue
		}
		if _, sent := sel.Announces(v.Pool); !sent {
			continue
		}
		nodes := v.Carriers
		if matches != nil {
			nodes = slices.DeleteFunc(slices.Clone(nodes), func(n *Node) bool { return !matches(n) })
		}
		if len(nodes) > 0 {
			byFamily[v.Addr.Is4()] = append(byFamily[v.Addr.Is4()], choice{v.Addr, nodes})
		}
	}
	out := map[netip.Addr][]*Node{}
	for _, all := range byFamily {
		total, seen := 0, map[*Node]bool{}
		for _, c := range all {
			total += min(len(c.nodes), sel.MaximumPaths)
			for _, n := range c.nodes {
				seen[n] = true
			}
		}
		bound := int(math.Ceil(sel.MaximumLoad * float64(total) / float64(len(seen))))
		slices.SortFunc(all, func(a, b choice) int { return a.vip.Compare(b.vip) })
		load := map[*Node]int{}
		for _, c := range all {
			k := sel.MaximumPaths
			if len(c.nodes) <= k {
				for _, n := range c.nodes {
					load[n]++
				}
				continue
			}
			names := make([]string, len(c.nodes))
			for i, n := range c.nodes {
				names[i] = n.Name
			}
			// The best-ranked few are enough unless many are at the bound.
			rank := rendezvous.Top(c.vip, names, min(len(names), 2*k+8))
			chosen := take(c.nodes, rank, k, load, bound)
			if len(chosen) < k && len(rank) < len(names) {
				rank = rendezvous.Top(c.vip, names, len(names))
				chosen = take(c.nodes, rank, k, load, bound)
			}
			// Every candidate at the bound: the best-ranked of the rest.
			for _, i := range rank {
				if len(chosen) == k {
					break
				}
				if !slices.Contains(chosen, c.nodes[i]) {
					chosen = append(chosen, c.nodes[i])
				}
			}
			for _, n := range chosen {
				load[n]++
			}
			out[c.vip] = chosen
		}
	}
	return out
}

// take is up to k of nodes, in rank order, below the bound.
func take(nodes []*Node, rank []int, k int, load map[*Node]int, bound int) []*Node {
	var chosen []*Node
	for _, i := range rank {
		if len(chosen) == k {
			break
		}
		if load[nodes[i]] < bound {
			chosen = append(chosen, nodes[i])
		}
	}
	return chosen
}

// leftOutOf are the names of the candidates not kept, if wanted.
func leftOutOf(candidates, kept []*Node, want bool) []string {
	if !want {
		return nil
	}
	var out []string
	for _, n := range candidates {
		if !slices.Contains(kept, n) {
			out = append(out, n.Name)
		}
	}
	return out
}
