// Package desired computes what the load balancer should announce, from
// plain inputs: the config in force, the Nodes as the cloud judges them,
// the Services with the addresses they hold, the health verdicts and the
// routes. Out comes one value: for every VIP its announce mode, attributes
// and next hops (the nodes, with their addresses and hardware addresses),
// the pod-CIDR routes, and the problems to report. No I/O, no locks, no
// clocks, no clients: the announcers take the value and do the rest.
package desired

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/bgp"
	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/config"
	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/report"
)

// Service is a LoadBalancer Service with the addresses it holds.
type Service struct {
	Namespace, Name string
	// Local is externalTrafficPolicy: Local; EndpointNodes then name the
	// nodes with a ready endpoint.
	Local         bool
	EndpointNodes map[string]bool
	VIPs          []Held
}

// Held is an address a Service holds, and the pool it is in ("" when it
// is in none: a pool edit left it outside).
type Held struct {
	Addr netip.Addr
	Pool string
}

// Input is everything the desired state is computed from.
type Input struct {
	LoadBalancer *config.LoadBalancer
	Routes       *config.Routes // nil: routes are off
	Nodes        Nodes
	Services     []Service
	// Serving is a node's health verdict; nil when nodes are not probed.
	Serving func(node string) bool
	// RouteTable is the pod CIDRs to announce, each via its Node.
	RouteTable []Route
	// Selections are the routers' choices of next hops: a table of paths
	// is computed for each.
	Selections []config.PathSelection
	// Previous is the state computed last, nil at first: a VIP whose pool
	// left the config keeps the way and the attributes it was announced
	// with (a no-export VIP must not start leaking out of the AS).
	Previous *State
}

// VIP is one address to announce.
type VIP struct {
	Addr            netip.Addr
	Namespace, Name string // its Service
	Pool            string
	Local           bool // externalTrafficPolicy Local
	Announce        config.Announce
	Interfaces      []string // for layer 2: its pool's, in the config's order
	Attributes      bgp.Attributes
	// Carriers are the nodes that may carry it: Ready, initialised, in
	// the inventory, healthy, with an address of its family, and for
	// externalTrafficPolicy Local with a ready endpoint. NextHops are their
	// addresses of its family, sorted. Services of one policy share both.
	Carriers []*Node
	NextHops []netip.Addr
}

// State is what the load balancer should announce.
type State struct {
	VIPs []VIP // by address
	// Routes are the pod-CIDR paths, each via its Node (routeNodes).
	Routes     []bgp.Announcement
	routeNodes []*Node
	// Tables are the paths each selection of routers is sent, by the
	// selection's key.
	Tables map[string][]bgp.Announcement
	// LeftOut counts the nodes with a ready endpoint of an
	// externalTrafficPolicy Local VIP that some routers are not sent.
	LeftOut int
	// Carrying are the nodes that may carry traffic and pass their health
	// checks, by name.
	Carrying []*Node
	// Interfaces are the interfaces layer 2 VIPs are answered on, with the
	// field that names each.
	Interfaces map[string]string
	Problems   []report.Problem
	// picks are each table's choices of next hops, by selection key, for
	// the next Compute to reuse (see table).
	picks map[string]map[string]*picks
}

