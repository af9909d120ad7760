package provider

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	cloudprovider "k8s.io/cloud-provider"
	cloudapi "k8s.io/cloud-provider/api"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/config"
)

const eligibilityConfig = `
inventory:
  unlistedNodes: %s
  machines:
  - name: listed
    addresses: [{type: InternalIP, address: 10.0.0.1}, {type: InternalIP, address: "fd00::1"}]
  - name: bare
  - name: waiting
    addresses: [{type: InternalIP, address: 10.0.0.3}]
routes: {}
bgp: {localASN: 64512, routerID: 10.0.0.254}
`

const speaker = "bgp: {localASN: 64512, routerID: 10.0.0.254}\n"

// kubeletNode is a Node with the address its kubelet reported, Ready or
// not, initialised by the cloud or not.
func kubeletNode(name, addr string, ready, init bool) *v1.Node {
	n := node(name, "", v1.NodeAddress{Type: v1.NodeInternalIP, Address: addr})
	status := v1.ConditionFalse
	if ready {
		status = v1.ConditionTrue
	}
	n.Status.Conditions = []v1.NodeCondition{{Type: v1.NodeReady, Status: status}}
	if init {
		n.Spec.ProviderID = "baremetal://" + name
	} else {
		n.Spec.Taints = []v1.Taint{{Key: cloudapi.TaintExternalCloudProvider, Value: "true", Effect: v1.TaintEffectNoSchedule}}
	}
	return n
}

// withNodes gives the cloud's network a Node lister holding nodes.
func withNodes(t *testing.T, c *Cloud, nodes ...*v1.Node) {
	t.Helper()
	c.lb.cluster.nodes = nodeLister(t, nodes...)
	c.lb.leading.Store(true)
	close(c.lb.ready)
}

func nodeLister(t *testing.T, nodes ...*v1.Node) corelisters.NodeLister {
	t.Helper()
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for _, n := range nodes {
		if err := idx.Add(n); err != nil {
			t.Fatal(err)
		}
	}
	return corelisters.NewNodeLister(idx)
}

func clusterNodes() []*v1.Node {
	return []*v1.Node{
		kubeletNode("listed", "10.9.9.1", true, true),   // the inventory's addresses win
		kubeletNode("bare", "10.9.9.2", true, true),     // no inventory addresses: what it was initialised with
		kubeletNode("waiting", "10.9.9.3", true, false), // still tainted
		kubeletNode("stray", "10.9.9.4", true, true),    // initialised when unlisted Nodes were allowed
		kubeletNode("new", "10.9.9.5", true, false),     // unlisted, tainted
	}
}

func TestNextHopsAreInitialisedNodesAtCloudAddresses(t *testing.T) {
	for policy, want := range map[string][]string{
		"reject": {"bare 10.9.9.2", "listed 10.0.0.1 fd00::1"},
		"allow":  {"bare 10.9.9.2", "listed 10.0.0.1 fd00::1", "stray 10.9.9.4"},
	} {
		c := newCloud(t, fmt.Sprintf(eligibilityConfig, policy))
		withNodes(t, c, append(clusterNodes(), kubeletNode("down", "10.9.9.6", false, true))...)
		c.lb.mu.Lock()
		var got []string
		for _, n := range c.lb.judged().Carriers {
			got = append(got, strings.TrimSpace(n.Name+" "+strings.Trim(fmt.Sprint(n.IPs), "[]")))
		}
		c.lb.mu.Unlock()
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("unlistedNodes %s: next hops %q, want %q", policy, got, want)
		}
	}
}

