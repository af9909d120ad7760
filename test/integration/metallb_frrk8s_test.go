package integration

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/config"
	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/test/framework"
)

// A leaf-spine site's MetalLB in FRR-K8s mode: per-rack BGPPeers selecting
// their rack's nodes, multihop with BFD; the FRRConfiguration MetalLB
// writes for a node (as internal/bgp/frrk8s of MetalLB v0.16 names and
// selects it); and the site's own, adding a border router that is sent
// pool web.
const frrK8sSite = `apiVersion: v1
kind: Namespace
metadata: {name: frr-k8s-system}
---
apiVersion: metallb.io/v1beta1
kind: IPAddressPool
metadata: {name: web, namespace: metallb-system}
spec:
  addresses: [10.0.100.0/26]
  serviceAllocation: {namespaceSelectors: [{matchLabels: {team: web}}]}
---
apiVersion: metallb.io/v1beta1
kind: IPAddressPool
metadata: {name: rest, namespace: metallb-system}
spec: {addresses: [10.0.100.64/26, "2001:db8:100::/120"]}
---
apiVersion: metallb.io/v1beta1
kind: BFDProfile
metadata: {name: multihop, namespace: metallb-system}
spec: {receiveInterval: 300, transmitInterval: 300, detectMultiplier: 3, minimumTtl: 253}
---
apiVersion: metallb.io/v1beta1
kind: BGPAdvertisement
metadata: {name: all, namespace: metallb-system}
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
---
apiVersion: frrk8s.metallb.io/v1beta1
kind: FRRConfiguration
metadata: {name: metallb-node1, namespace: frr-k8s-system}
spec:
  nodeSelector: {matchLabels: {kubernetes.io/hostname: node1}}
  bgp:
    routers:
    - asn: 64512
      prefixes: [10.0.100.1/32]
      neighbors:
      - {address: 10.1.0.1, asn: 64601, ebgpMultiHop: true, toAdvertise: {allowed: {prefixes: [10.0.100.1/32]}}}
---
apiVersion: frrk8s.metallb.io/v1beta1
kind: FRRConfiguration
metadata: {name: border, namespace: frr-k8s-system}
spec:
  bgp:
    routers:
    - asn: 64512
      prefixes: [10.0.100.0/26]
      neighbors:
      - {address: 10.9.0.1, asn: 64700, ebgpMultiHop: true, holdTime: 30s, toAdvertise: {allowed: {mode: all}}}
`

// TestMetalLBInFRRK8sModeConverts dumps such a site from the API server
// with the commands docs/migration/metallb.md gives for FRR-K8s mode and
// converts it: the racks' peers keep their node selectors, the border
// router is sent pool web alone, MetalLB's advertisement goes to its
// BGPPeers, and MetalLB's own FRRConfiguration adds nothing.
func TestMetalLBInFRRK8sModeConverts(t *testing.T) {
	ctx := context.Background()
	c := suite.Cluster
	var crds []string
	for _, dir := range []func() (string, error){framework.MetalLBModuleDir, framework.FRRK8sModuleDir} {
		mod, err := dir()
		if err != nil {
			t.Fatal(err)
		}
		found, err := filepath.Glob(filepath.Join(mod, "config", "crd", "bases", "*.yaml"))
		if err != nil || len(found) == 0 {
			t.Fatalf("no CRDs in %s: %v", mod, err)
		}
		crds = append(crds, found...)
	}
	for _, crd := range crds {
		if err := c.Apply(ctx, crd); err != nil {
			t.Fatal(err)
		}
	}
	framework.CreateNamespace(t, c.Admin, "metallb-system")
	dir := t.TempDir()
	site := filepath.Join(dir, "site.yaml")
	if err := os.WriteFile(site, []byte(frrK8sSite), 0o644); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, framework.WaitTimeout, "the site's resources applied", func() (bool, string) {
		err := c.Apply(ctx, site)
		return err == nil, fmt.Sprint(err)
	})
	block, err := framework.MarkdownBlock("docs/migration/metallb.md", "MetalLB in FRR-K8s mode", "sh")
	if err != nil {
		t.Fatal(err)
	}
	framework.RunDocShell(t, c, dir, filepath.Dir(suite.Binary), block.Text)
	out, err := os.ReadFile(filepath.Join(dir, "lb.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.ParseWithoutSecrets(out)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	peers := map[string]config.Peer{}
	for _, p := range cfg.BGP.Peers {
		peers[p.Address] = p
	}
	for addr, rack := range map[string]string{"10.1.0.1": "r1", "10.2.0.1": "r2"} {
		p, ok := peers[addr]
		if !ok || p.NodeSelector == nil || p.NodeSelector.MatchLabels["rack"] != rack || p.BFD == nil || p.BFD.MinimumTTL != 253 {
			t.Errorf("peer %s: %+v, want rack %s's nodes and multihop BFD (minimumTTL 253)\n%s", addr, p, rack, out)
		}
	}
	if border, ok := peers["10.9.0.1"]; !ok || border.ASN != 64700 || len(peers) != 3 {
		t.Errorf("peers %v, want the two ToRs and the border router 10.9.0.1 (AS 64700)\n%s", slices.Sorted(maps.Keys(peers)), out)
	}
	sent := map[string][]string{}
	for _, a := range cfg.BGP.Advertisements {
		for _, p := range a.Peers {
			sent[p] = append(sent[p], a.Pools...)
		}
	}
	for peer, want := range map[string][]string{"10.1.0.1": {"web", "rest"}, "10.2.0.1": {"web", "rest"}, "10.9.0.1": {"web"}} {
		got := slices.Sorted(slices.Values(sent[peer]))
		if !slices.Equal(got, slices.Sorted(slices.Values(want))) {
			t.Errorf("%s is sent pools %v, want %v\n%s", peer, got, want, out)
		}
	}
}
