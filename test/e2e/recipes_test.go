package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/test/framework"
)

// The site docs/network/routers.md is written for: one subnet per family
// for the router, the control-plane host and the nodes.
const (
	recipesPage   = "docs/network/routers.md"
	recipeRouter4 = "10.0.0.1"
	recipeRouter6 = "2001:db8::1"
	recipeCP4     = "10.0.0.10"
	recipeCP6     = "2001:db8::10"
	// In the page's block of control-plane hosts, not running the CCM.
	recipeStranger4 = "10.0.0.11"
	recipeStranger6 = "2001:db8::11"
)

// What a stranger in the router's listen range announces, as `ip route`
// prints the prefixes: none may reach the router's table. The last of each
// family is inside the filters, and shows that the rest were processed.
var (
	strangerRejected = []string{"192.0.2.0/24", "10.0.100.0/24", "10.0.101.1", "10.244.0.0/16", "10.244.9.0/25",
		"2001:db8:dead::/48", "2001:db8:100::/120", "2001:db8:100::1:1", "fd00:10:244::/56", "fd00:10:244:9::/80"}
	strangerAccepted = []string{"10.0.100.250", "2001:db8:100::fa"}
)

type recipeNode struct {
	name, ip4, ip6, pod4, pod6 string
	ns                         *framework.Netns
}

