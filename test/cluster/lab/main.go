// Command lab brings up the real-cluster tests' cluster for a person, with
// the CCM installed as the Deployment, prints how to use it, and removes
// it all on Ctrl-C (make cluster; make cluster-down cleans up after a lab
// that was killed). With -conformance it runs upstream's LoadBalancer e2e
// suite on it instead and removes it (make conformance).
package main

import (
	"errors"
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
	conformance := flag.Bool("conformance", false, "run upstream's LoadBalancer e2e suite, then remove the lab")
	focus := flag.String("focus", cluster.LoadBalancerSuite, "with -conformance, the specs to run (a ginkgo focus)")
	procs := flag.Int("procs", 4, "with -conformance, parallel ginkgo processes (the specs mostly wait)")
	flag.Parse()
	if *down {
		cluster.Down()
		os.RemoveAll(dir)
		return
	}
	if *conformance {
		if err := runSuite(*workers, *focus, *procs); err != nil {
			fmt.Fprintln(os.Stderr, "conformance:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(*workers); err != nil {
		fmt.Fprintln(os.Stderr, "lab:", err)
		os.Exit(1)
	}
}

// dir is the lab's files, at one place so that make cluster-down finds them.
var dir = filepath.Join(os.TempDir(), "baremetal-lab")

// up brings the lab up with the CCM installed as the Deployment.
func up(workers int) (*cluster.Lab, error) {
	image := filepath.Join(framework.RepoRoot(), "bin", "baremetal-cloud-controller-manager-image.tar")
	name, err := cluster.ImageName(image)
	if err != nil {
		return nil, err
	}
	os.RemoveAll(dir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	l, err := cluster.Up(dir, workers, image)
	if err != nil {
		return nil, err
	}
	if err := l.InstallDeployment(name); err != nil {
		l.Stop()
		return nil, err
	}
	return l, nil
}

// runSuite runs upstream's e2e specs matching focus on a new lab; the
// JUnit report stays in the lab's directory.
func runSuite(workers int, focus string, procs int) error {
	start := time.Now()
	l, err := up(workers)
	if err != nil {
		return err
	}
	defer l.Stop()
	// Session affinity holds only if the router sends a client's
	// connections to one node: hash by addresses (the kernel's default),
	// not by ports as the lab's own tests do to spread one client's
	// connections.
	if _, err := l.Router.Exec("sysctl", "-qw", "net.ipv4.fib_multipath_hash_policy=0"); err != nil {
		return err
	}
	fmt.Printf("lab up in %s: %d nodes; running upstream's e2e.test, focus %q\n", time.Since(start).Round(time.Second), len(l.Nodes), focus)
	start = time.Now()
	report := filepath.Join(dir, "e2e")
	err = l.RunE2E(focus, report, procs, 3*time.Hour, os.Stdout)
	took := time.Since(start).Round(time.Second)
	specs, jerr := cluster.Specs(filepath.Join(report, "junit.xml"))
	if jerr != nil {
		return errors.Join(err, jerr)
	}
	fmt.Printf("\n%s\ne2e.test ran %s on %s; JUnit report: %s\n", cluster.Table(specs), took, time.Now().UTC().Format("2006-01-02"), filepath.Join(report, "junit.xml"))
	return err
}

func run(workers int) error {
	start := time.Now()
	l, err := up(workers)
	if err != nil {
		return err
	}
	defer l.Stop()
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
