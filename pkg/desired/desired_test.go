package desired

import (
	"fmt"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cloudapi "k8s.io/cloud-provider/api"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/bgp"
	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/config"
	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/inventory"
)

const siteConfig = `
inventory:
  unlistedNodes: %s
  machines:
  - {name: a, addresses: [{type: InternalIP, address: 10.0.0.1}, {type: InternalIP, address: "fd00::1"}], macAddresses: ["02:00:00:00:00:0a"]}
  - {name: b, addresses: [{type: InternalIP, address: 10.0.0.2}]}
  - {name: bare}
loadBalancer:
  pools:
  - {name: site, addresses: [10.1.0.0/24], bgp: {communities: ["65535:65281"]}}
  - {name: six, addresses: ["2001:db8::/124"]}
  - {name: lan, addresses: [192.168.1.200-192.168.1.250], announce: l2, l2: {interface: eth0}}
routes: {}
bgp: {localASN: 64512, routerID: 10.0.0.254}
`

func parse(t *testing.T, policy string) *config.Config {
	t.Helper()
	cfg, err := config.Parse([]byte(fmt.Sprintf(siteConfig, policy)))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

type nodeOpt func(*v1.Node)

var (
	notReady      nodeOpt = func(n *v1.Node) { n.Status.Conditions[0].Status = v1.ConditionFalse }
	uninitialised nodeOpt = func(n *v1.Node) {
		n.Spec.ProviderID = ""
		n.Spec.Taints = append(n.Spec.Taints, v1.Taint{Key: cloudapi.TaintExternalCloudProvider, Effect: v1.TaintEffectNoSchedule})
	}
	excluded nodeOpt = func(n *v1.Node) { n.Labels = map[string]string{v1.LabelNodeExcludeBalancers: "true"} }
	deleting nodeOpt = func(n *v1.Node) { now := metav1.Now(); n.DeletionTimestamp = &now }
	scaledIn nodeOpt = func(n *v1.Node) {
		n.Spec.Taints = append(n.Spec.Taints, v1.Taint{Key: "ToBeDeletedByClusterAutoscaler", Effect: v1.TaintEffectNoSchedule})
	}
)

func node(name, addr string, opts ...nodeOpt) *v1.Node {
	n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, UID: "uid-" + "1"}, Spec: v1.NodeSpec{ProviderID: "baremetal://" + name},
		Status: v1.NodeStatus{Addresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: addr}},
			Conditions: []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue}}}}
	for _, o := range opts {
		o(n)
	}
	return n
}

func held(ns, name string, vips ...string) Service {
	s := Service{Namespace: ns, Name: name}
	for _, v := range vips {
		a := netip.MustParseAddr(v)
		pool := "site"
		switch {
		case a.Is6():
			pool = "six"
		case strings.HasPrefix(v, "192.168.1."):
			pool = "lan"
		case !strings.HasPrefix(v, "10.1.0."):
			pool = ""
		}
		s.VIPs = append(s.VIPs, Held{Addr: a, Pool: pool})
	}
	return s
}

func hopsOf(st *State, vip string) string {
	for _, v := range st.VIPs {
		if v.Addr == netip.MustParseAddr(vip) {
			return strings.Trim(fmt.Sprint(v.NextHops), "[]")
		}
	}
	return "absent"
}