// Compute is the desired state of in.
func Compute(in Input) *State {
	lb := in.LoadBalancer
	st := &State{Interfaces: interfaces(lb)}
	st.Carrying = healthy(in.Nodes.Carriers, in.Serving)
	st.Routes, st.routeNodes = routePaths(in.Routes, in.RouteTable, in.Nodes)
	pools := map[string]*config.Pool{}
	for i := range lb.Pools {
		pools[lb.Pools[i].Name] = &lb.Pools[i]
	}
	var previous map[netip.Addr]*VIP // indexed only if a pool went
	all := byFamily(st.Carrying)
	// A VIP several Services share is one VIP, announced as the first of
	// them by namespace and name says: never as the order they came in
	// (a map's) says, so that every replica, and every convergence, gives
	// the same answer. They agree on the traffic policy (sharing requires
	// it, and the caller gives a refused edit its sharers' policy).
	services := slices.SortedFunc(slices.Values(in.Services), func(a, b Service) int {
		return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
	})
	seen := map[netip.Addr]bool{}
	for _, s := range services {
		hops := all
		if s.Local {
			hops = byFamily(withEndpoints(st.Carrying, s.EndpointNodes))
		}
		for _, h := range s.VIPs {
			if seen[h.Addr] {
				continue
			}
			seen[h.Addr] = true
			v := VIP{Addr: h.Addr, Namespace: s.Namespace, Name: s.Name, Pool: h.Pool, Local: s.Local}
			if p := pools[h.Pool]; p != nil {
				v.Announce, v.Attributes = p.Announced(lb), AttributesOf(p.BGP)
				if v.Announce == config.AnnounceL2 || v.Announce == config.AnnounceBGP {
					v.Interfaces = p.L2.Names() // a bgp pool's, when answered on layer 2 too
				}
			} else {
				if previous == nil {
					previous = in.Previous.index()
				}
				v.Announce = lb.Announce
				if old := previous[h.Addr]; old != nil {
					v.Announce, v.Interfaces, v.Attributes = old.Announce, old.Interfaces, old.Attributes
				}
				st.Problems = append(st.Problems, outsidePools(s, h.Addr))
			}
			for _, iface := range v.Interfaces {
				if _, ok := st.Interfaces[iface]; !ok {
					st.Interfaces[iface] = "the l2.interface of a pool that left the config, whose VIPs are still in use,"
				}
			}
			fam := hops[h.Addr.Is4()]
			v.Carriers, v.NextHops = fam.nodes, fam.addrs
			if v.Announce == config.AnnounceBGP && len(all[h.Addr.Is4()].nodes) == 0 {
				st.Problems = append(st.Problems, notAnnounced(s, h.Addr))
			}
			st.VIPs = append(st.VIPs, v)
		}
	}
	slices.SortFunc(st.VIPs, func(a, b VIP) int { return a.Addr.Compare(b.Addr) })
	st.Tables, st.picks = map[string][]bgp.Announcement{}, map[string]map[string]*picks{}
	leftOut := map[netip.Addr]bool{}
	for _, sel := range in.Selections {
		paths, cut, picks := st.table(sel, in.Previous)
		st.Tables[sel.Key()], st.picks[sel.Key()] = paths, picks
		for i := range st.VIPs {
			v := &st.VIPs[i]
			if c := cut[v.Addr]; len(c) > 0 && !leftOut[v.Addr] {
				leftOut[v.Addr] = true
				st.LeftOut += len(c)
				st.Problems = append(st.Problems, maximumPathsExceeded(v, sel, c))
			}
		}
	}
	st.Problems = append(st.Problems, in.Nodes.Problems...)
	return st
}

func (s *State) index() map[netip.Addr]*VIP {
	out := map[netip.Addr]*VIP{}
	if s == nil {
		return out
	}
	for i := range s.VIPs {
		out[s.VIPs[i].Addr] = &s.VIPs[i]
	}
	return out
}

// Paths are the paths the routers of sel are sent (see table).
func (s *State) Paths(sel config.PathSelection) []bgp.Announcement {
	if paths, ok := s.Tables[sel.Key()]; ok {
		return paths
	}
	paths, _, _ := s.table(sel, s)
	return paths
}

// Unannounced counts the VIPs announced over BGP with no next hop.
func (s *State) Unannounced() int {
	n := 0
	for i := range s.VIPs {
		if s.VIPs[i].Announce == config.AnnounceBGP && len(s.VIPs[i].NextHops) == 0 {
			n++
		}
	}
	return n
}

// Layer2 are the VIPs answered on the LAN.
func (s *State) Layer2() []VIP {
	var out []VIP
	for _, v := range s.VIPs {
		if len(v.Interfaces) > 0 {
			out = append(out, v)
		}
	}
	return out
}

// Holds reports whether vip is one of the state's VIPs.
func (s *State) Holds(vip netip.Addr) bool {
	_, ok := slices.BinarySearchFunc(s.VIPs, vip, func(v VIP, a netip.Addr) int { return v.Addr.Compare(a) })
	return ok
}

// interfaces are the interfaces the config's layer 2 pools answer on, with
// the field that names each.
func interfaces(lb *config.LoadBalancer) map[string]string {
	out := map[string]string{}
	for i := range lb.Pools {
		p := &lb.Pools[i]
		if p.Announced(lb) == config.AnnounceNone || p.L2 == nil {
			continue
		}
		for j, iface := range p.L2.Names() {
			if _, ok := out[iface]; !ok {
				field := fmt.Sprintf("loadBalancer.pools[%d].l2.interface", i)
				if p.L2.Interface == "" {
					field = fmt.Sprintf("loadBalancer.pools[%d].l2.interfaces[%d]", i, j)
				}
				out[iface] = field
			}
		}
	}
	return out
}

