package cluster

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/test/framework"
)

// upstreamE2E runs, in one e2e.test, the part of upstream's LoadBalancer
// e2e suite that fits CI (LoadBalancerCI; make conformance runs all of it)
// and upstream's dual-stack specs of DualStackCI, against the CCM
// installed. Each must pass; fewer than the 4 + 6 running is a focus gone
// stale.
// focusSpecs is how many specs the focus matches in each minor's e2e.test
// (e2e.test --ginkgo.dry-run): upstream adds and renames specs.
var focusSpecs = map[int]int{37: 10, 36: 7, 35: 6}

func upstreamE2E(t *testing.T) {
	minor, err := framework.ServerMinor(lab.Admin)
	if err != nil {
		t.Fatal(err)
	}
	want, ok := focusSpecs[minor]
	if !ok {
		t.Fatalf("no count of the focus's specs for Kubernetes 1.%d: run its e2e.test --ginkgo.dry-run with the focus and add it", minor)
	}
	// The suite lets one node be unready (the Deployment's Pending
	// replica), and its specs that need two nodes skip themselves: every
	// worker must be schedulable first (a node back from an earlier test
	// keeps its unreachable taint a moment).
	framework.Eventually(t, 2*time.Minute, "every worker schedulable", func() (bool, string) {
		for _, name := range workerNames() {
			n, err := lab.Admin.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			if !ready(n) || n.Spec.Unschedulable || len(n.Spec.Taints) > 0 {
				return false, fmt.Sprintf("%s: ready %v, taints %v", name, ready(n), n.Spec.Taints)
			}
		}
		return true, ""
	})
	var out bytes.Buffer
	start := time.Now()
	dir := filepath.Join(lab.Dir, "e2e")
	focus := LoadBalancerCI + "|" + DualStackCI
	err = lab.RunE2E(focus, dir, 1, 40*time.Minute, io.MultiWriter(&out, os.Stdout))
	t.Logf("e2e.test ran %s", time.Since(start).Round(time.Second))
	if err != nil {
		t.Errorf("upstream's specs failed: %v (ginkgo's output above; JUnit report in %s)", err, dir)
	}
	specs, err := Specs(filepath.Join(dir, "junit.xml"))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", Table(specs))
	ran := 0
	for _, sp := range specs {
		if !strings.HasPrefix(sp.Name, "[It] ") {
			continue // the suite's set-up and reports
		}
		ran++
		// Our VIPs are real addresses: no spec has a reason to skip.
		if sp.Result != "passed" {
			t.Errorf("%s: %s %s", sp.Name, sp.Result, sp.Message)
		}
	}
	if ran != want {
		t.Errorf("%d specs ran, want %d: the focus %s matches other specs than it did", ran, want, focus)
	}
}