// Every rule of who may carry a VIP, one case each: the VIP 10.1.0.1's next
// hops when the site's nodes are as given.
func TestNextHopRules(t *testing.T) {
	for _, tc := range []struct {
		name    string
		policy  string
		nodes   []*v1.Node
		serving map[string]bool // nil: no health checks
		local   map[string]bool // endpoints, for externalTrafficPolicy Local
		pins    map[string]Pin
		want    string
	}{
		{name: "Ready, initialised, listed", nodes: []*v1.Node{node("a", "10.0.0.1"), node("b", "10.0.0.2")}, want: "10.0.0.1 10.0.0.2"},
		{name: "a NotReady node carries nothing", nodes: []*v1.Node{node("a", "10.0.0.1"), node("b", "10.0.0.2", notReady)}, want: "10.0.0.1"},
		{name: "an uninitialised node carries nothing", nodes: []*v1.Node{node("a", "10.0.0.1"), node("b", "10.0.0.2", uninitialised)}, want: "10.0.0.1"},
		{name: "excluded from load balancers", nodes: []*v1.Node{node("a", "10.0.0.1"), node("b", "10.0.0.2", excluded)}, want: "10.0.0.1"},
		{name: "being deleted", nodes: []*v1.Node{node("a", "10.0.0.1"), node("b", "10.0.0.2", deleting)}, want: "10.0.0.1"},
		{name: "scaled in by the autoscaler", nodes: []*v1.Node{node("a", "10.0.0.1"), node("b", "10.0.0.2", scaledIn)}, want: "10.0.0.1"},
		{name: "the inventory's addresses win over the status", nodes: []*v1.Node{node("a", "10.9.9.9")}, want: "10.0.0.1"},
		{name: "an unlisted node, rejected", policy: "reject", nodes: []*v1.Node{node("a", "10.0.0.1"), node("stray", "10.0.0.9")}, want: "10.0.0.1"},
		{name: "an unlisted node, allowed", policy: "allow", nodes: []*v1.Node{node("a", "10.0.0.1"), node("stray", "10.0.0.9")}, want: "10.0.0.1 10.0.0.9"},
		{name: "an address-less machine at the address it was initialised with", nodes: []*v1.Node{node("bare", "10.0.0.3")},
			pins: map[string]Pin{"bare": {UID: "uid-1", Addrs: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "10.0.0.3"}}}}, want: "10.0.0.3"},
		{name: "an address-less machine whose status was rewritten", nodes: []*v1.Node{node("bare", "10.0.0.77")},
			pins: map[string]Pin{"bare": {UID: "uid-1", Addrs: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "10.0.0.3"}}}}, want: ""},
		{name: "a loopback address is never a next hop", policy: "allow", nodes: []*v1.Node{node("stray", "127.0.0.1")}, want: ""},
		{name: "a link-local address is never a next hop", policy: "allow", nodes: []*v1.Node{node("stray", "169.254.169.254")}, want: ""},
		{name: "failing health checks", nodes: []*v1.Node{node("a", "10.0.0.1"), node("b", "10.0.0.2")}, serving: map[string]bool{"a": true}, want: "10.0.0.1"},
		{name: "Local: only nodes with a ready endpoint", nodes: []*v1.Node{node("a", "10.0.0.1"), node("b", "10.0.0.2")}, local: map[string]bool{"b": true}, want: "10.0.0.2"},
		{name: "Local: an endpoint on a failing node", nodes: []*v1.Node{node("a", "10.0.0.1"), node("b", "10.0.0.2")}, local: map[string]bool{"b": true}, serving: map[string]bool{"a": true}, want: ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			policy := tc.policy
			if policy == "" {
				policy = "reject"
			}
			cfg := parse(t, policy)
			svc := held("ns", "web", "10.1.0.1")
			svc.Local, svc.EndpointNodes = tc.local != nil, tc.local
			in := Input{LoadBalancer: &cfg.LoadBalancer, Nodes: Judge(tc.nodes, inventory.New(cfg.Inventory), tc.pins), Services: []Service{svc}}
			if tc.serving != nil {
				in.Serving = func(n string) bool { return tc.serving[n] }
			}
			if got := hopsOf(Compute(in), "10.1.0.1"); got != tc.want {
				t.Errorf("next hops %q, want %q", got, tc.want)
			}
		})
	}
}

// A VIP is announced with the next hops of its family; one with none is a
// problem on its Service, once per VIP, and counted.
func TestFamiliesAndTheirProblems(t *testing.T) {
	cfg := parse(t, "reject")
	in := Input{LoadBalancer: &cfg.LoadBalancer,
		Nodes:    Judge([]*v1.Node{node("a", "10.0.0.1"), node("b", "10.0.0.2")}, inventory.New(cfg.Inventory), nil),
		Services: []Service{held("ns", "dual", "10.1.0.1", "2001:db8::1")}}
	st := Compute(in)
	if got := hopsOf(st, "2001:db8::1"); got != "fd00::1" {
		t.Errorf("IPv6 next hops %q, want a's fd00::1", got)
	}
	if got := hopsOf(st, "10.1.0.1"); got != "10.0.0.1 10.0.0.2" {
		t.Errorf("IPv4 next hops %q", got)
	}
	if len(st.Problems) != 0 || st.Unannounced() != 0 {
		t.Errorf("problems %v, unannounced %d", st.Problems, st.Unannounced())
	}
	in.Nodes = Judge([]*v1.Node{node("b", "10.0.0.2")}, inventory.New(cfg.Inventory), nil)
	st = Compute(in)
	if len(st.Problems) != 1 || st.Problems[0].Reason != "VIPNotAnnounced" || st.Problems[0].Subject != "2001:db8::1" ||
		!strings.Contains(st.Problems[0].Message, "has an IPv6 address") || st.Unannounced() != 1 {
		t.Errorf("problems %+v, unannounced %d; want one VIPNotAnnounced for 2001:db8::1", st.Problems, st.Unannounced())
	}
}