// healthy are the carriers that pass their health checks.
func healthy(carriers []*Node, serving func(string) bool) []*Node {
	if serving == nil {
		return carriers
	}
	out := carriers[:0:0]
	for _, n := range carriers {
		if serving(n.Name) {
			out = append(out, n)
		}
	}
	return out
}

func withEndpoints(nodes []*Node, endpoints map[string]bool) []*Node {
	var out []*Node
	for _, n := range nodes {
		if endpoints[n.Name] {
			out = append(out, n)
		}
	}
	return out
}

// family is the nodes with an address of one family, and those addresses.
type family struct {
	nodes []*Node
	addrs []netip.Addr
}

// byFamily splits nodes into those with an IPv4 (true) and an IPv6
// (false) address, with those addresses sorted.
func byFamily(nodes []*Node) map[bool]family {
	out := map[bool]family{}
	for _, n := range nodes {
		for _, v4 := range []bool{true, false} {
			if i := slices.IndexFunc(n.IPs, func(ip netip.Addr) bool { return ip.Is4() == v4 }); i >= 0 {
				f := out[v4]
				f.nodes, f.addrs = append(f.nodes, n), append(f.addrs, n.IPs[i])
				out[v4] = f
			}
		}
	}
	for v4, f := range out {
		slices.SortFunc(f.addrs, netip.Addr.Compare)
		f.addrs = slices.Compact(f.addrs)
		out[v4] = f
	}
	return out
}

// withAdvertisement are a pool's attributes a as an advertisement sends
// them: its communities besides the pool's, its local preference instead,
// its MED and AS-path prepend.
func withAdvertisement(a bgp.Attributes, ad *config.Advertisement) bgp.Attributes {
	out := a
	extra := AttributesOf(config.PoolBGP{Communities: ad.Communities, LargeCommunities: ad.LargeCommunities, LocalPreference: ad.LocalPreference})
	out.Communities = append(slices.Clip(a.Communities), extra.Communities...)
	out.LargeCommunities = append(slices.Clip(a.LargeCommunities), extra.LargeCommunities...)
	if ad.LocalPreference != nil {
		out.LocalPref = extra.LocalPref
	}
	if ad.MED != nil {
		out.MED, out.HasMED = *ad.MED, true
	}
	out.Prepend = uint8(ad.ASPathPrepend)
	return out
}

// AttributesOf are a pool's (or the routes') BGP attributes.
func AttributesOf(a config.PoolBGP) bgp.Attributes {
	var out bgp.Attributes
	for _, c := range a.Communities {
		if v, err := config.ParseCommunity(c); err == nil {
			out.Communities = append(out.Communities, v)
		}
	}
	for _, c := range a.LargeCommunities {
		if v, err := config.ParseLargeCommunity(c); err == nil {
			out.LargeCommunities = append(out.LargeCommunities, bgp.LargeCommunity(v))
		}
	}
	if a.LocalPreference != nil {
		out.LocalPref = *a.LocalPreference
	}
	return out
}

// FamilyName is "IPv4" or "IPv6".
func FamilyName(a netip.Addr) string {
	if a.Is4() {
		return "IPv4"
	}
	return "IPv6"
}

func outsidePools(s Service, vip netip.Addr) report.Problem {
	return report.Problem{Reason: "AddressOutsidePools", Object: report.Service(s.Namespace, s.Name), Subject: vip.String(),
		Log: "Service address is outside every pool; it keeps serving", LogValues: []any{"address", vip},
		Message: fmt.Sprintf("address %s is no longer in any pool of loadBalancer.pools; it keeps serving, with the BGP attributes it was announced with, but a new allocation would not get it", vip)}
}

func notAnnounced(s Service, vip netip.Addr) report.Problem {
	return report.Problem{Reason: "VIPNotAnnounced", Object: report.Service(s.Namespace, s.Name), Subject: vip.String(),
		Log: "VIP is not announced: no eligible node has an address of its family", LogValues: []any{"address", vip},
		Message:  fmt.Sprintf("address %s is not announced: no Ready, initialised node that may carry traffic has an %s address", vip, FamilyName(vip)),
		Resolved: "VIP has next hops again"}
}