func TestRoutesOnlyToInitialisedNodes(t *testing.T) {
	ctx := context.Background()
	c := newCloud(t, fmt.Sprintf(eligibilityConfig, "reject"))
	withNodes(t, c, clusterNodes()...)
	for i, n := range clusterNodes() {
		r := &cloudprovider.Route{TargetNode: types.NodeName(n.Name), DestinationCIDR: fmt.Sprintf("10.244.%d.0/24", i), TargetNodeAddresses: n.Status.Addresses}
		err := c.CreateRoute(ctx, "", "", r)
		switch n.Name {
		case "listed", "bare":
			if err != nil {
				t.Errorf("route to %s refused: %v", n.Name, err)
			}
		case "waiting", "new":
			if err == nil || !strings.Contains(err.Error(), "not initialised by the cloud") {
				t.Errorf("route to the tainted Node %s: error %v, want one that says it is not initialised", n.Name, err)
			}
		case "stray":
			if err == nil || !strings.Contains(err.Error(), "matches no machine") {
				t.Errorf("route to the unlisted Node %s: error %v, want one that says it is not in the inventory", n.Name, err)
			}
		}
	}
	var got []string
	for _, p := range desiredPaths(c) {
		got = append(got, fmt.Sprint(p.Prefix, p.NextHops))
	}
	slices.Sort(got)
	if want := []string{"10.244.0.0/24 [10.0.0.1]", "10.244.1.0/24 [10.9.9.2]"}; !slices.Equal(got, want) {
		t.Errorf("route paths %v, want %v", got, want)
	}

	// The listed machine leaves the inventory: its route is no longer
	// announced or listed, so the route controller marks its network
	// unavailable.
	withoutListed := strings.Replace(fmt.Sprintf(eligibilityConfig, "reject"), "  - name: listed\n    addresses: [{type: InternalIP, address: 10.0.0.1}, {type: InternalIP, address: \"fd00::1\"}]\n", "", 1)
	c.apply(mustParse(t, withoutListed))
	routes, err := c.ListRoutes(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(routes) != 1 || routes[0].TargetNode != "bare" {
		t.Errorf("routes listed after the machine left: %v", routes)
	}
}

func mustParse(t *testing.T, s string) *config.Config {
	t.Helper()
	cfg, err := config.Parse([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestANodeCredentialCannotRedirectTraffic: a Node's status is written by
// its kubelet, and so by anyone holding a node credential. Whatever it
// writes after the Node was initialised, or writes to point at the
// control plane's own host or a link-local service, is never a next hop,
// a route target or a health-check target; the Node says why.
func TestANodeCredentialCannotRedirectTraffic(t *testing.T) {
	for _, tc := range []struct {
		name   string
		policy string
		node   string // the Node whose status is written
		first  string // the address it was initialised with
		later  string // what its status says afterwards ("" for no change)
		want   string // its next hops afterwards
		reason string // the Event on the Node
	}{
		{name: "an address-less machine keeps what it was initialised with", policy: "reject", node: "bare", first: "10.9.9.2", want: "10.9.9.2"},
		{name: "an address-less machine rewritten", policy: "reject", node: "bare", first: "10.9.9.2", later: "10.9.9.77", want: "", reason: "NodeAddressesChanged"},
		{name: "an unlisted Node rewritten to the control plane's loopback", policy: "allow", node: "stray", first: "10.9.9.4", later: "127.0.0.1", want: "", reason: "NodeAddressesChanged"},
		{name: "an unlisted Node initialised with a loopback address", policy: "allow", node: "stray", first: "127.0.0.1", want: "", reason: "NodeAddressNotUsable"},
		{name: "a link-local address", policy: "allow", node: "stray", first: "169.254.169.254", want: "", reason: "NodeAddressNotUsable"},
		{name: "an unspecified address", policy: "reject", node: "bare", first: "0.0.0.0", want: "", reason: "NodeAddressNotUsable"},
		{name: "a multicast address", policy: "reject", node: "bare", first: "224.0.0.1", want: "", reason: "NodeAddressNotUsable"},
		{name: "a listed machine's status is ignored", policy: "reject", node: "listed", first: "10.9.9.1", later: "127.0.0.1", want: "10.0.0.1 fd00::1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCloud(t, fmt.Sprintf(eligibilityConfig, tc.policy)+"loadBalancer: {pools: [{name: p, addresses: [10.1.0.0/24]}]}\n")
			ev := recordEvents(c)
			n := kubeletNode(tc.node, tc.first, true, true)
			n.UID = "uid-1"
			withNodes(t, c, n)
			hops := func() string {
				c.lb.mu.Lock()
				c.lb.services["default/svc"] = &lbService{namespace: "default", name: "svc"}
				c.lb.mu.Unlock()
				if err := c.lb.converge(); err != nil {
					t.Fatal(err)
				}
				var got []string
				for _, e := range c.lb.last.Carrying {
					got = append(got, strings.Trim(fmt.Sprint(e.IPs), "[]"))
				}
				return strings.Join(got, " ")
			}
			hops()
			if tc.later != "" {
				rewritten := n.DeepCopy()
				rewritten.Status.Addresses = []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: tc.later}}
				c.lb.cluster.nodes = nodeLister(t, rewritten)
			}
			if got := hops(); got != tc.want {
				t.Errorf("next hops %q, want %q", got, tc.want)
			}
			// The checker probes the next hops, nothing else.
			for _, target := range c.lb.health.checker.Targets() {
				if tc.want == "" || !strings.Contains(tc.want, target.Addr.String()) {
					t.Errorf("health check target %v", target)
				}
			}
			said := strings.Join(ev.all, "\n")
			if tc.reason == "" && said != "" || tc.reason != "" && strings.Count(said, tc.reason) != 1 {
				t.Errorf("events %q, want one %s", said, tc.reason)
			}
			hops() // said once
			if again := strings.Join(ev.all, "\n"); again != said {
				t.Errorf("said again: %q", again)
			}
		})
	}
}

// A kubelet chooses its Node's name and addresses: a new Node that gives
// itself another machine's address does not become that machine (its
// provider ID, its inventory addresses, its place as a next hop) while the
// machine's own Node is there.
func TestANodeCannotClaimAnotherNodesMachine(t *testing.T) {
	c := newCloud(t, fmt.Sprintf(eligibilityConfig, "reject"))
	owner := kubeletNode("listed", "10.0.0.1", true, true)
	evil := kubeletNode("evil", "10.0.0.1", true, false)
	withNodes(t, c, owner, evil)
	close(c.lb.cluster.informed)
	ctx := context.Background()
	if md, err := c.InstanceMetadata(ctx, evil); err == nil {
		t.Errorf("a Node claiming another's machine by address was initialised as %s", md.ProviderID)
	}
	if md, err := c.InstanceMetadata(ctx, owner); err != nil || md.ProviderID != "baremetal://listed" {
		t.Errorf("the machine's own Node: %v %v", md, err)
	}
}

// A kubelet registers its Node NotReady, the CCM initialises it, and only
// then does the kubelet report Ready with its addresses: those are the
// addresses pinned, not the empty ones of the moment it was initialised.
func TestAddressesArePinnedWhenTheNodeIsFirstLookedAt(t *testing.T) {
	c := newCloud(t, fmt.Sprintf(eligibilityConfig, "allow")+"loadBalancer: {pools: [{name: p, addresses: [10.1.0.0/24]}]}\n")
	ev := recordEvents(c)
	registered := kubeletNode("stray", "10.9.9.4", false, true)
	registered.UID, registered.Status.Addresses = "uid-1", nil
	withNodes(t, c, registered)
	c.lb.services["default/svc"] = &lbService{namespace: "default", name: "svc"}
	if err := c.lb.converge(); err != nil {
		t.Fatal(err)
	}
	ready := kubeletNode("stray", "10.9.9.4", true, true)
	ready.UID = "uid-1"
	c.lb.cluster.nodes = nodeLister(t, ready)
	if err := c.lb.converge(); err != nil {
		t.Fatal(err)
	}
	if len(c.lb.last.Carrying) != 1 || c.lb.last.Carrying[0].IPs[0].String() != "10.9.9.4" {
		t.Errorf("carrying %v, want stray at 10.9.9.4", c.lb.last.Carrying)
	}
	if ev.has("Node stray NodeAddressesChanged") {
		t.Errorf("the addresses the kubelet reported after initialisation were taken for a rewrite: %v", ev.all)
	}
}
