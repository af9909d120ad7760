package cluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cloudapi "k8s.io/cloud-provider/api"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/test/framework"
)

// oobIP is the lab's out-of-band host, where the BMCs answer.
const oobIP = "10.252.0.240"

// TestPowerOffFencedByTheBMC is non-graceful node shutdown on a real
// cluster: a worker running a StatefulSet's pod loses power (its kubelet,
// containerd and containers killed at once) and its BMC, OpenIPMI's
// ipmi_sim on the lab's out-of-band host, says the chassis is off. First
// the BMC does not answer: the Node is NotReady, the CCM says the power is
// unknown and taints nothing, and the pod stays bound to the dead node.
// Then the BMC answers "off": after the grace period the CCM adds
// node.kubernetes.io/out-of-service, the control plane deletes the pod,
// and the StatefulSet runs it on another worker. Powered on, the node is
// Ready again, the taints go, and it runs pods again.
func TestPowerOffFencedByTheBMC(t *testing.T) {
	ctx := context.Background()
	cp, victim := lab.Nodes[0], lab.Nodes[len(lab.Nodes)-1]
	oob, err := lab.AddHost("oob", oobIP)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(oob.Delete)
	sim := framework.StartIPMISimIn(t, victim.Name, oob, oobIP)

	// The credentials as files beside the cloud config (the static pod
	// mounts /etc/baremetal), readable by the CCM's user only.
	secrets := cp.Path("/etc/baremetal/bmc")
	if err := os.MkdirAll(secrets, 0o700); err != nil {
		t.Fatal(err)
	}
	user, pass := sim.WriteCredentials(t, secrets)
	for _, f := range []string{secrets, user, pass} {
		if err := os.Chown(f, 65532, 65532); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { os.RemoveAll(secrets) })
	inPod := func(host string) string { return "/etc/baremetal/bmc/" + filepath.Base(host) }
	const grace = 10 * time.Second
	cfg := strings.Replace(lab.CloudConfig(), "inventory:\n",
		"inventory:\n  powerChecks: {interval: 2s, backgroundInterval: 30s, timeout: 1500ms}\n  outOfService: {enabled: true, gracePeriod: 10s}\n", 1)
	cfg = strings.Replace(cfg, "  - name: "+victim.Name+"\n", fmt.Sprintf("  - name: %s\n    bmc: {protocol: ipmi, address: %q, usernameFile: %s, passwordFile: %s}\n",
		victim.Name, sim.Addr, inPod(user), inPod(pass)), 1)
	mirror := runStaticPodCCM(t, cfg)
	nodesInitialised(t, nodeNames()...)

	const ns, name = "default", "db"
	statefulSet(t, ns, name, victim.Name)
	t.Cleanup(func() {
		lab.Admin.AppsV1().StatefulSets(ns).Delete(ctx, name, metav1.DeleteOptions{})
	})
	podOn(t, ns, name+"-0", func(node string) bool { return node == victim.Name }, time.Minute)

	// The power goes, and the BMC does not answer.
	sim.Stop()
	sim.SetPower(false)
	victim.PowerOff()
	off := time.Now()
	framework.Eventually(t, 2*time.Minute, victim.Name+" NotReady", func() (bool, string) {
		n, err := lab.Admin.CoreV1().Nodes().Get(ctx, victim.Name, metav1.GetOptions{})
		return err == nil && !ready(n), "still Ready"
	})
	notReady := time.Since(off)
	framework.Eventually(t, 30*time.Second, "the unknown power told on the Node", func() (bool, string) {
		return len(framework.Events(t, lab.Admin, "", victim.Name, "PowerStateUnknown")) > 0, "no PowerStateUnknown Event"
	})
	framework.Consistently(t, grace+10*time.Second, "no taint and the pod still bound to the dead node while the BMC does not answer", func() (bool, string) {
		n, err := lab.Admin.CoreV1().Nodes().Get(ctx, victim.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		if hasTaint(n, v1.TaintNodeOutOfService) || hasTaint(n, cloudapi.TaintNodeShutdown) {
			return false, fmt.Sprintf("taints %v", n.Spec.Taints)
		}
		p, err := lab.Admin.CoreV1().Pods(ns).Get(ctx, name+"-0", metav1.GetOptions{})
		return err == nil && p.Spec.NodeName == victim.Name, "the pod moved"
	})

	// The BMC answers: off.
	sim.Start()
	answered := time.Now()
	framework.Eventually(t, time.Minute, "the out-of-service and shutdown taints", func() (bool, string) {
		n, err := lab.Admin.CoreV1().Nodes().Get(ctx, victim.Name, metav1.GetOptions{})
		return err == nil && hasTaint(n, v1.TaintNodeOutOfService) && hasTaint(n, cloudapi.TaintNodeShutdown), fmt.Sprintf("taints %v", n.Spec.Taints)
	})
	tainted := time.Since(answered)
	podOn(t, ns, name+"-0", func(node string) bool { return node != "" && node != victim.Name }, 3*time.Minute)
	t.Logf("power off -> NotReady %s; BMC answers off -> out-of-service taint %s (grace %s) -> pod running on another worker %s; power off -> pod elsewhere %s",
		notReady.Round(time.Second), tainted.Round(time.Second), grace, time.Since(answered).Round(time.Second), time.Since(off).Round(time.Second))
	for _, reason := range []string{"PowerOff", "OutOfServiceTaintAdded"} {
		if len(framework.Events(t, lab.Admin, "", victim.Name, reason)) == 0 {
			t.Errorf("no %s Event on %s", reason, victim.Name)
		}
	}

	// Power on: the node boots, its kubelet reports Ready, the taints go.
	sim.SetPower(true)
	if err := victim.PowerOn(); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 3*time.Minute, victim.Name+" Ready without the taints", func() (bool, string) {
		n, err := lab.Admin.CoreV1().Nodes().Get(ctx, victim.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return ready(n) && !hasTaint(n, v1.TaintNodeOutOfService) && !hasTaint(n, cloudapi.TaintNodeShutdown), fmt.Sprintf("ready %v, taints %v", ready(n), n.Spec.Taints)
	})
	if len(framework.Events(t, lab.Admin, "", victim.Name, "OutOfServiceTaintRemoved")) == 0 {
		t.Errorf("no OutOfServiceTaintRemoved Event on %s", victim.Name)
	}
	// It serves again: a pod scheduled to it runs.
	pinned := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "back-on-" + victim.Name},
		Spec: v1.PodSpec{NodeSelector: map[string]string{"kubernetes.io/hostname": victim.Name},
			Containers: []v1.Container{{Name: "echo", Image: echoImage}}}}
	if _, err := lab.Admin.CoreV1().Pods(ns).Create(ctx, pinned, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lab.Admin.CoreV1().Pods(ns).Delete(ctx, pinned.Name, metav1.DeleteOptions{}) })
	podOn(t, ns, pinned.Name, func(node string) bool { return node == victim.Name }, 2*time.Minute)
	nodesInitialised(t, nodeNames()...)
	noForbidden(t, ccmLogs(t, mirror+"_"))
}

