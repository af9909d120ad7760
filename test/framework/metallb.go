package framework

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
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
