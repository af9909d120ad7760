package cluster

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/test/framework"
)

var (
	workers     = flag.Int("workers", 2, "worker nodes the lab starts with")
	noCloudFlag = flag.Bool("lab-without-cloud-provider", false, "make the lab as a site made its cluster before a CCM: kubelets without --cloud-provider=external (TestAdoptingARunningCluster needs it; the other tests need it off)")
)

// lab is the cluster every test of the package shares; the tests run one
// after the other, each leaving it as it found it.
var lab *Lab

// firstSeen is each Node as the API server first showed it: what the
// kubelet registered, before any controller touched it.
var firstSeen sync.Map

// ccmImage is the tarball `make image` wrote, and the name in it.
var ccmImage, ccmImageName string

// The release's image (make release) and the previous commit's (make
// previous), which the upgrade test goes from and to.
var (
	releaseImage  = filepath.Join(framework.RepoRoot(), "dist", "image.oci.tar")
	previousImage = filepath.Join(framework.RepoRoot(), "bin", "previous", "image.tar")
)

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(run(m))
}

func run(m *testing.M) int {
	ccmImage = filepath.Join(framework.RepoRoot(), "bin", "baremetal-cloud-controller-manager-image.tar")
	var err error
	if ccmImageName, err = ImageName(ccmImage); err != nil {
		fmt.Fprintf(os.Stderr, "the CCM's image (make image): %v\n", err)
		return 1
	}
	dir, err := os.MkdirTemp("", "baremetal-cluster-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	start := time.Now()
	l, err := upWatching(dir)
	if err != nil {
		fmt.Fprintf(os.Stderr, "bringing up the lab cluster (files in %s): %v\n", dir, err)
		return 1
	}
	fmt.Printf("lab cluster up in %s: %d nodes, files in %s\n", time.Since(start).Round(time.Second), len(l.Nodes), dir)
	lab = l
	code := m.Run()
	l.Stop()
	if code == 0 && os.Getenv("TEST_KEEP_FILES") == "" {
		os.RemoveAll(dir)
	}
	return code
}

// upWatching brings the lab up, recording each Node as first registered.
func upWatching(dir string) (*Lab, error) {
	for _, f := range []string{releaseImage, previousImage} {
		if _, err := os.Stat(f); err != nil {
			return nil, fmt.Errorf("%w (make release VERSION=%s, make previous)", err, "v0.1.0")
		}
	}
	up := Up
	if *noCloudFlag {
		up = UpWithoutCloudProvider
	}
	l, err := up(dir, 0, ccmImage, releaseImage, previousImage)
	if err != nil {
		return nil, err
	}
	informers := informers.NewSharedInformerFactory(l.Admin, 0)
	record := func(obj any) {
		if n, ok := obj.(*v1.Node); ok {
			firstSeen.LoadOrStore(n.Name, n.DeepCopy())
		}
	}
	informers.Core().V1().Nodes().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: record, UpdateFunc: func(_, obj any) { record(obj) }})
	informers.Start(l.stopping)
	informers.WaitForCacheSync(l.stopping)
	for i := 1; i <= *workers; i++ {
		if _, err := l.AddWorker(); err != nil {
			l.Stop()
			return nil, err
		}
	}
	return l, nil
}

// nodesInitialised waits until every Node has its provider ID, zone and
// addresses from the inventory, no uninitialized taint, and is Ready.
func nodesInitialised(t *testing.T, names ...string) {
	t.Helper()
	framework.Eventually(t, 3*time.Minute, "every Node initialised and Ready", func() (bool, string) {
		for _, name := range names {
			n, err := lab.Admin.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			if n.Spec.ProviderID != "baremetal://"+name {
				return false, fmt.Sprintf("%s: providerID %q", name, n.Spec.ProviderID)
			}
			for _, taint := range n.Spec.Taints {
				if taint.Key == "node.cloudprovider.kubernetes.io/uninitialized" {
					return false, name + " still has the uninitialized taint"
				}
			}
			if z := n.Labels["topology.kubernetes.io/zone"]; z != "lab-"+name {
				return false, fmt.Sprintf("%s: zone %q", name, z)
			}
			// Both families, as the inventory lists them.
			for _, want := range append(nodeIPs(name), nodeIPs6(name)...) {
				if !slices.ContainsFunc(n.Status.Addresses, func(a v1.NodeAddress) bool {
					return a.Type == v1.NodeInternalIP && a.Address == want
				}) {
					return false, fmt.Sprintf("%s: addresses %v, want InternalIP %v from the inventory", name, n.Status.Addresses, want)
				}
			}
			if !ready(n) {
				return false, name + " is not Ready"
			}
		}
		return true, ""
	})
}

func ready(n *v1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == v1.NodeReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}

// registeredUninitialised checks that the kubelet registered the Node as
// kubelets do with --cloud-provider=external: NotReady, with the
// uninitialized taint, no provider ID.
func registeredUninitialised(t *testing.T, name string) {
	t.Helper()
	var v any
	framework.Eventually(t, 10*time.Second, "Node "+name+" seen", func() (bool, string) {
		var ok bool
		v, ok = firstSeen.Load(name)
		return ok, "not yet"
	})
	n := v.(*v1.Node)
	tainted := false
	for _, taint := range n.Spec.Taints {
		tainted = tainted || taint.Key == "node.cloudprovider.kubernetes.io/uninitialized"
	}
	if !tainted || ready(n) || n.Spec.ProviderID != "" {
		t.Errorf("Node %s first registered with taints %v, Ready %v, providerID %q; want the uninitialized taint, NotReady, none", name, n.Spec.Taints, ready(n), n.Spec.ProviderID)
	}
}
