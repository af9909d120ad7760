package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
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
	prefix := fmt.Sprintf("rc%d-", os.Getpid()%10000)
	newNS := func(name string) *framework.Netns {
		ns, err := framework.NewNetns(prefix + name)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(ns.Delete)
		return ns
	}
	run := func(ns *framework.Netns, args ...string) {
		t.Helper()
		if out, err := ns.IP(args...); err != nil {
			t.Fatalf("ip %v in %s: %v %s", args, ns.Name, err, out)
		}
	}
	router := newNS("router")
	run(router, "link", "add", "br0", "type", "bridge")
	run(router, "addr", "add", recipeRouter4+"/24", "dev", "br0")
	run(router, "-6", "addr", "add", recipeRouter6+"/64", "dev", "br0", "nodad")
	run(router, "link", "set", "br0", "up")
	// onSubnet is a host on the router's bridge with both addresses.
	onSubnet := func(name, ip4, ip6 string) *framework.Netns {
		ns := newNS(name)
		if err := framework.Veth(router, name, "", ns, "eth0", ""); err != nil {
			t.Fatal(err)
		}
		run(router, "link", "set", name, "master", "br0")
		run(ns, "addr", "add", ip4+"/24", "dev", "eth0")
		run(ns, "-6", "addr", "add", ip6+"/64", "dev", "eth0", "nodad")
		return ns
	}
	cp := onSubnet("cp1", recipeCP4, recipeCP6)
	var nodes []*recipeNode
	for i := 1; i <= 2; i++ {
		n := &recipeNode{name: fmt.Sprintf("recipe-n%d", i), ip4: fmt.Sprintf("10.0.0.1%d", i), ip6: fmt.Sprintf("2001:db8::1%d", i),
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
	var inv strings.Builder
	inv.WriteString("inventory:\n  machines:\n")
	for _, n := range nodes {
		fmt.Fprintf(&inv, "  - name: %s\n    addresses: [{type: InternalIP, address: %s}, {type: InternalIP, address: \"%s\"}]\n", n.name, n.ip4, n.ip6)
	}
	cfg := filepath.Join(dir, "cloud.yaml")
	if err := os.WriteFile(cfg, []byte(bgp.Text+inv.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(cluster.AdminConfig.Host)
	if err != nil {
		t.Fatal(err)
	}
	apiPort, err := cp.ForwardInto(u.Host)
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig, err := cluster.ServiceAccountKubeconfigVia(ctx, "kube-system", "baremetal-cloud-controller-manager", fmt.Sprintf("https://127.0.0.1:%d", apiPort))
	if err != nil {
		t.Fatal(err)
	}

	for _, recipe := range []struct {
		heading, lang string
		start         func(t *testing.T, text string) (logs func() string)
	}{
		{"FRR", "frr", func(t *testing.T, text string) func() string {
			// FRR's daemons run as user frr, who must reach the directory:
			// not one under the test's private temporary directory.
			frrDir, err := os.MkdirTemp("", "recipe-frr-")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.RemoveAll(frrDir) })
			f, err := framework.StartFRR(router, frrDir, text)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(f.Stop)
			return f.Logs
		}},
		{"BIRD", "bird", func(t *testing.T, text string) func() string {
			b, err := framework.StartBIRD(router, t.TempDir(), text)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(b.Stop)
			return func() string {
				out, _ := b.Birdc("show", "protocols", "all")
				return b.Logs() + out
			}
		}},
	} {
		t.Run(recipe.heading, func(t *testing.T) {
			block, err := framework.MarkdownBlock(recipesPage, recipe.heading, recipe.lang)
			if err != nil {
				t.Fatal(err)
			}
			logs := recipe.start(t, block.Text)
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
		})
	}
}

func ptr[T any](v T) *T { return &v }