// The modes: a BGP VIP is a path with its pool's attributes, a layer 2
// VIP is not, and names its interface with candidates that carry the
// MACs the inventory lists.
func TestModesAndAttributes(t *testing.T) {
	cfg := parse(t, "reject")
	in := Input{LoadBalancer: &cfg.LoadBalancer, Routes: cfg.Routes,
		Nodes:      Judge([]*v1.Node{node("a", "10.0.0.1"), node("b", "10.0.0.2")}, inventory.New(cfg.Inventory), nil),
		Services:   []Service{held("ns", "web", "10.1.0.1"), held("ns", "lan", "192.168.1.200")},
		RouteTable: []Route{{Node: "a", CIDR: netip.MustParsePrefix("10.244.0.0/24")}, {Node: "gone", CIDR: netip.MustParsePrefix("10.244.9.0/24")}}}
	st := Compute(in)
	var paths []string
	for _, p := range st.Paths(config.PathSelection{MaximumPaths: config.DefaultMaximumPaths}) {
		paths = append(paths, fmt.Sprint(p.Prefix, p.NextHops, p.Communities))
	}
	if want := []string{"10.244.0.0/24 [10.0.0.1] []", "10.1.0.1/32 [10.0.0.1 10.0.0.2] [4294967041]"}; !slices.Equal(paths, want) {
		t.Errorf("BGP paths %v, want %v (the route to a Node that is gone left out)", paths, want)
	}
	l2 := st.Layer2()
	if len(l2) != 1 || !slices.Equal(l2[0].Interfaces, []string{"eth0"}) || len(l2[0].Carriers) != 2 || l2[0].Carriers[0].MACs[0].String() != "02:00:00:00:00:0a" {
		t.Errorf("layer 2 VIPs %+v", l2)
	}
	if st.Interfaces["eth0"] != "loadBalancer.pools[2].l2.interface" {
		t.Errorf("interfaces %v", st.Interfaces)
	}
}

// A VIP whose pool left the config keeps the way and the attributes it
// was announced with, and its Service is told.
func TestAVIPWhosePoolWentKeepsItsWay(t *testing.T) {
	cfg := parse(t, "reject")
	nodes := Judge([]*v1.Node{node("a", "10.0.0.1")}, inventory.New(cfg.Inventory), nil)
	in := Input{LoadBalancer: &cfg.LoadBalancer, Nodes: nodes, Services: []Service{held("ns", "web", "10.1.0.1"), held("ns", "lan", "192.168.1.200")}}
	first := Compute(in)
	cfg.LoadBalancer.Pools = nil
	in.Services = []Service{{Namespace: "ns", Name: "web", VIPs: []Held{{Addr: netip.MustParseAddr("10.1.0.1")}}},
		{Namespace: "ns", Name: "lan", VIPs: []Held{{Addr: netip.MustParseAddr("192.168.1.200")}}}}
	in.Previous = first
	st := Compute(in)
	if p := st.Paths(config.PathSelection{MaximumPaths: config.DefaultMaximumPaths}); len(p) != 1 || len(p[0].Communities) != 1 {
		t.Errorf("paths %+v, want the VIP with its no-export community", p)
	}
	if l2 := st.Layer2(); len(l2) != 1 || !slices.Equal(l2[0].Interfaces, []string{"eth0"}) || st.Interfaces["eth0"] == "" {
		t.Errorf("layer 2 %+v on %v, want the VIP still on eth0", l2, st.Interfaces)
	}
	if n := len(st.Problems); n != 2 || st.Problems[0].Reason != "AddressOutsidePools" {
		t.Errorf("problems %+v, want AddressOutsidePools for both", st.Problems)
	}
}

