package cluster

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/test/framework"
)

const adoptPage = "docs/operations/adopt.md"

// TestAdoptingARunningCluster follows docs/operations/adopt.md word for
// word on a cluster built as a site built it before it had a CCM: kubeadm
// without the kubelets' --cloud-provider=external, workloads running, a
// LoadBalancer Service that nothing serves. Every Node ends with its
// provider ID, zone and addresses from the inventory, no pod restarts,
// and the Service gets its VIP, which a client behind the router reaches.
// It needs its own lab (-lab-without-cloud-provider, which make
// cluster-test runs it with); the suite's lab is made with the flag.
func TestAdoptingARunningCluster(t *testing.T) {
	if lab.external {
		t.Fatal("this test needs the lab made without --cloud-provider=external: go test ./test/cluster -run TestAdoptingARunningCluster -args -lab-without-cloud-provider")
	}
	ctx := context.Background()
	framework.Eventually(t, 3*time.Minute, "every Node Ready, registered with no cloud: no provider ID, no uninitialized taint", func() (bool, string) {
		for _, name := range nodeNames() {
			n, err := lab.Admin.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			if n.Spec.ProviderID != "" || hasTaint(n, "node.cloudprovider.kubernetes.io/uninitialized") {
				t.Fatalf("%s registered as a kubelet with a cloud provider does: providerID %q, taints %v", name, n.Spec.ProviderID, n.Spec.Taints)
			}
			if !ready(n) {
				return false, name + " not Ready"
			}
		}
		return true, ""
	})

	// The site's workloads, and a LoadBalancer Service nothing serves.
	const ns, app = "default", "adopt-echo"
	echoDeployment(t, ns, app, int32(len(workerNames())))
	svc := framework.LBService(ns, app)
	svc.Spec.Selector = map[string]string{"app": app}
	svc.Spec.Ports = []v1.ServicePort{{Name: "echo", Protocol: v1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(8080)}}
	if _, err := lab.Admin.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	before := podsNow(t)

	// 1. Each kubelet in turn: the page's edit of its flags, run on the
	// node; the restart is the harness's (the lab's nodes have no
	// systemd).
	block, err := framework.MarkdownBlock(adoptPage, "1. Give each kubelet the flag, one node at a time", "sh")
	if err != nil {
		t.Fatal(err)
	}
	edit, restart, ok := strings.Cut(strings.TrimSpace(block.Text), "\n")
	if !ok || strings.TrimSpace(restart) != "systemctl restart kubelet" {
		t.Fatalf("%s:%d: the block is not the flags' edit then `systemctl restart kubelet`:\n%s", block.File, block.Line, block.Text)
	}
	for _, n := range lab.Nodes {
		if out, err := n.Run("sh", "-c", edit); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		if err := n.RestartKubelet(); err != nil {
			t.Fatal(err)
		}
		framework.Eventually(t, 2*time.Minute, n.Name+" Ready after its kubelet's restart, still with no taint", func() (bool, string) {
			node, err := lab.Admin.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
			if err == nil && hasTaint(node, "node.cloudprovider.kubernetes.io/uninitialized") {
				t.Fatalf("%s: its kubelet's restart with the flag tainted it: %v", n.Name, node.Spec.Taints)
			}
			return err == nil && ready(node), "not Ready"
		})
	}

	// 2. The page's taint, then the CCM as a Deployment (the README's).
	runPage(t, "2. Taint every Node, and install the CCM")
	if err := lab.InstallDeployment(ccmImageName); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		lab.Admin.CoreV1().Services(ns).Delete(ctx, app, metav1.DeleteOptions{})
		if err := lab.RemoveDeployment(); err != nil {
			t.Error(err)
		}
	})
	// 3. The page's wait; then what it says, checked: provider ID, zone,
	// the inventory's addresses of both families, no taint, Ready.
	runPage(t, "3. Wait until every Node is initialised")
	nodesInitialised(t, nodeNames()...)
	vip := framework.WaitIngress(t, lab.Admin, ns, app, 1)[0]
	answers(t, vip, 10)
	// No pod replaced, none restarted; but kube-proxy, which exits
	// whenever its Node's IPs change (upstream's design): here the
	// inventory adds each node's IPv6 address to the IPv4 one its kubelet
	// reported, so each restarts once, as the page says.
	after := podsNow(t)
	for name, was := range before {
		now, ok := after[name]
		switch {
		case !ok:
			t.Errorf("pod %s (UID %s) was replaced by the adoption", name, was.uid)
		case now.uid != was.uid:
			t.Errorf("pod %s was recreated by the adoption", name)
		case strings.HasPrefix(name, "kube-system/kube-proxy-") && now.restarts <= was.restarts+1:
		case now.restarts != was.restarts:
			t.Errorf("pod %s restarted %d times during the adoption", name, now.restarts-was.restarts)
		}
	}
}

type podState struct {
	uid      string
	restarts int32
}

// podsNow is every pod of the cluster but the CCM's, with its UID and
// its containers' restarts.
func podsNow(t *testing.T) map[string]podState {
	t.Helper()
	pods, err := lab.Admin.CoreV1().Pods("").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]podState{}
	for _, p := range pods.Items {
		if strings.HasPrefix(p.Name, "baremetal-cloud-controller-manager") {
			continue
		}
		st := podState{uid: string(p.UID)}
		for _, c := range p.Status.ContainerStatuses {
			st.restarts += c.RestartCount
		}
		out[p.Namespace+"/"+p.Name] = st
	}
	return out
}

// runPage runs the shell block under heading of the adoption page with
// kubectl against the lab.
func runPage(t *testing.T, heading string) {
	t.Helper()
	block, err := framework.MarkdownBlock(adoptPage, heading, "sh")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", "-euo", "pipefail", "-c", block.Text)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+lab.Kubeconfig, "PATH="+framework.ToolsBin()+":"+os.Getenv("PATH"))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s:%d, the page's commands failed: %v\n%s", block.File, block.Line, err, out)
	}
}
