package cluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/test/framework"
)

// The CCM as the README's static-pod section installs it on the
// control-plane node, next to kube-apiserver: a kubeconfig for the user
// system:cloud-controller-manager made with kubeadm, the cloud config in
// /etc/baremetal, deploy/static-pod.yaml (only the image name changed) in
// the kubelet's manifest directory. A worker that joins then is
// initialised by it, and a new Service's VIP serves the client.
func TestCCMAsAStaticPod(t *testing.T) {
	ctx := context.Background()
	mirror := runStaticPodCCM(t, lab.CloudConfig())

	// The cloud config lists the new worker before it joins, as an
	// inventory would.
	w, err := lab.AddWorker()
	if err != nil {
		t.Fatal(err)
	}
	registeredUninitialised(t, w.Name)
	nodesInitialised(t, w.Name)
	framework.Eventually(t, time.Minute, "the new worker's pod CIDR routed via it", func() (bool, string) {
		node, err := lab.Admin.CoreV1().Nodes().Get(ctx, w.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		hops := routerNextHops(node.Spec.PodCIDR)
		return slices.Equal(hops, []string{w.IP}), fmt.Sprintf("%s via %v", node.Spec.PodCIDR, hops)
	})

	const ns = "default"
	echoDeployment(t, ns, "echo-static", 2)
	vip := serviceFor(t, ns, "echo-static", "echo-static", false)
	pods, _ := answers(t, vip, 20)
	if len(pods) == 0 {
		t.Errorf("no answer from %s", vip)
	}
	noForbidden(t, ccmLogs(t, mirror+"_"))
}

// runStaticPodCCM runs the CCM as the README's static-pod section does,
// with cloudConfig in /etc/baremetal/cloud.yaml, until the test ends, and
// returns its mirror Pod's name once it is ready.
func runStaticPodCCM(t *testing.T, cloudConfig string) string {
	t.Helper()
	ctx := context.Background()
	cp := lab.Nodes[0]
	if err := lab.InstallStaticPodPrerequisites(); err != nil {
		t.Fatal(err)
	}
	kubeadm := filepath.Join(framework.ToolsBin(), "kubeadm")
	kubeconfig, err := cp.Run(kubeadm, "kubeconfig", "user", "--client-name=system:cloud-controller-manager", "--config", filepath.Join(cp.Dir, "init.yaml"))
	if err != nil {
		t.Fatalf("%v: %s", err, kubeconfig)
	}
	conf := cp.Path("/etc/kubernetes/cloud-controller-manager.conf")
	if err := os.WriteFile(conf, []byte(kubeconfig), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(conf, 65532, 65532); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cp.Path("/etc/baremetal/cloud.yaml"), []byte(cloudConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	pod, err := Manifest("deploy/static-pod.yaml", ccmImageName)
	if err != nil {
		t.Fatal(err)
	}
	manifest := cp.Path("/etc/kubernetes/manifests/baremetal-cloud-controller-manager.yaml")
	if err := os.WriteFile(manifest, []byte(pod), 0o600); err != nil {
		t.Fatal(err)
	}
	mirror := "baremetal-cloud-controller-manager-" + cp.Name
	t.Cleanup(func() {
		os.Remove(manifest)
		// Gone before the next test starts a CCM on the node's address.
		framework.Eventually(t, 2*time.Minute, "the static pod gone", func() (bool, string) {
			_, err := lab.Admin.CoreV1().Pods("kube-system").Get(ctx, mirror, metav1.GetOptions{})
			return err != nil, "still there"
		})
	})
	framework.Eventually(t, 2*time.Minute, "the static pod running", func() (bool, string) {
		p, err := lab.Admin.CoreV1().Pods("kube-system").Get(ctx, mirror, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, c := range p.Status.ContainerStatuses {
			if c.Ready {
				return true, ""
			}
		}
		return false, fmt.Sprintf("phase %s, containers %+v", p.Status.Phase, p.Status.ContainerStatuses)
	})
	return mirror
}