func TestRouteNextHop(t *testing.T) {
	rt := &config.Routes{NextHopAddressType: "InternalIP"}
	cfg := parse(t, "reject")
	nodes := Judge([]*v1.Node{node("a", "10.0.0.1"), node("b", "10.0.0.2", uninitialised), node("stray", "10.0.0.9")}, inventory.New(cfg.Inventory), nil)
	for _, tc := range []struct {
		node, cidr, want string
	}{
		{"a", "10.244.0.0/24", "10.0.0.1"},
		{"a", "fd10::/64", "fd00::1"},
		{"b", "10.244.1.0/24", "not initialised by the cloud"},
		{"stray", "10.244.2.0/24", "matches no machine"},
		{"gone", "10.244.3.0/24", "not found"},
	} {
		hop, err := RouteNextHop(rt, Route{Node: tc.node, CIDR: netip.MustParsePrefix(tc.cidr)}, nodes.ByName[tc.node])
		got := hop.String()
		if err != nil {
			got = err.Error()
		}
		if !strings.Contains(got, tc.want) {
			t.Errorf("route %s via %s: %q, want %q", tc.cidr, tc.node, got, tc.want)
		}
	}
}

func TestJudgeSaysWhatIsWrongWithAddresses(t *testing.T) {
	cfg := parse(t, "allow")
	nodes := Judge([]*v1.Node{node("stray", "127.0.0.1"), node("bare", "10.0.0.77")}, inventory.New(cfg.Inventory),
		map[string]Pin{"bare": {UID: "uid-1", Addrs: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "10.0.0.3"}}}})
	var reasons []string
	for _, p := range nodes.Problems {
		reasons = append(reasons, p.Object.Name+" "+p.Reason)
	}
	slices.Sort(reasons)
	if want := []string{"bare NodeAddressesChanged", "stray NodeAddressNotUsable"}; !slices.Equal(reasons, want) {
		t.Errorf("problems %v, want %v", reasons, want)
	}
	if err := nodes.ByName["bare"].Err; err == nil || !strings.Contains(err.Error(), "changed after it was initialised") {
		t.Errorf("bare: %v", err)
	}
}

// Every replica derives the same table from the same cluster, whatever
// order the Services come in (a map's, an informer's): a VIP several
// Services share is one VIP, announced as the first of them by namespace
// and name says, even while they disagree (an edit refused or on its way).
func TestSharedVIPIsTheSameInEveryOrder(t *testing.T) {
	cfg := parse(t, "reject")
	nodes := Judge([]*v1.Node{node("a", "10.0.0.1"), node("b", "10.0.0.2")}, inventory.New(cfg.Inventory), nil)
	web, api, lan1, lan2, other := held("ns", "web", "10.1.0.1"), held("ns", "api", "10.1.0.1"), held("ns", "lan1", "192.168.1.200"), held("ns", "lan2", "192.168.1.200"), held("ns", "other", "10.1.0.2")
	web.Local, web.EndpointNodes = true, map[string]bool{"b": true}
	lan2.Local, lan2.EndpointNodes = true, map[string]bool{"b": true}
	services := []Service{web, api, lan1, lan2, other}
	describe := func(st *State) string {
		var b strings.Builder
		for _, p := range st.Paths(config.PathSelection{MaximumPaths: config.DefaultMaximumPaths}) {
			fmt.Fprintln(&b, "bgp", p.Prefix, p.NextHops)
		}
		for _, v := range st.Layer2() {
			var carriers []string
			for _, n := range v.Carriers {
				carriers = append(carriers, n.Name)
			}
			fmt.Fprintln(&b, "l2", v.Addr, v.Namespace+"/"+v.Name, carriers)
		}
		fmt.Fprintln(&b, "fingerprint", st.Fingerprint())
		return b.String()
	}
	var want string
	var permute func(k int)
	permute = func(k int) {
		if k == len(services) {
			got := describe(Compute(Input{LoadBalancer: &cfg.LoadBalancer, Nodes: nodes, Services: slices.Clone(services), Selections: []config.PathSelection{{MaximumPaths: config.DefaultMaximumPaths}}}))
			if want == "" {
				want = got
				t.Logf("first order's table:\n%s", got)
			} else if got != want {
				var names []string
				for _, s := range services {
					names = append(names, s.Name)
				}
				t.Fatalf("Services in the order %v give\n%s\nwant (the first order's)\n%s", names, got, want)
			}
			return
		}
		for i := k; i < len(services); i++ {
			services[k], services[i] = services[i], services[k]
			permute(k + 1)
			services[k], services[i] = services[i], services[k]
		}
	}
	permute(0)
	// api sorts before web: 10.1.0.1 is announced as api's (Cluster), via
	// both nodes; lan1 before lan2: Cluster, both nodes candidates.
	if !strings.Contains(want, "bgp 10.1.0.1/32 [10.0.0.1 10.0.0.2]\n") || strings.Count(want, "10.1.0.1/32") != 1 {
		t.Errorf("10.1.0.1 is not announced once, as api's:\n%s", want)
	}
	if !strings.Contains(want, "l2 192.168.1.200 ns/lan1 [a b]\n") || strings.Count(want, "192.168.1.200") != 1 {
		t.Errorf("192.168.1.200 is not answered once, as lan1's:\n%s", want)
	}
}

