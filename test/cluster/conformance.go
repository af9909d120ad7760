package cluster

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/test/framework"
)

// The focus of upstream's LoadBalancer suite, in
// k8s.io/kubernetes/test/e2e/network/loadbalancer.go, and the part of it
// that fits CI: the externalTrafficPolicy Local group and the finalizer.
const (
	LoadBalancerSuite = `\[Feature:LoadBalancer\]`
	LoadBalancerCI    = `LoadBalancers ExternalTrafficPolicy: Local|load balancer cleanup finalizer`
)

// RunE2E runs upstream's e2e.test with ginkgo on the specs matching focus,
// from the lab's client namespace (behind the router, where a client
// outside the cluster is) against the control-plane node's API server, as
// its admin. ginkgo's output goes to out, its JUnit report to dir.
func (l *Lab) RunE2E(focus, dir string, timeout time.Duration, out io.Writer) error {
	bin := framework.ToolsBin()
	for _, b := range []string{"ginkgo", "e2e.test", "kubectl"} {
		if _, err := os.Stat(filepath.Join(bin, b)); err != nil {
			return fmt.Errorf("%s not built: run `make e2e-tools`", b)
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	cmd := exec.Command("ip", "netns", "exec", l.Client.Name,
		filepath.Join(bin, "ginkgo"), "--focus="+focus, "--timeout="+timeout.String(), "--no-color",
		"--junit-report="+filepath.Join(dir, "junit.xml"),
		filepath.Join(bin, "e2e.test"), "--",
		"--kubeconfig="+l.Nodes[0].Path("/etc/kubernetes/admin.conf"),
		"--provider=skeleton",
		"--kubectl-path="+filepath.Join(bin, "kubectl"),
		// The Deployment's second replica waits, Pending, for a second
		// control-plane node the lab does not have.
		"--allowed-not-ready-nodes=1",
		"--report-dir="+dir)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = out, out
	return cmd.Run()
}
