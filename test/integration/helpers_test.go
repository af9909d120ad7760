package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	cloudapi "k8s.io/cloud-provider/api"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/test/framework"
)

const waitTimeout = 60 * time.Second

// site is one test's CCM with its own cloud config, laid out like a
// mounted ConfigMap.
type site struct {
	t      *testing.T
	config *framework.ConfigDir
	ccms   []*framework.Process
}

func newSite(t *testing.T, cloudConfig string) *site {
	t.Helper()
	s := &site{t: t, config: &framework.ConfigDir{Dir: t.TempDir(), File: "cloud.yaml"}}
	s.writeConfig(cloudConfig)
	return s
}

func (s *site) writeConfig(content string) {
	s.t.Helper()
	if err := s.config.Write(content); err != nil {
		s.t.Fatalf("writing the cloud config: %v", err)
	}
}

// startCCM starts one replica and waits until it leads.
func (s *site) startCCM(name string, extraArgs ...string) *framework.Process {
	s.t.Helper()
	p := s.startReplica(name, extraArgs...)
	s.waitLeader(p)
	return p
}

// startReplica starts one replica without waiting for it to lead.
func (s *site) startReplica(name string, extraArgs ...string) *framework.Process {
	s.t.Helper()
	p, err := framework.CCM{
		Binary:      ccmBinary,
		Dir:         s.t.TempDir(),
		Name:        name,
		Kubeconfig:  ccmKubeconfig,
		CloudConfig: s.config.Path(),
		Args:        extraArgs,
		Env:         []string{"POD_NAME=" + name, "POD_NAMESPACE=kube-system"},
	}.Start()
	if err != nil {
		s.t.Fatal(err)
	}
	s.ccms = append(s.ccms, p)
	s.t.Cleanup(func() {
		p.Stop()
		// The CCM runs with only the rights of deploy/rbac.yaml: anything
		// it was refused is a hole in those rules.
		if line := p.LogLine("forbidden"); line != "" {
			s.t.Errorf("%s was refused something by RBAC: %s", p.Name, line)
		}
		if s.t.Failed() {
			kept := filepath.Join(os.TempDir(), "baremetal-test-logs", s.t.Name()+"-"+p.Name+".log")
			os.MkdirAll(filepath.Dir(kept), 0o755)
			os.WriteFile(kept, []byte(p.Logs()), 0o644)
			s.t.Logf("log of %s (whole log kept in %s):\n%s", p.Name, kept, tail(p.Logs(), 120))
		}
	})
	return p
}

func (s *site) waitLeader(p *framework.Process) {
	s.t.Helper()
	framework.Eventually(s.t, waitTimeout, p.Name+" leads", func() (bool, string) {
		if done, err := p.Exited(); done {
			s.t.Fatalf("%s exited: %v\n%s", p.Name, err, tail(p.Logs(), 60))
		}
		return p.LogContains("Successfully acquired lease"), "no lease acquired yet"
	})
}

func tail(s string, lines int) string {
	l := strings.Split(s, "\n")
	if len(l) > lines {
		l = l[len(l)-lines:]
	}
	return strings.Join(l, "\n")
}

// nodeSpec is a Node as a kubelet with --cloud-provider=external registers it.
type nodeSpec struct {
	name       string
	ready      bool
	providerID string
	addresses  []v1.NodeAddress
}

func createNode(t *testing.T, n nodeSpec) {
	t.Helper()
	if err := framework.RegisterNode(context.Background(), cluster.Admin, n.name, n.providerID, n.ready, n.addresses); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		err := cluster.Admin.CoreV1().Nodes().Delete(context.Background(), n.name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting Node %s: %v", n.name, err)
		}
	})
}

func setNodeStatus(t *testing.T, name string, ready bool, addresses []v1.NodeAddress) {
	t.Helper()
	if err := framework.SetNodeStatus(context.Background(), cluster.Admin, name, ready, addresses); err != nil {
		t.Fatal(err)
	}
}

func getNode(t *testing.T, name string) (*v1.Node, bool) {
	t.Helper()
	node, err := cluster.Admin.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
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

// events returns the Events about an object with the given reason.
func events(t *testing.T, namespace, name, reason string) []v1.Event {
	t.Helper()
	sel := fields.Set{"involvedObject.name": name, "reason": reason}.AsSelector().String()
	list, err := cluster.Admin.CoreV1().Events(namespace).List(context.Background(), metav1.ListOptions{FieldSelector: sel})
	if err != nil {
		t.Fatal(err)
	}
	return list.Items
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