// A peer's nodeSelector reads the machine's labels, and of the Node's own
// those the site sets: under node-restriction.kubernetes.io/ (no kubelet
// may write them) and the keys inventory.nodeLabels names. A machine's
// label wins over the Node's of the same key; the rest of the Node's
// labels (its kubelet may write them) are not read.
func TestNodeSelectorsReadTheLabelsTheSiteSets(t *testing.T) {
	cfg := parse(t, "reject")
	cfg.Inventory.Machines[0].Labels = map[string]string{"rack": "r1"}
	cfg.Inventory.NodeLabels = []string{"rack", "row"}
	labelled := func(labels map[string]string) nodeOpt { return func(n *v1.Node) { n.Labels = labels } }
	for _, tc := range []struct {
		name      string
		node      *v1.Node
		key, want string // want "" for not read
	}{
		{"a listed key", node("b", "10.0.0.2", labelled(map[string]string{"row": "5"})), "row", "5"},
		{"a key no kubelet may write", node("b", "10.0.0.2", labelled(map[string]string{"node-restriction.kubernetes.io/rack": "r2"})), "node-restriction.kubernetes.io/rack", "r2"},
		{"a key its kubelet may write", node("b", "10.0.0.2", labelled(map[string]string{"hall": "h1"})), "hall", ""},
		{"the machine's label wins", node("a", "10.0.0.1", labelled(map[string]string{"rack": "r9"})), "rack", "r1"},
		{"the inventory's zone wins", node("b", "10.0.0.2", labelled(map[string]string{"topology.kubernetes.io/zone": "z9"})), "topology.kubernetes.io/zone", ""},
	} {
		j := Judge([]*v1.Node{tc.node}, inventory.New(cfg.Inventory), nil).ByName[tc.node.Name]
		if got := j.Labels[tc.key]; got != tc.want {
			t.Errorf("%s: label %s is %q, want %q", tc.name, tc.key, got, tc.want)
		}
	}
	// A relabelled Node is worth a convergence.
	before, after := node("b", "10.0.0.2", labelled(map[string]string{"rack": "r1"})), node("b", "10.0.0.2", labelled(map[string]string{"rack": "r2"}))
	if Routing(before) == Routing(after) {
		t.Errorf("a Node relabelled from rack r1 to r2 changes nothing that matters to its next hops")
	}
}

