package integration

import (
	"context"
	"fmt"
	"os"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cloudapi "k8s.io/cloud-provider/api"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/test/framework"
)

const waitTimeout = framework.WaitTimeout

// site is one test's CCM with its own cloud config.
type site struct {
	*framework.Site
	ccms []*framework.Process
}

func newSite(t *testing.T, cloudConfig string) *site {
	t.Helper()
	return &site{Site: suite.NewSite(t, cloudConfig)}
}

func (s *site) writeConfig(content string) { s.T.Helper(); s.WriteConfig(content) }

func (s *site) startCCM(name string, extraArgs ...string) *framework.Process {
	s.T.Helper()
	p := s.startReplica(name, extraArgs...)
	framework.WaitLeader(s.T, p)
	return p
}

func (s *site) startReplica(name string, extraArgs ...string) *framework.Process {
	s.T.Helper()
	p := s.StartReplica(name, extraArgs...)
	s.ccms = append(s.ccms, p)
	return p
}

func (s *site) waitLeader(p *framework.Process) { s.T.Helper(); framework.WaitLeader(s.T, p) }

// nodeSpec is a Node as a kubelet with --cloud-provider=external registers it.
type nodeSpec struct {
	name       string
	ready      bool
	providerID string
	addresses  []v1.NodeAddress
}

func createNode(t *testing.T, n nodeSpec) {
	t.Helper()
	framework.CreateNode(t, suite.Cluster.Admin, n.name, n.providerID, n.ready, n.addresses)
}

func setNodeStatus(t *testing.T, name string, ready bool, addresses []v1.NodeAddress) {
	t.Helper()
	if err := framework.SetNodeStatus(context.Background(), suite.Cluster.Admin, name, ready, addresses); err != nil {
		t.Fatal(err)
	}
}

func getNode(t *testing.T, name string) (*v1.Node, bool) {
	t.Helper()
	node, err := suite.Cluster.Admin.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return node, true
}

func hasTaint(n *v1.Node, key string) bool {
	return slices.ContainsFunc(n.Spec.Taints, func(t v1.Taint) bool { return t.Key == key })
}

// waitInitialized waits until the cloud node controller has taken the
// uninitialized taint off the Node, and returns it.
func waitInitialized(t *testing.T, name string) *v1.Node {
	t.Helper()
	var node *v1.Node
	framework.Eventually(t, waitTimeout, "Node "+name+" initialised", func() (bool, string) {
		n, ok := getNode(t, name)
		if !ok {
			return false, "the Node is gone"
		}
		node = n
		return !hasTaint(n, cloudapi.TaintExternalCloudProvider), fmt.Sprintf("taints %v", n.Spec.Taints)
	})
	return node
}

func events(t *testing.T, namespace, name, reason string) []v1.Event {
	t.Helper()
	return framework.Events(t, suite.Cluster.Admin, namespace, name, reason)
}

func removeFile(path string) error { return os.Remove(path) }

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
