package provider

import (
	"net/netip"
	"slices"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/config"
	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/desired"
	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/report"
)

// Status is where this replica announces each VIP and why not, for the
// status page (docs/operations/troubleshooting.md). It is computed when
// asked, from what the replica holds: no API call, no write.
type Status struct {
	Replica ReplicaStatus  `json:"replica"`
	VIPs    []VIPStatus    `json:"vips"`
	Routers []RouterStatus `json:"routers"`
	Routes  []RouteStatus  `json:"routes,omitempty"`
}

// ReplicaStatus is the replica itself.
type ReplicaStatus struct {
	// Leading: this replica allocates the Services' addresses.
	Leading bool `json:"leading"`
	// Ready is "ok", or why the replica is not ready.
	Ready string `json:"ready"`
}

// VIPStatus is one VIP.
type VIPStatus struct {
	Address  string `json:"address"`
	Service  string `json:"service"`
	Pool     string `json:"pool"`
	Announce string `json:"announce"`
	// Nodes may carry it; NextHops are their addresses of its family.
	Nodes    []string `json:"nodes"`
	NextHops []string `json:"nextHops"`
	// Routers are the next hops each router is sent now (BGP).
	Routers []RouterPaths `json:"routers,omitempty"`
	// AnsweredBy is the node this replica names in its ARP and NDP
	// answers for it (layer 2), on the first of its pool's interfaces it
	// is answered on.
	AnsweredBy *L2Answer `json:"answeredBy,omitempty"`
	// AlsoAnsweredBy are the answers on the pool's other interfaces
	// (l2.interfaces) whose subnets hold it too.
	AlsoAnsweredBy []L2Answer `json:"alsoAnsweredBy,omitempty"`
	// Problems are why it is not announced, or not everywhere: the
	// Warning Events of its Service, "Reason: message".
	Problems []string `json:"problems,omitempty"`
}

// RouterPaths is what one router is sent for a prefix.
type RouterPaths struct {
	Router   string   `json:"router"`
	NextHops []string `json:"nextHops"`
}

// L2Answer is who answers for a layer 2 VIP.
type L2Answer struct {
	Interface string `json:"interface"`
	Node      string `json:"node"`
	MAC       string `json:"mac"`
}

// RouterStatus is one configured BGP peer.
type RouterStatus struct {
	Address string `json:"address"`
	ASN     uint32 `json:"asn,omitempty"`
	// State is the session's (idle, connect, active, opensent,
	// openconfirm, established); "" before the first report.
	State string `json:"state"`
	// AddPath: the router takes every next hop of a VIP (RFC 7911).
	AddPath bool `json:"addPath"`
	// Prefixes is how many prefixes it is sent; Error why they could not
	// be read.
	Prefixes int    `json:"prefixes"`
	Error    string `json:"error,omitempty"`
}

// RouteStatus is a pod-CIDR route.
type RouteStatus struct {
	Prefix   string   `json:"prefix"`
	NextHops []string `json:"nextHops"`
}

// Status is this replica's status now; vip, if valid, keeps that VIP only.
func (c *Cloud) Status(vip netip.Addr) Status {
	st := Status{Replica: ReplicaStatus{Leading: c.lb.leading.Load(), Ready: "ok"}, VIPs: []VIPStatus{}, Routers: []RouterStatus{}}
	if err := c.Ready(); err != nil {
		st.Replica.Ready = err.Error()
	}
	b := c.lb
	b.mu.Lock()
	last := b.last
	b.mu.Unlock()
	if last == nil {
		last = &desired.State{}
	}
	problems := vipProblems(append(b.report.Said("desired"), b.report.Said("l2")...))
	answered := b.l2.Answered()

	bs := b.bgp.Status()
	sent := map[netip.Addr]map[netip.Prefix][]netip.Addr{}
	for _, peer := range bs.Peers {
		r := RouterStatus{Address: peer.String()}
		if s, ok := bs.Sessions[peer]; ok {
			r.ASN, r.State, r.AddPath = s.ASN, s.State, s.AddPath
		}
		paths, err := b.bgp.Sent(peer)
		if err != nil {
			r.Error = err.Error()
		}
		r.Prefixes = len(paths)
		sent[peer] = paths
		st.Routers = append(st.Routers, r)
	}

	for _, v := range last.VIPs {
		if vip.IsValid() && v.Addr != vip {
			continue
		}
		vs := VIPStatus{Address: v.Addr.String(), Service: v.Namespace + "/" + v.Name, Pool: v.Pool, Announce: string(v.Announce),
			Nodes: []string{}, NextHops: addrStrings(v.NextHops), Problems: problems[v.Addr]}
		for _, n := range v.Carriers {
			vs.Nodes = append(vs.Nodes, n.Name)
		}
		if v.Announce == config.AnnounceBGP {
			prefix := netip.PrefixFrom(v.Addr, v.Addr.BitLen())
			for _, peer := range bs.Peers {
				vs.Routers = append(vs.Routers, RouterPaths{Router: peer.String(), NextHops: addrStrings(sent[peer][prefix])})
			}
		}
		if len(v.Interfaces) > 0 {
			for i, a := range answered[v.Addr] {
				ans := L2Answer{Interface: a.Interface, Node: a.Node, MAC: a.MAC.String()}
				if i == 0 {
					vs.AnsweredBy = &ans
				} else {
					vs.AlsoAnsweredBy = append(vs.AlsoAnsweredBy, ans)
				}
			}
		}
		st.VIPs = append(st.VIPs, vs)
	}
	if !vip.IsValid() {
		for _, r := range last.Routes {
			st.Routes = append(st.Routes, RouteStatus{Prefix: r.Prefix.String(), NextHops: addrStrings(r.NextHops)})
		}
	}
	return st
}

// vipProblems are the problems said about VIPs of Services, by VIP.
func vipProblems(said []report.Problem) map[netip.Addr][]string {
	out := map[netip.Addr][]string{}
	for _, p := range said {
		vip, err := netip.ParseAddr(p.Subject)
		if p.Object.Kind != "Service" || err != nil {
			continue
		}
		out[vip] = append(out[vip], p.Reason+": "+p.Message)
	}
	for _, ps := range out {
		slices.Sort(ps)
	}
	return out
}

func addrStrings(addrs []netip.Addr) []string {
	out := make([]string, 0, len(addrs))
	for _, a := range addrs {
		out = append(out, a.String())
	}
	return out
}
