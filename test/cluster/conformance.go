package cluster

import (
	"encoding/xml"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/test/framework"
)

// The focus of upstream's LoadBalancer suite, in
// k8s.io/kubernetes/test/e2e/network/loadbalancer.go, and the part of it
// that fits CI: the externalTrafficPolicy Local group and the finalizer.
// Left out of CI: "should only target nodes with endpoints", which cannot
// pass on Nodes with addresses of both families (the lab's). It checks an
// IPv4 Service's healthCheckNodePort on every InternalIP of every node,
// and kube-proxy serves it on IPv4 only (each family's proxier binds its
// own family since kubernetes/kubernetes#137370; #114702).
const (
	LoadBalancerSuite = `\[Feature:LoadBalancer\]`
	LoadBalancerCI    = `LoadBalancers ExternalTrafficPolicy: Local \[Feature:LoadBalancer\] should (target all nodes with endpoints|work for type=LoadBalancer|work from pods)|load balancer cleanup finalizer`
	// Upstream has no dual-stack load-balancer spec (loadbalancer.go sets
	// no IP family); these of k8s.io/kubernetes/test/e2e/network/
	// dual_stack.go check what the CCM gives a dual-stack cluster: Nodes
	// with an address of each family (from the inventory), pods reached on
	// both across nodes (over the announced pod routes), Services of both.
	DualStackCI = `\[Feature:IPv6DualStack\] (should have at least one dual-stack node|should create pod, add ipv6 and ipv4 ip to pod ips|should be able to reach pod on ipv4 and ipv6 ip|should create service with ipv4,v6 cluster ip|Granular Checks: Services Secondary IP Family \[LinuxOnly\] should function for (pod|node)-Service: http)`
)

// RunE2E runs upstream's e2e.test with ginkgo on the specs matching focus,
// from the lab's client namespace (behind the router, where a client
// outside the cluster is) against the control-plane node's API server, as
// its admin, in procs parallel ginkgo processes. ginkgo's output goes to
// out, its JUnit report to dir.
func (l *Lab) RunE2E(focus, dir string, procs int, timeout time.Duration, out io.Writer) error {
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
		filepath.Join(bin, "ginkgo"), "--focus="+focus, "--timeout="+timeout.String(), "--no-color", fmt.Sprintf("--procs=%d", procs),
		"--junit-report="+filepath.Join(dir, "junit.xml"),
		filepath.Join(bin, "e2e.test"), "--",
		"--kubeconfig="+l.Nodes[0].Path("/etc/kubernetes/admin.conf"),
		"--provider=skeleton",
		"--kubectl-path="+filepath.Join(bin, "kubectl"),
		// The Deployment's second replica waits, Pending, for a second
		// control-plane node the lab does not have: one pod may be
		// Pending, and the suite waits for the system pods only a minute
		// (it waits out the whole timeout while any is not Ready).
		"--allowed-not-ready-nodes=1",
		"--system-pods-startup-timeout=1m",
		// The schedulable nodes: the workers. Only ginkgo's first process
		// would count them, and specs needing two nodes would skip
		// themselves in the others.
		fmt.Sprintf("--num-nodes=%d", len(l.Nodes)-1),
		"--report-dir="+dir)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = out, out
	return cmd.Run()
}

// Spec is one spec's result in a JUnit report of e2e.test.
type Spec struct {
	Name    string
	Seconds float64
	Result  string // passed, failed, skipped
	Message string
}

// Specs reads the specs that ran (or were skipped by a spec's own check)
// from a JUnit report; those the focus left out are not in it.
func Specs(junit string) ([]Spec, error) {
	raw, err := os.ReadFile(junit)
	if err != nil {
		return nil, err
	}
	var doc struct {
		Suites []struct {
			Cases []struct {
				Name    string  `xml:"name,attr"`
				Time    float64 `xml:"time,attr"`
				Status  string  `xml:"status,attr"`
				Failure *struct {
					Message string `xml:"message,attr"`
				} `xml:"failure"`
				Skipped *struct {
					Message string `xml:"message,attr"`
				} `xml:"skipped"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	if err := xml.Unmarshal(raw, &doc); err != nil {
		return nil, fmt.Errorf("%s: %w", junit, err)
	}
	var out []Spec
	for _, s := range doc.Suites {
		for _, c := range s.Cases {
			sp := Spec{Name: c.Name, Seconds: c.Time, Result: "passed"}
			switch {
			case c.Failure != nil:
				sp.Result, sp.Message = "failed", c.Failure.Message
			case c.Skipped != nil && strings.HasPrefix(c.Skipped.Message, "skipped - "):
				// Skipped by the spec itself (Skip(reason)).
				sp.Result, sp.Message = "skipped", strings.TrimPrefix(c.Skipped.Message, "skipped - ")
			case c.Skipped != nil || c.Status == "skipped" || c.Status == "pending":
				continue // not in the focus
			}
			out = append(out, sp)
		}
	}
	return out, nil
}

// Table is the specs as the README's table: spec, result, time.
func Table(specs []Spec) string {
	var b strings.Builder
	b.WriteString("| spec | result | time |\n|---|---|---|\n")
	for _, sp := range specs {
		res := sp.Result
		if sp.Message != "" {
			res += ": " + strings.Join(strings.Fields(sp.Message), " ")
		}
		fmt.Fprintf(&b, "| %s | %s | %.0f s |\n", sp.Name, res, sp.Seconds)
	}
	return b.String()
}
