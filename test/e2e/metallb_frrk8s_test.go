package e2e

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/config"
	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/test/framework"
)

var updateFRRK8sDump = flag.Bool("update-frrk8s-dump", false, "write the dump of TestMetalLBInFRRK8sModeConverts to test/docs/testdata")

const frrK8sNS = "frr-k8s-system"

// A leaf-spine site's MetalLB in FRR-K8s mode: a pool for the Namespaces
// labelled team=web, a dual-stack pool for the rest, and a ToR per rack
// (rack r1: nodes 1 and 2, r2: 3 and 4) that the speakers of that rack's
// nodes peer with over multihop eBGP with BFD.
const metallbFRRK8sResources = `apiVersion: metallb.io/v1beta1
kind: IPAddressPool
metadata: {name: web, namespace: metallb-system}
spec:
  addresses: [10.0.110.0/26]
  serviceAllocation: {priority: 10, namespaceSelectors: [{matchLabels: {team: web}}]}
---
apiVersion: metallb.io/v1beta1
kind: IPAddressPool
metadata: {name: rest, namespace: metallb-system}
spec:
  addresses: [10.0.110.64/26, "2001:db8:110::/120"]
  serviceAllocation: {namespaces: [mf-apps]}
---
apiVersion: metallb.io/v1beta1
kind: BFDProfile
metadata: {name: multihop, namespace: metallb-system}
spec: {receiveInterval: 300, transmitInterval: 300, detectMultiplier: 3, minimumTtl: 253}
---
apiVersion: metallb.io/v1beta1
kind: BGPAdvertisement
metadata: {name: routed, namespace: metallb-system}
spec: {ipAddressPools: [web, rest]}
---
apiVersion: metallb.io/v1beta2
kind: BGPPeer
metadata: {name: tor-r1, namespace: metallb-system}
spec: {myASN: 64512, peerASN: 64601, peerAddress: 10.1.0.1, ebgpMultiHop: true, bfdProfile: multihop, enableGracefulRestart: true, dualStackAddressFamily: true, nodeSelectors: [{matchLabels: {rack: r1}}]}
---
apiVersion: metallb.io/v1beta2
kind: BGPPeer
metadata: {name: tor-r2, namespace: metallb-system}
spec: {myASN: 64512, peerASN: 64602, peerAddress: 10.2.0.1, ebgpMultiHop: true, bfdProfile: multihop, enableGracefulRestart: true, dualStackAddressFamily: true, nodeSelectors: [{matchLabels: {rack: r2}}]}
`

// The site's own FRRConfiguration: a border router sent pool web.
const siteFRRConfiguration = `apiVersion: frrk8s.metallb.io/v1beta1
kind: FRRConfiguration
metadata: {name: border, namespace: frr-k8s-system}
spec:
  bgp:
    routers:
    - asn: 64512
      prefixes: [10.0.110.0/26]
      neighbors:
      - {address: 10.9.0.1, asn: 64700, ebgpMultiHop: true, toAdvertise: {allowed: {mode: all}}}
`