// TestRouterRecipes runs each router recipe of the docs, read from the page
// as a user copies it, on the site the page describes: a CCM replica on a
// control-plane host of the subnet announces a dual-stack Service and the
// nodes' dual-stack pod CIDRs, and the router's kernel table must hold each
// VIP via every node and each pod CIDR via its node, in both families.
func TestRouterRecipes(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	l := newLab(t, "rc")
	router := l.router("router", recipeRouter4+"/24", recipeRouter6+"/64")
	// onSubnet is a host on the router's bridge with both addresses.
	onSubnet := func(name, ip4, ip6 string) *framework.Netns {
		return l.host(router, name, "", ip4+"/24", ip6+"/64")
	}
	cp := onSubnet("cp1", recipeCP4, recipeCP6)
	// Another control-plane host, where a stranger speaks BGP.
	cp2 := onSubnet("cp2", recipeStranger4, recipeStranger6)
	var nodes []*recipeNode
	for i := 1; i <= 2; i++ {
		n := &recipeNode{name: fmt.Sprintf("recipe-n%d", i), ip4: fmt.Sprintf("10.0.0.2%d", i), ip6: fmt.Sprintf("2001:db8::2%d", i),
			pod4: fmt.Sprintf("10.244.%d.0/24", i), pod6: fmt.Sprintf("fd00:10:244:%d::/64", i)}
		n.ns = onSubnet(fmt.Sprintf("n%d", i), n.ip4, n.ip6)
		hz, err := n.ns.ServeHealthz(n.ip4 + ":" + healthzPort)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { hz.Close() })
		nodes = append(nodes, n)
	}

	// The Nodes, initialised by the CCM, with a pod CIDR of each family.
	for _, n := range nodes {
		if err := framework.RegisterNode(ctx, cluster.Admin, n.name, "", true,
			[]v1.NodeAddress{{Type: v1.NodeInternalIP, Address: n.ip4}, {Type: v1.NodeInternalIP, Address: n.ip6}}); err != nil {
			t.Fatal(err)
		}
		patch, _ := json.Marshal(map[string]any{"spec": map[string]any{"podCIDR": n.pod4, "podCIDRs": []string{n.pod4, n.pod6}}})
		if _, err := cluster.Admin.CoreV1().Nodes().Patch(ctx, n.name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cluster.Admin.CoreV1().Nodes().Delete(ctx, n.name, metav1.DeleteOptions{}) })
	}
	// Deleted by the framework even though the last CCM replica of this
	// test has stopped: a Service left behind here, dual-stack, would be a
	// VIP without IPv6 next hops to every later test's CCM.
	framework.CreateLBService(t, cluster.Admin, "default", "recipe", func(svc *v1.Service) {
		svc.Spec.IPFamilyPolicy = ptr(v1.IPFamilyPolicyRequireDualStack)
		svc.Spec.IPFamilies = []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol}
	})

	// The CCM's config: the page's, and the inventory of this site.
	bgp, err := framework.MarkdownBlock(recipesPage, "Routers", "yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "cloud.yaml")
	if err := os.WriteFile(cfg, []byte(bgp.Text+inventory(nodes)), 0o644); err != nil {
		t.Fatal(err)
	}
	kubeconfig := l.kubeconfig(cp)

	for _, recipe := range []struct {
		heading, lang string
		start         func(t *testing.T, text string) (logs func() string, received func() (v4, v6 int, err error))
	}{
		{"FRR", "frr", func(t *testing.T, text string) (func() string, func() (int, int, error)) {
			f := (&lab{t: t, prefix: l.prefix}).frr(router, text)
			received := func() (v4, v6 int, err error) {
				// The CCM's session: FRR's count of what it accepted.
				count := func(family string) (int, error) {
					got, err := f.Received(family)
					return got[recipeCP4], err
				}
				if v4, err = count("ipv4"); err != nil {
					return
				}
				v6, err = count("ipv6")
				return
			}
			return f.Logs, received
		}},
		{"BIRD", "bird", func(t *testing.T, text string) (func() string, func() (int, int, error)) {
			b, err := framework.StartBIRD(router, t.TempDir(), text)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(b.Stop)
			logs := func() string {
				out, _ := b.Birdc("show", "protocols", "all")
				return b.Logs() + out
			}
			received := func() (v4, v6 int, err error) {
				// The CCM's session, the first to dial in: "Routes: N
				// imported" of each channel.
				out, err := b.Birdc("show", "protocols", "all", "ccm1")
				if err != nil {
					return 0, 0, err
				}
				channel := ""
				for _, line := range strings.Split(out, "\n") {
					fields := strings.Fields(line)
					switch {
					case len(fields) == 2 && fields[0] == "Channel":
						channel = fields[1]
					case len(fields) >= 3 && fields[0] == "Routes:" && fields[2] == "imported,":
						n, _ := strconv.Atoi(fields[1])
						if channel == "ipv4" {
							v4 = n
						} else if channel == "ipv6" {
							v6 = n
						}
					}
				}
				return v4, v6, nil
			}
			return logs, received
		}},
	} {
		t.Run(recipe.heading, func(t *testing.T) {
			block, err := framework.MarkdownBlock(recipesPage, recipe.heading, recipe.lang)
			if err != nil {
				t.Fatal(err)
			}
			logs, received := recipe.start(t, block.Text)
			ccm := framework.StartReplica(t, framework.CCM{
				Binary: ccmBinary, Name: "ccm-recipe", Kubeconfig: kubeconfig, CloudConfig: cfg, Netns: cp.Name,
				Env: []string{"POD_IP=" + recipeCP4},
				Args: []string{"--configure-cloud-routes=true", "--cluster-cidr=10.244.0.0/16,fd00:10:244::/56",
					"--route-reconciliation-period=2s"},
			})
			framework.WaitLeader(t, ccm)
			vips := framework.WaitIngress(t, cluster.Admin, "default", "recipe", 2)
			want := map[string][]string{}
			for _, vip := range vips {
				for _, n := range nodes {
					if strings.Contains(vip, ":") {
						want[vip] = append(want[vip], n.ip6)
					} else {
						want[vip] = append(want[vip], n.ip4)
					}
				}
			}
			for _, n := range nodes {
				want[n.pod4] = []string{n.ip4}
				want[n.pod6] = []string{n.ip6}
			}
			framework.Eventually(t, 90*time.Second, recipe.heading+" has every VIP via every node and every pod CIDR via its node, in both families", func() (bool, string) {
				v4, _ := router.IP("-4", "route")
				v6, _ := router.IP("-6", "route")
				for prefix, hops := range want {
					table := v4
					if strings.Contains(prefix, ":") {
						table = v6
					}
					got := routeLines(table, strings.TrimSuffix(strings.TrimSuffix(prefix, "/32"), "/128"))
					for _, h := range hops {
						if !strings.Contains(got, "via "+h+" ") {
							return false, fmt.Sprintf("%s: want via %v, the router's kernel has %q\n%s\n%s\nrouter: %s", prefix, hops, got, v4, v6, framework.Tail(logs(), 30))
						}
					}
					if len(hops) > 1 && strings.Count(got, "nexthop") != len(hops) {
						return false, fmt.Sprintf("%s: want one ECMP route via %v, have %q", prefix, hops, got)
					}
				}
				return true, ""
			})
			v4, _ := router.IP("-4", "route")
			v6, _ := router.IP("-6", "route")
			t.Logf("%s's kernel table:\n%s%s", recipe.heading, v4, v6)

			// The router's limit counts what it keeps from the session: a
			// route per path (per node for a VIP), as the page says.
			paths := len(nodes) + len(nodes) // the VIP via every node, a pod CIDR per node
			framework.Eventually(t, 30*time.Second, recipe.heading+" counts one route per path from the CCM", func() (bool, string) {
				got4, got6, err := received()
				return err == nil && got4 == paths && got6 == paths, fmt.Sprintf("IPv4 %d, IPv6 %d, want %d each (%v)", got4, got6, paths, err)
			})

			strangers(t, router, cp2, nodes[0], logs)
		})
	}
}

