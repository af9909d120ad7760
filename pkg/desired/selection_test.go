package desired

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/config"
	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/inventory"
	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/rendezvous"
)

// rackSite is twelve machines, six in each of two racks (zones), one of
// them also labelled.
func rackSite(t *testing.T) *config.Config {
	t.Helper()
	var b strings.Builder
	b.WriteString("inventory:\n  unlistedNodes: allow\n  defaults: {zone: rack2}\n  machines:\n")
	for i := 1; i <= 12; i++ {
		zone := "rack1"
		if i > 6 {
			zone = "rack2"
		}
		fmt.Fprintf(&b, "  - {name: n%02d, zone: %s, addresses: [{type: InternalIP, address: 10.0.0.%d}]", i, zone, i)
		if i == 1 {
			b.WriteString(", labels: {example.com/tier: edge}")
		}
		b.WriteString("}\n")
	}
	b.WriteString("loadBalancer: {pools: [{name: site, addresses: [10.1.0.0/24]}]}\nroutes: {}\nbgp: {localASN: 64512, routerID: 10.0.0.254}\n")
	cfg, err := config.Parse([]byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func rackNodes(opts ...nodeOpt) []*v1.Node {
	var out []*v1.Node
	for i := 1; i <= 12; i++ {
		out = append(out, node(fmt.Sprintf("n%02d", i), fmt.Sprintf("10.0.0.%d", i), opts...))
	}
	return out
}

func zone(z string) *config.LabelSelector {
	return &config.LabelSelector{MatchLabels: map[string]string{v1.LabelTopologyZone: z}}
}

// pathVia is the next hops sel's routers are sent for prefix, "absent"
// when it is not in their table.
func pathVia(st *State, sel config.PathSelection, prefix string) string {
	for _, p := range st.Tables[sel.Key()] {
		if p.Prefix == netip.MustParsePrefix(prefix) {
			return strings.Trim(fmt.Sprint(p.NextHops), "[]")
		}
	}
	return "absent"
}

// What each selection of routers is sent for the VIP 10.1.0.1 and the
// pod CIDR of n01 (rack1) and n07 (rack2).
func TestSelections(t *testing.T) {
	top4 := func(names ...string) string {
		var addrs []netip.Addr
		for _, i := range rendezvous.Top(netip.MustParseAddr("10.1.0.1"), names, 4) {
			var n int
			fmt.Sscanf(names[i], "n%d", &n)
			addrs = append(addrs, netip.AddrFrom4([4]byte{10, 0, 0, byte(n)}))
		}
		slices.SortFunc(addrs, netip.Addr.Compare)
		return strings.Trim(fmt.Sprint(addrs), "[]")
	}
	all := []string{"n01", "n02", "n03", "n04", "n05", "n06", "n07", "n08", "n09", "n10", "n11", "n12"}
	for _, tc := range []struct {
		name      string
		sel       config.PathSelection
		nodes     []*v1.Node
		endpoints map[string]bool // externalTrafficPolicy Local
		vip       string
		n01, n07  string // the pod CIDRs' next hops
		leftOut   []string
	}{
		{name: "as many paths as nodes: every node", sel: config.PathSelection{MaximumPaths: 16},
			vip: "10.0.0.1 10.0.0.2 10.0.0.3 10.0.0.4 10.0.0.5 10.0.0.6 10.0.0.7 10.0.0.8 10.0.0.9 10.0.0.10 10.0.0.11 10.0.0.12", n01: "10.0.0.1", n07: "10.0.0.7"},
		{name: "4 paths: the VIP's 4 by rendezvous", sel: config.PathSelection{MaximumPaths: 4}, vip: top4(all...), n01: "10.0.0.1", n07: "10.0.0.7"},
		{name: "a rack: its nodes, and its pod CIDRs only", sel: config.PathSelection{MaximumPaths: 16, NodeSelector: zone("rack1")},
			vip: "10.0.0.1 10.0.0.2 10.0.0.3 10.0.0.4 10.0.0.5 10.0.0.6", n01: "10.0.0.1", n07: "absent"},
		{name: "a rack, 4 paths: 4 of its nodes", sel: config.PathSelection{MaximumPaths: 4, NodeSelector: zone("rack2")},
			vip: top4(all[6:]...), n01: "absent", n07: "10.0.0.7"},
		{name: "an inventory label", sel: config.PathSelection{MaximumPaths: 16, NodeSelector: &config.LabelSelector{MatchLabels: map[string]string{"example.com/tier": "edge"}}},
			vip: "10.0.0.1", n01: "10.0.0.1", n07: "absent"},
		{name: "a rack without an eligible node: withdrawn there", sel: config.PathSelection{MaximumPaths: 16, NodeSelector: zone("rack1")},
			nodes: rackNodes()[6:], vip: "", n01: "absent", n07: "absent"},
		// A kubelet may label its own Node: a node of rack2 claiming rack1
		// is still sent as rack2's.
		{name: "a Node's own zone label counts for nothing", sel: config.PathSelection{MaximumPaths: 16, NodeSelector: zone("rack1")},
			nodes: rackNodes(func(n *v1.Node) { n.Labels = map[string]string{v1.LabelTopologyZone: "rack1"} }),
			vip:   "10.0.0.1 10.0.0.2 10.0.0.3 10.0.0.4 10.0.0.5 10.0.0.6", n01: "10.0.0.1", n07: "absent"},
		{name: "Local: among the nodes with an endpoint", sel: config.PathSelection{MaximumPaths: 4},
			endpoints: map[string]bool{"n02": true, "n03": true, "n09": true},
			vip:       "10.0.0.2 10.0.0.3 10.0.0.9", n01: "10.0.0.1", n07: "10.0.0.7"},
		{name: "Local: endpoints beyond maximumPaths are left out, and said", sel: config.PathSelection{MaximumPaths: 4},
			endpoints: map[string]bool{"n01": true, "n02": true, "n03": true, "n04": true, "n05": true, "n06": true},
			vip:       top4(all[:6]...), n01: "10.0.0.1", n07: "10.0.0.7", leftOut: []string{"n01", "n02", "n03", "n04", "n05", "n06"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := rackSite(t)
			nodes := tc.nodes
			if nodes == nil {
				nodes = rackNodes()
			}
			svc := held("ns", "web", "10.1.0.1")
			svc.Local, svc.EndpointNodes = tc.endpoints != nil, tc.endpoints
			in := Input{LoadBalancer: &cfg.LoadBalancer, Routes: cfg.Routes, Nodes: Judge(nodes, inventory.New(cfg.Inventory), nil), Services: []Service{svc},
				RouteTable: []Route{{Node: "n01", CIDR: netip.MustParsePrefix("10.244.1.0/24")}, {Node: "n07", CIDR: netip.MustParsePrefix("10.244.7.0/24")}},
				Selections: []config.PathSelection{tc.sel}}
			st := Compute(in)
			if got := pathVia(st, tc.sel, "10.1.0.1/32"); got != tc.vip {
				t.Errorf("VIP via %q, want %q", got, tc.vip)
			}
			if got := pathVia(st, tc.sel, "10.244.1.0/24"); got != tc.n01 {
				t.Errorf("n01's pod CIDR via %q, want %q", got, tc.n01)
			}
			if got := pathVia(st, tc.sel, "10.244.7.0/24"); got != tc.n07 {
				t.Errorf("n07's pod CIDR via %q, want %q", got, tc.n07)
			}
			// Whatever the routers are sent, the VIP's carriers are all
			// its eligible nodes (the status page, layer 2).
			var problems []string
			for _, p := range st.Problems {
				problems = append(problems, p.Reason+": "+p.Message)
			}
			if tc.leftOut == nil {
				if st.LeftOut != 0 || len(problems) != 0 {
					t.Errorf("left out %d, problems %q; want none", st.LeftOut, problems)
				}
				return
			}
			sent := strings.Fields(tc.vip)
			var cut []string
			for _, n := range tc.leftOut {
				var i int
				fmt.Sscanf(n, "n%d", &i)
				if !slices.Contains(sent, fmt.Sprintf("10.0.0.%d", i)) {
					cut = append(cut, n)
				}
			}
			want := fmt.Sprintf("MaximumPathsExceeded: address 10.1.0.1: %d nodes with a ready endpoint (%s) are not sent to the routers with maximumPaths 4", len(cut), strings.Join(cut, ", "))
			if st.LeftOut != len(cut) || len(problems) != 1 || !strings.HasPrefix(problems[0], want) {
				t.Errorf("left out %d, problems %q; want %d and %q", st.LeftOut, problems, len(cut), want)
			}
		})
	}
}

// Two selections get two tables in one computation; the same selection
// written twice is one.
func TestTablesBySelection(t *testing.T) {
	cfg, err := config.Parse([]byte(`
loadBalancer: {pools: [{name: site, addresses: [10.1.0.0/24]}]}
bgp:
  localASN: 64512
  routerID: 10.0.0.254
  peers:
  - {address: 10.0.255.1, asn: 65101, nodeSelector: {matchLabels: {topology.kubernetes.io/zone: rack1}}}
  - {address: 10.0.255.2, asn: 65102, nodeSelector: {matchLabels: {topology.kubernetes.io/zone: rack2}}}
  - {address: 10.0.255.3, asn: 65103, nodeSelector: {matchLabels: {topology.kubernetes.io/zone: rack2}}}
  - {address: 10.0.255.4, asn: 65104, maximumPaths: 4}
`))
	if err != nil {
		t.Fatal(err)
	}
	sels, peers := cfg.BGP.Selections()
	if len(sels) != 3 || !slices.Equal(peers[1], []int{1, 2}) || sels[2].MaximumPaths != 4 || sels[0].MaximumPaths != config.DefaultMaximumPaths {
		t.Fatalf("selections %+v, peers %v", sels, peers)
	}
	site := rackSite(t)
	st := Compute(Input{LoadBalancer: &site.LoadBalancer, Nodes: Judge(rackNodes(), inventory.New(site.Inventory), nil),
		Services: []Service{held("ns", "web", "10.1.0.1")}, Selections: sels})
	if len(st.Tables) != 3 {
		t.Fatalf("%d tables, want 3", len(st.Tables))
	}
	for i, want := range []int{6, 6, 4} {
		if got := len(strings.Fields(pathVia(st, sels[i], "10.1.0.1/32"))); got != want {
			t.Errorf("selection %d (%s): %d next hops, want %d", i, sels[i].Key(), got, want)
		}
	}
}

// A Compute that reuses the last one's choices sends every router what a
// fresh one would, through Services coming and going, nodes leaving and
// coming back, and endpoints moving; and it keeps no choice of a VIP that
// is gone.
func TestChoicesCarriedOverAreTheChoicesMadeAfresh(t *testing.T) {
	site := rackSite(t)
	inv := inventory.New(site.Inventory)
	sels := []config.PathSelection{{MaximumPaths: 4}, {MaximumPaths: 3, NodeSelector: zone("rack1")}, {MaximumPaths: 2, NodeSelector: zone("rack2")}}
	web := func(n int) []Service {
		var out []Service
		for i := 1; i <= n; i++ {
			out = append(out, held("ns", fmt.Sprint("web", i), fmt.Sprintf("10.1.0.%d", i)))
		}
		return out
	}
	local := func(nodes ...string) Service {
		s := held("ns", "local", "10.1.0.200")
		s.Local, s.EndpointNodes = true, map[string]bool{}
		for _, n := range nodes {
			s.EndpointNodes[n] = true
		}
		return s
	}
	down := func(name string) []*v1.Node {
		nodes := rackNodes()
		for i, n := range nodes {
			if n.Name == name {
				nodes[i] = node(n.Name, n.Status.Addresses[0].Address, notReady)
			}
		}
		return nodes
	}
	steps := []struct {
		name     string
		nodes    []*v1.Node
		services []Service
	}{
		{"first", rackNodes(), web(10)},
		{"more Services", rackNodes(), append(web(40), local("n01", "n02", "n03", "n08", "n09"))},
		{"a node of rack1 goes", down("n02"), append(web(40), local("n01", "n02", "n03", "n08", "n09"))},
		{"it comes back", rackNodes(), append(web(40), local("n01", "n02", "n03", "n08", "n09"))},
		{"endpoints move", rackNodes(), append(web(40), local("n01", "n04", "n05", "n06", "n10", "n11"))},
		{"a node of rack2 goes", down("n10"), append(web(40), local("n01", "n04", "n05", "n06", "n10", "n11"))},
		{"Services go", down("n10"), web(5)},
	}
	var last *State
	for _, step := range steps {
		in := Input{LoadBalancer: &site.LoadBalancer, Nodes: Judge(step.nodes, inv, nil), Services: step.services, Selections: sels}
		fresh := Compute(in)
		in.Previous = last
		got := Compute(in)
		for _, sel := range sels {
			if g, f := fmt.Sprint(got.Tables[sel.Key()]), fmt.Sprint(fresh.Tables[sel.Key()]); g != f {
				t.Errorf("%s: selection %q with the last choices:\n%s\nmade afresh:\n%s", step.name, sel.Key(), g, f)
			}
		}
		if got.LeftOut != fresh.LeftOut || len(got.Problems) != len(fresh.Problems) {
			t.Errorf("%s: %d left out and %d problems, afresh %d and %d", step.name, got.LeftOut, len(got.Problems), fresh.LeftOut, len(fresh.Problems))
		}
		for key, memo := range got.picks {
			for _, p := range memo {
				for vip := range p.kept {
					if !got.Holds(vip) {
						t.Errorf("%s: selection %q keeps a choice for %s, which no Service holds", step.name, key, vip)
					}
				}
			}
		}
		last = got
	}
}