// TestMetalLBInFRRK8sModeConverts runs MetalLB v0.16 (its controller and
// a speaker per node, built from its module) in FRR-K8s mode, its default:
// the speakers write an FRRConfiguration per node with their rack's ToR.
// The site adds a border router of its own. The page's commands for
// FRR-K8s mode dump and convert it: each rack's ToR is a peer sent its
// rack's nodes, the border router is sent pool web alone, the pools keep
// their namespace selector and both families, and MetalLB's per-node
// configurations add nothing. (No FRR-K8s daemon runs: MetalLB writes its
// FRRConfigurations without one, and the dump is what is converted.)
func TestMetalLBInFRRK8sModeConverts(t *testing.T) {
	ctx := context.Background()
	l := newLab(t, "mf")
	router := l.router("router", "10.0.0.1/24")
	var nodes []*recipeNode
	for i := 1; i <= 4; i++ {
		n := &recipeNode{name: fmt.Sprintf("mf-n%d", i), ip4: fmt.Sprintf("10.0.0.4%d", i)}
		n.ns = l.host(router, fmt.Sprintf("n%d", i), "10.0.0.1", n.ip4+"/24")
		node := framework.KubeletNode(n.name, "")
		node.Labels = map[string]string{"rack": fmt.Sprintf("r%d", (i+1)/2)}
		if err := framework.RegisterNodeObject(ctx, cluster.Admin, node, true, []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: n.ip4}}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cluster.Admin.CoreV1().Nodes().Delete(ctx, n.name, metav1.DeleteOptions{}) })
		nodes = append(nodes, n)
	}
	mod, err := framework.FRRK8sModuleDir()
	if err != nil {
		t.Fatal(err)
	}
	if err := cluster.Apply(ctx, filepath.Join(mod, "config", "crd", "bases", "frrk8s.metallb.io_frrconfigurations.yaml")); err != nil {
		t.Fatal(err)
	}
	framework.CreateNamespace(t, cluster.Admin, frrK8sNS)
	mlb := installMetalLB(t, nodes, metallbFRRK8sResources)
	mlb.speakerEnv = []string{"METALLB_BGP_TYPE=frr-k8s", "FRRK8S_NAMESPACE=" + frrK8sNS}
	mlb.startController()
	mlb.startSpeakers()
	framework.CreateNamespace(t, cluster.Admin, "mf-web")
	if _, err := cluster.Admin.CoreV1().Namespaces().Patch(ctx, "mf-web", types.MergePatchType, []byte(`{"metadata":{"labels":{"team":"web"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.CreateNamespace(t, cluster.Admin, "mf-apps")
	// Nothing of this site is left for the next test's MetalLB or CCM.
	t.Cleanup(func() {
		framework.ForgetService(cluster.Admin, "mf-web", "web")
		framework.ForgetService(cluster.Admin, "mf-apps", "dual")
		if out, err := cluster.Kubectl("delete", "frrconfigurations.frrk8s.metallb.io", "--all", "-n", frrK8sNS, "--wait"); err != nil {
			t.Errorf("deleting the FRRConfigurations: %v %s", err, out)
		}
	})
	names := []string{"mf-n1", "mf-n2", "mf-n3", "mf-n4"}
	framework.CreateLBService(t, cluster.Admin, "mf-web", "web", nil)
	framework.WriteEndpointSlice(t, cluster.Admin, "mf-web", "web", names...)
	framework.CreateLBService(t, cluster.Admin, "mf-apps", "dual", func(s *v1.Service) {
		s.Spec.IPFamilyPolicy = ptr(v1.IPFamilyPolicyRequireDualStack)
		s.Spec.IPFamilies = []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol}
	})
	framework.WriteEndpointSlice(t, cluster.Admin, "mf-apps", "dual", names...)
	web := framework.WaitIngress(t, cluster.Admin, "mf-web", "web", 1)
	dual := framework.WaitIngress(t, cluster.Admin, "mf-apps", "dual", 2)

	// MetalLB's speakers write each node's FRRConfiguration: its rack's
	// ToR, sent the VIPs.
	frrConfigs := dynamic.NewForConfigOrDie(cluster.AdminConfig).Resource(schema.GroupVersionResource{Group: "frrk8s.metallb.io", Version: "v1beta1", Resource: "frrconfigurations"}).Namespace(frrK8sNS)
	for i, n := range nodes {
		tor := fmt.Sprintf("10.%d.0.1", (i+2)/2)
		framework.Eventually(t, framework.WaitTimeout, "MetalLB's FRRConfiguration of "+n.name, func() (bool, string) {
			u, err := frrConfigs.Get(ctx, "metallb-"+n.name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			routers, _, _ := unstructured.NestedSlice(u.Object, "spec", "bgp", "routers")
			text := fmt.Sprint(routers)
			return strings.Contains(text, tor) && strings.Contains(text, web[0]+"/32") && strings.Contains(text, dual[0]+"/32"), text
		})
	}
	site := filepath.Join(t.TempDir(), "border.yaml")
	if err := os.WriteFile(site, []byte(siteFRRConfiguration), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := cluster.Apply(ctx, site); err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	block, err := framework.MarkdownBlock(migrationPage, "MetalLB in FRR-K8s mode", "sh")
	if err != nil {
		t.Fatal(err)
	}
	framework.RunDocShell(t, cluster, dir, filepath.Dir(ccmBinary), block.Text)
	dump, err := os.ReadFile(filepath.Join(dir, "metallb.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if *updateFRRK8sDump {
		if err := os.WriteFile(filepath.Join(framework.RepoRoot(), "test", "docs", "testdata", "metallb-v0.16-frrk8s-dump.yaml"), dump, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out, err := os.ReadFile(filepath.Join(dir, "lb.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.ParseWithoutSecrets(out)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if problems := framework.FRRK8sSiteProblems(cfg); len(problems) > 0 {
		t.Errorf("the converted config:\n%s\n%s", strings.Join(problems, "\n"), out)
	}
}
