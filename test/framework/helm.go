package framework

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	sigsyaml "sigs.k8s.io/yaml"
)

// ShippedImage is the image deploy/ and the chart run by default: the
// chart's image.repository at its appVersion.
func ShippedImage() string {
	chart := filepath.Join(RepoRoot(), "deploy", "chart", "baremetal-cloud-controller-manager")
	var c struct{ AppVersion string }
	var v struct{ Image struct{ Repository string } }
	for file, into := range map[string]any{"Chart.yaml": &c, "values.yaml": &v} {
		b, err := os.ReadFile(filepath.Join(chart, file))
		if err == nil {
			err = sigsyaml.Unmarshal(b, into)
		}
		if err != nil {
			panic(err)
		}
	}
	return v.Image.Repository + ":" + c.AppVersion
}

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
