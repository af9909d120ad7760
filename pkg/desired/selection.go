package desired

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/bgp"
	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/config"
	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/rendezvous"
	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/report"
)

// Which of a VIP's nodes each router is sent. A router installs at most
// its ECMP width of a prefix's paths, and one offered more picks the same
// few for every VIP (FRR: the first received, then the lowest addresses),
// so a handful of nodes would carry every VIP. Each router is sent its
// maximumPaths of the nodes its nodeSelector matches, chosen per VIP by
// rendezvous hashing: different VIPs on different nodes, the same choice
// on every replica, and a node that goes moves only the VIPs it carried.

// table is the paths of one selection, and for each VIP of
// externalTrafficPolicy Local the nodes with a ready endpoint it leaves out.
// A VIP whose candidates are those it had in prev keeps prev's choice
// without hashing them again: at 1,000 nodes and 5,000 VIPs the hashing
// is most of a convergence's CPU, and a burst of Services changes no
// VIP's candidates. The choice depends on nothing else, so it is the same.
// The choices made are returned for the next Compute.
func (s *State) table(sel config.PathSelection, prev *State) (paths []bgp.Announcement, leftOut map[netip.Addr][]string, memo map[string]*picks) {
	var matches func(*Node) bool
	if sel.NodeSelector != nil {
		selector, matched := sel.NodeSelector.Selector(), map[*Node]bool{}
		matches = func(n *Node) bool {
			m, ok := matched[n]
			if !ok {
				m = selector.Matches(labels.Set(n.Labels))
				matched[n] = m
			}
			return m
		}
	}
	type carriers struct {
		nodes         []*Node
		names         []string
		picks, before *picks // this state's choices among them, and prev's
	}
	shared := map[carriersKey]carriers{}
	memo = map[string]*picks{}
	before := prev.choices(sel)
	for i, r := range s.Routes {
		if matches == nil || matches(s.routeNodes[i]) {
			paths = append(paths, r)
		}
	}
	var bounded map[netip.Addr][]*Node
	if sel.MaximumLoad > 0 {
		bounded = s.boundedChoices(sel, matches)
	}
	// What the advertisements add to each pool's attributes, once.
	adAttrs := map[string]bgp.Attributes{}
	for i := range s.VIPs {
		v := &s.VIPs[i]
		if v.Announce != config.AnnounceBGP {
			continue
		}
		attrs := v.Attributes
		if sel.Advertised[v.Pool] {
			a, ok := adAttrs[v.Pool]
			if !ok {
				ad, sent := sel.Announces(v.Pool)
				if !sent {
					continue // the pool goes to other routers
				}
				a = withAdvertisement(v.Attributes, ad)
				adAttrs[v.Pool] = a
			}
			attrs = a
		}
		hops := v.NextHops
		if matches != nil || len(v.Carriers) > sel.MaximumPaths {
			// VIPs of one family and traffic policy share their carriers:
			// the selected ones and their names are made once.
			k := carriersKey{len(v.Carriers), nil}
			if len(v.Carriers) > 0 {
				k.first = &v.Carriers[0]
			}
			c, ok := shared[k]
			if !ok {
				c.nodes = v.Carriers
				if matches != nil {
					c.nodes = slices.DeleteFunc(slices.Clone(c.nodes), func(n *Node) bool { return !matches(n) })
				}
				c.names = make([]string, len(c.nodes))
				for i, n := range c.nodes {
					c.names[i] = n.Name
				}
				if len(c.nodes) > sel.MaximumPaths {
					key := strings.Join(c.names, "\x00")
					if c.picks = memo[key]; c.picks == nil {
						c.picks = &picks{kept: map[netip.Addr][]int{}}
						memo[key] = c.picks
					}
					c.before = before[key]
				}
				shared[k] = c
			}
			var nodes []*Node
			var cut []string
			if chosen, ok := bounded[v.Addr]; ok {
				nodes, cut = chosen, leftOutOf(c.nodes, chosen, v.Local)
			} else {
				nodes, cut = pick(v.Addr, c.nodes, c.names, sel.MaximumPaths, v.Local, c.picks, c.before)
			}
			if v.Local && len(cut) > 0 {
				if leftOut == nil {
					leftOut = map[netip.Addr][]string{}
				}
				leftOut[v.Addr] = cut
			}
			hops = addrsOf(nodes, v.Addr.Is4())
		}
		// Without next hops too: the speaker withdraws it.
		paths = append(paths, bgp.Announcement{Prefix: netip.PrefixFrom(v.Addr, v.Addr.BitLen()), NextHops: hops, Attributes: attrs})
	}
	return paths, leftOut, memo
}

// carriersKey tells one carriers slice from another.
type carriersKey struct {
	n     int
	first **Node
}

// picks are the choices among one list of candidates (by their names, in
// order): for each VIP, the indexes of those it is sent via.
type picks struct {
	kept map[netip.Addr][]int
}

// choices are the choices of sel's table, by the candidates' names joined;
// none on a nil state.
func (s *State) choices(sel config.PathSelection) map[string]*picks {
	if s == nil {
		return nil
	}
	return s.picks[sel.Key()]
}

// pick is the n of nodes (named names) vip is sent via, and if wanted the
// names of those left out. It records the choice in memo, taken from
// before when that has it (a choice among the same names).
func pick(vip netip.Addr, nodes []*Node, names []string, n int, wantCut bool, memo, before *picks) (kept []*Node, cut []string) {
	if len(nodes) <= n {
		return nodes, nil
	}
	top, ok := memo.kept[vip]
	if !ok && before != nil {
		top, ok = before.kept[vip]
	}
	if !ok {
		top = rendezvous.Top(vip, names, n)
	}
	memo.kept[vip] = top
	kept = make([]*Node, len(top))
	for i, j := range top {
		kept[i] = nodes[j]
	}
	if wantCut {
		for _, node := range nodes {
			if !slices.Contains(kept, node) {
				cut = append(cut, node.Name)
			}
		}
	}
	return kept, cut
}

// addrsOf are the nodes' addresses of one family, sorted.
func addrsOf(nodes []*Node, v4 bool) []netip.Addr {
	out := make([]netip.Addr, 0, len(nodes))
	for _, n := range nodes {
		if i := slices.IndexFunc(n.IPs, func(ip netip.Addr) bool { return ip.Is4() == v4 }); i >= 0 {
			out = append(out, n.IPs[i])
		}
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return slices.Compact(out)
}

func maximumPathsExceeded(v *VIP, sel config.PathSelection, cut []string) report.Problem {
	slices.Sort(cut)
	routers := fmt.Sprintf("the routers with maximumPaths %d", sel.MaximumPaths)
	if sel.NodeSelector != nil {
		routers += fmt.Sprintf(" and nodeSelector %q", sel.NodeSelector.Selector().String())
	}
	return report.Problem{Reason: "MaximumPathsExceeded", Object: report.Service(v.Namespace, v.Name), Subject: v.Addr.String(),
		Log: "Nodes with a ready endpoint are not sent to a router: it installs fewer paths per VIP", LogValues: []any{"address", v.Addr, "maximumPaths", sel.MaximumPaths, "nodes", cut},
		Message: fmt.Sprintf("address %s: %d nodes with a ready endpoint (%s) are not sent to %s, which install that many paths per VIP: with externalTrafficPolicy Local their endpoints get none of this address's traffic through those routers; raise bgp.peers[].maximumPaths if the routers install more, or run the Service's endpoints on fewer nodes",
			v.Addr, len(cut), strings.Join(cut, ", "), routers),
		Resolved: "every node with a ready endpoint is sent to the routers again"}
}