// strangers checks the recipe's gates with two other speakers: one on a
// control-plane address announces prefixes outside the pools and pod CIDRs
// (none may reach the router's table), one on a node's address tries to open
// a session (it must not get one).
func strangers(t *testing.T, router, cp2 *framework.Netns, node *recipeNode, logs func() string) {
	dir := t.TempDir()
	router4 := []framework.GoBGPNeighbor{{Address: recipeRouter4, ASN: 64500, Dial: true}}
	stranger, err := framework.StartGoBGPDIn(cp2, dir, "stranger", recipeStranger4, 64512, router4)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stranger.Stop)
	fromNode, err := framework.StartGoBGPDIn(node.ns, dir, "node-speaker", node.ip4, 64512, router4)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fromNode.Stop)
	framework.Eventually(t, 60*time.Second, "the stranger on a control-plane address has a session", func() (bool, string) {
		state, err := stranger.NeighborState(recipeRouter4)
		return state == "established", fmt.Sprint(state, " ", err)
	})
	// The accepted prefixes last: TCP keeps the order of the UPDATEs.
	for _, prefix := range append(append([]string{}, strangerRejected...), strangerAccepted...) {
		family, hop := "ipv4", recipeStranger4
		if strings.Contains(prefix, ":") {
			family, hop = "ipv6", recipeStranger6
		}
		if !strings.Contains(prefix, "/") {
			prefix += map[string]string{"ipv4": "/32", "ipv6": "/128"}[family]
		}
		if out, err := stranger.CLI("global", "rib", "-a", family, "add", prefix, "nexthop", hop); err != nil {
			t.Fatalf("%v %s", err, out)
		}
	}
	framework.Eventually(t, 30*time.Second, "the router has the stranger's prefixes inside the pools", func() (bool, string) {
		v4, _ := router.IP("-4", "route")
		v6, _ := router.IP("-6", "route")
		for _, prefix := range strangerAccepted {
			if routeLines(v4+v6, prefix) == "" {
				return false, prefix + " missing:\n" + v4 + v6
			}
		}
		return true, ""
	})
	v4, _ := router.IP("-4", "route")
	v6, _ := router.IP("-6", "route")
	for _, prefix := range strangerRejected {
		if got := routeLines(v4+v6, prefix); got != "" {
			t.Errorf("the router took %s from a stranger past the recipe's filters: %s", prefix, got)
		}
	}
	// The node's speaker has been dialling for as long as the stranger's
	// session took, and more.
	for range 10 {
		if state, _ := fromNode.NeighborState(recipeRouter4); state == "established" || state == "openconfirm" {
			t.Errorf("a speaker on node %s (%s) got a session (%s) from the recipe:\n%s", node.name, node.ip4, state, framework.Tail(logs(), 20))
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func ptr[T any](v T) *T { return &v }

// inventory is the cloud config's inventory of nodes, each with both of
// its addresses.
func inventory(nodes []*recipeNode) string {
	var b strings.Builder
	b.WriteString("inventory:\n  machines:\n")
	for _, n := range nodes {
		fmt.Fprintf(&b, "  - name: %s\n    addresses: [{type: InternalIP, address: %s}, {type: InternalIP, address: \"%s\"}]\n", n.name, n.ip4, n.ip6)
	}
	return b.String()
}
