package integration

import (
	"os/exec"
	"strings"
	"testing"
)

func TestCommandLine(t *testing.T) {
	out, err := exec.Command(suite.Binary, "--version").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "baremetal-cloud-controller-manager v1.37.2+baremetal.") {
		t.Errorf("--version: %v %q", err, out)
	}
	out, err = exec.Command(suite.Binary, "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("--help: %v", err)
	}
	help := string(out)
	for _, want := range []string{
		"Usage:\n  baremetal-cloud-controller-manager [flags]",
		`--cloud-provider string`, `(default "baremetal")`,
		"--cloud-config", "--concurrent-pv-label-syncs", "--leader-elect",
		"cloud-node-controller, cloud-node-lifecycle-controller, node-route-controller, out-of-service-controller, pv-label-controller, service-lb-controller",
	} {
		if !strings.Contains(help, want) {
			t.Errorf("--help does not show %q", want)
		}
	}
}