func hasTaint(n *v1.Node, key string) bool {
	return slices.ContainsFunc(n.Spec.Taints, func(t v1.Taint) bool { return t.Key == key })
}

// statefulSet runs one pod of the test server, preferring node.
func statefulSet(t *testing.T, ns, name, node string) {
	t.Helper()
	labels := map[string]string{"app": name}
	one := int32(1)
	s := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.StatefulSetSpec{
			Replicas: &one, ServiceName: name,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: v1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: v1.PodSpec{
					Containers: []v1.Container{{Name: "echo", Image: echoImage}},
					Affinity: &v1.Affinity{NodeAffinity: &v1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []v1.PreferredSchedulingTerm{{
						Weight: 100, Preference: v1.NodeSelectorTerm{MatchExpressions: []v1.NodeSelectorRequirement{{
							Key: "kubernetes.io/hostname", Operator: v1.NodeSelectorOpIn, Values: []string{node}}}}}}}},
				},
			},
		},
	}
	if _, err := lab.Admin.AppsV1().StatefulSets(ns).Create(context.Background(), s, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// podOn waits until the pod runs, ready, on a node where says yes.
func podOn(t *testing.T, ns, name string, where func(node string) bool, timeout time.Duration) {
	t.Helper()
	framework.Eventually(t, timeout, name+" running where wanted", func() (bool, string) {
		p, err := lab.Admin.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return p.Status.Phase == v1.PodRunning && p.DeletionTimestamp == nil && where(p.Spec.NodeName),
			fmt.Sprintf("on %q, phase %s, deleting %v", p.Spec.NodeName, p.Status.Phase, p.DeletionTimestamp != nil)
	})
}
