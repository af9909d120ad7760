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
func MetalLBModuleDir() (string, error) {
	cmd := exec.Command("go", "mod", "download", "-json", "go.universe.tf/metallb")
	cmd.Dir = filepath.Join(RepoRoot(), "hack", "metallb")
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go mod download go.universe.tf/metallb: %w", err)
	}
	var m struct{ Dir string }
	if err := json.Unmarshal(out, &m); err != nil || m.Dir == "" {
		return "", fmt.Errorf("go mod download go.universe.tf/metallb: no directory in %s", out)
	}
	return m.Dir, nil
}
