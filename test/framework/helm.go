package framework

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Helm runs the built helm from the repository root against the cluster
// of kubeconfig, with its cache, config and data in the test's temporary
// directories; it returns helm's standard output.
func Helm(t testing.TB, kubeconfig string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(filepath.Join(ToolsBin(), "helm"), args...)
	cmd.Dir = RepoRoot()
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig, "HELM_CACHE_HOME="+t.TempDir(),
		"HELM_CONFIG_HOME="+t.TempDir(), "HELM_DATA_HOME="+t.TempDir())
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		return out.String(), errors.New("helm " + strings.Join(args, " ") + ": " + err.Error() + "\n" + stderr.String())
	}
	return out.String(), nil
}
