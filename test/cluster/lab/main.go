// Command lab brings up the real-cluster tests' cluster for a person, with
// the CCM installed as the Deployment, prints how to use it, and removes
// it all on Ctrl-C (make cluster; make cluster-down cleans up after a lab
// that was killed).
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/test/cluster"
	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/test/framework"
)

func main() {
	workers := flag.Int("workers", 2, "worker nodes")
	down := flag.Bool("down", false, "only remove what a killed lab left behind")
	flag.Parse()
	if *down {
		cluster.Down()
		os.RemoveAll(dir)
		return
	}
	if err := run(*workers); err != nil {
		fmt.Fprintln(os.Stderr, "lab:", err)
		os.Exit(1)
	}
}

// dir is the lab's files, at one place so that make cluster-down finds them.
var dir = filepath.Join(os.TempDir(), "baremetal-lab")

func run(workers int) error {
	image := filepath.Join(framework.RepoRoot(), "bin", "baremetal-cloud-controller-manager-image.tar")
	name, err := cluster.ImageName(image)
	if err != nil {
		return err
	}
	os.RemoveAll(dir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	start := time.Now()
	l, err := cluster.Up(dir, workers, image)
	if err != nil {
		return err
	}
	defer l.Stop()
	if err := l.InstallDeployment(name); err != nil {
		return err
	}
	fmt.Printf(`The lab cluster is up (%s): %d nodes, the CCM installed from deploy/ as a Deployment.

  export KUBECONFIG=%s
  kubectl get nodes -o wide
  ip netns exec %s vtysh --vty_socket %s -c 'show ip route bgp'   # the router
  ip netns exec %s bash                                    # a client behind the router

Logs of each node's containerd and kubelet: %s/<node>/. Ctrl-C removes it all.
`, time.Since(start).Round(time.Second), len(l.Nodes), l.Kubeconfig, l.Router.Name, filepath.Join(dir, "frr"), l.Client.Name, dir)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	<-sig
	return nil
}
