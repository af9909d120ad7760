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
	c.net.nodes = nodeLister(t, nodes...)
	close(c.net.ready)
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
		c.net.mu.Lock()
		var got []string
		for _, n := range c.net.readyNodes() {
			got = append(got, strings.TrimSpace(n.name+" "+strings.Trim(fmt.Sprint(n.ips), "[]")))
		}
		c.net.mu.Unlock()
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
	c.net.mu.Lock()
	paths := c.net.routePaths()
	c.net.mu.Unlock()
	var got []string
	for _, p := range paths {
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
