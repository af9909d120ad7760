package framework

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/config"
)

// MetalLBModuleDir is where the Go module cache holds the MetalLB that
// hack/metallb pins (its CRDs and documented examples are read from
// there); the go command fetches it from the module proxy if missing.
func MetalLBModuleDir() (string, error) { return metallbModuleDir("go.universe.tf/metallb") }

// FRRK8sModuleDir is the same for the FRR-K8s that MetalLB requires (its
// FRRConfiguration samples).
func FRRK8sModuleDir() (string, error) { return metallbModuleDir("github.com/metallb/frr-k8s") }

func metallbModuleDir(module string) (string, error) {
	cmd := exec.Command("go", "mod", "download", "-json", module)
	cmd.Dir = filepath.Join(RepoRoot(), "hack", "metallb")
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go mod download %s: %w", module, err)
	}
	var m struct{ Dir string }
	if err := json.Unmarshal(out, &m); err != nil || m.Dir == "" {
		return "", fmt.Errorf("go mod download %s: no directory in %s", module, out)
	}
	return m.Dir, nil
}

// FRRK8sSiteProblems says how cfg differs from what the leaf-spine site
// of MetalLB in FRR-K8s mode (test/e2e's TestMetalLBInFRRK8sModeConverts,
// and its dump in test/docs/testdata) converts to: each rack's ToR sent
// its rack's nodes with multihop BFD, the site's border router sent pool
// web alone, the pools with their namespace selection and both families.
func FRRK8sSiteProblems(cfg *config.Config) []string {
	var problems []string
	peers := map[string]config.Peer{}
	for _, p := range cfg.BGP.Peers {
		peers[p.Address] = p
	}
	for addr, rack := range map[string]string{"10.1.0.1": "r1", "10.2.0.1": "r2"} {
		p, ok := peers[addr]
		if !ok || p.NodeSelector == nil || p.NodeSelector.MatchLabels["rack"] != rack || p.BFD == nil || p.BFD.MinimumTTL != 253 || len(p.AddressFamilies) != 2 {
			problems = append(problems, fmt.Sprintf("ToR %s: %+v, want rack %s's nodes, multihop BFD (minimumTTL 253), both families", addr, p, rack))
		}
	}
	if b, ok := peers["10.9.0.1"]; !ok || b.ASN != 64700 || len(peers) != 3 {
		problems = append(problems, fmt.Sprintf("peers %v, want the two ToRs and the border router 10.9.0.1 (AS 64700)", peers))
	}
	sent := map[string][]string{}
	for _, a := range cfg.BGP.Advertisements {
		for _, p := range a.Peers {
			sent[p] = append(sent[p], a.Pools...)
		}
	}
	for peer, want := range map[string][]string{"10.1.0.1": {"rest", "web"}, "10.2.0.1": {"rest", "web"}, "10.9.0.1": {"web"}} {
		if got := slices.Sorted(slices.Values(sent[peer])); !slices.Equal(got, want) {
			problems = append(problems, fmt.Sprintf("%s is sent pools %v, want %v", peer, got, want))
		}
	}
	pools := map[string]config.Pool{}
	for _, p := range cfg.LoadBalancer.Pools {
		pools[p.Name] = p
	}
	if p := pools["web"]; p.NamespaceSelector == nil || p.NamespaceSelector.MatchLabels["team"] != "web" {
		problems = append(problems, fmt.Sprintf("pool web: %+v, want the Namespaces labelled team=web", p))
	}
	if p := pools["rest"]; len(p.Addresses) != 2 || !slices.Equal(p.Namespaces, []string{"mf-apps"}) {
		problems = append(problems, fmt.Sprintf("pool rest: %+v, want both families for namespace mf-apps", p))
	}
	return problems
}
