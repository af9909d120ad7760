// Package integration tests the real CCM binary against a real
// kube-apiserver and etcd, running as the ServiceAccount of deploy/ with
// only the rights deploy/rbac.yaml gives it.
package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/test/framework"
)

var (
	cluster *framework.Cluster
	// ccmBinary is the binary `make build` made.
	ccmBinary string
	// ccmKubeconfig authenticates as the deploy/ ServiceAccount.
	ccmKubeconfig string
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	var err error
	if ccmBinary, err = framework.BuildCCM(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if cluster, err = framework.StartCluster(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer cluster.Stop()
	if out, err := cluster.Kubectl("apply", "-f", filepath.Join(framework.RepoRoot(), "deploy", "rbac.yaml")); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	} else {
		fmt.Print(out)
	}
	ccmKubeconfig, err = cluster.ServiceAccountKubeconfig(context.Background(), "kube-system", "baremetal-cloud-controller-manager")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}