// The fingerprint tells tables apart: a node fewer, other attributes, a
// layer 2 VIP's other candidates; and fits a float64 exactly.
func TestFingerprintTellsTablesApart(t *testing.T) {
	withPeer := func(text string) *config.Config {
		t.Helper()
		cfg, err := config.Parse([]byte(strings.Replace(text, "bgp: {localASN: 64512, routerID: 10.0.0.254}", "bgp: {localASN: 64512, routerID: 10.0.0.254, peers: [{address: 10.0.0.253, asn: 64500}]}", 1)))
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	cfg := withPeer(fmt.Sprintf(siteConfig, "reject"))
	services := []Service{held("ns", "web", "10.1.0.1"), held("ns", "lan", "192.168.1.200")}
	of := func(nodes ...*v1.Node) uint64 {
		sels, _ := cfg.BGP.Selections()
		return Compute(Input{LoadBalancer: &cfg.LoadBalancer, Nodes: Judge(nodes, inventory.New(cfg.Inventory), nil), Services: slices.Clone(services), Selections: sels}).Fingerprint()
	}
	both := of(node("a", "10.0.0.1"), node("b", "10.0.0.2"))
	if again := of(node("b", "10.0.0.2"), node("a", "10.0.0.1")); again != both {
		t.Errorf("the same cluster in another order: %x, want %x", again, both)
	}
	if one := of(node("a", "10.0.0.1"), node("b", "10.0.0.2", notReady)); one == both {
		t.Errorf("a node NotReady left the fingerprint as it was")
	}
	if both >= 1<<53 {
		t.Errorf("fingerprint %x does not fit a float64's 53 bits", both)
	}
	cfg = withPeer(strings.Replace(fmt.Sprintf(siteConfig, "reject"), "65535:65281", "65535:65282", 1))
	if other := of(node("a", "10.0.0.1"), node("b", "10.0.0.2")); other == both {
		t.Errorf("other communities left the fingerprint as it was")
	}
}

// Advertisements give each router its pools, with their attributes: a
// pool an advertisement names goes only to that advertisement's peers,
// with its communities besides the pool's, its MED and prepend; a pool
// none names goes to every router as it is.
func TestAdvertisementsGiveEachRouterItsPools(t *testing.T) {
	text := strings.Replace(fmt.Sprintf(siteConfig, "reject"), "bgp: {localASN: 64512, routerID: 10.0.0.254}", `bgp:
  localASN: 64512
  routerID: 10.0.0.254
  peers:
  - {address: 10.0.0.251, asn: 64500}
  - {address: 10.0.0.252, asn: 64500}
  - {address: 10.0.0.253, asn: 64500}
  advertisements:
  - {pools: [site], peers: [10.0.0.251], communities: ["65000:1"], med: 10, asPathPrepend: 2}
  - {pools: [site], peers: [10.0.0.252]}`, 1)
	cfg, err := config.Parse([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	sels, peers := cfg.BGP.Selections()
	if len(sels) != 3 {
		t.Fatalf("selections %d (peers %v), want one for each router", len(sels), peers)
	}
	nodes := Judge([]*v1.Node{node("a", "10.0.0.1"), node("b", "10.0.0.2")}, inventory.New(cfg.Inventory), nil)
	st := Compute(Input{LoadBalancer: &cfg.LoadBalancer, Nodes: nodes, Services: []Service{held("ns", "web", "10.1.0.1"), held("ns", "six", "2001:db8::1")}, Selections: sels})
	sent := func(sel config.PathSelection) map[string]bgp.Attributes {
		out := map[string]bgp.Attributes{}
		for _, p := range st.Tables[sel.Key()] {
			out[p.Prefix.Addr().String()] = p.Attributes
		}
		return out
	}
	pool := bgp.Attributes{Communities: []uint32{65535<<16 | 65281}}
	for i, want := range []map[string]bgp.Attributes{
		{"10.1.0.1": {Communities: []uint32{65535<<16 | 65281, 65000<<16 | 1}, MED: 10, HasMED: true, Prepend: 2}, "2001:db8::1": {}},
		{"10.1.0.1": pool, "2001:db8::1": {}},
		{"2001:db8::1": {}},
	} {
		if got := sent(sels[i]); !reflect.DeepEqual(got, want) {
			t.Errorf("router %s is sent %+v, want %+v", cfg.BGP.Peers[peers[i][0]].Address, got, want)
		}
	}
}

// A bgp pool with an l2 section (MetalLB's pool with both advertisements)
// is a path to the routers and answered on its interface too.
func TestBGPPoolAnsweredOnLayer2Too(t *testing.T) {
	cfg := parse(t, "reject")
	cfg.LoadBalancer.Pools[0].L2 = &config.PoolL2{Interface: "eth1"}
	in := Input{LoadBalancer: &cfg.LoadBalancer,
		Nodes:    Judge([]*v1.Node{node("a", "10.0.0.1"), node("b", "10.0.0.2")}, inventory.New(cfg.Inventory), nil),
		Services: []Service{held("ns", "web", "10.1.0.1")}}
	st := Compute(in)
	var paths []string
	for _, p := range st.Paths(config.PathSelection{MaximumPaths: config.DefaultMaximumPaths}) {
		paths = append(paths, fmt.Sprint(p.Prefix, p.NextHops))
	}
	if want := []string{"10.1.0.1/32 [10.0.0.1 10.0.0.2]"}; !slices.Equal(paths, want) {
		t.Errorf("BGP paths %v, want %v", paths, want)
	}
	if l2 := st.Layer2(); len(l2) != 1 || l2[0].Addr.String() != "10.1.0.1" || !slices.Equal(l2[0].Interfaces, []string{"eth1"}) {
		t.Errorf("layer 2 VIPs %+v, want 10.1.0.1 on eth1", l2)
	}
	if st.Interfaces["eth1"] != "loadBalancer.pools[0].l2.interface" {
		t.Errorf("interfaces %v", st.Interfaces)
	}
}
