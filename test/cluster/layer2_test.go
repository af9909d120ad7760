package cluster

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/test/framework"
)

// l2Pool is a layer 2 pool on the lab bridge, answered on the control-plane
// node's eth0, where the CCM runs with host networking.
const l2Pool = `  - name: lan
    addresses: [10.252.0.200-10.252.0.230, "fd00:252::200-fd00:252::230"]
    autoAssign: false
    announce: l2
    l2: {interface: eth0}
`

// layer2VIPs runs the CCM as the README says for layer 2 pools (the
// Deployment patched with deploy/l2-patch.yaml, an l2 pool in the cloud
// config) and asks its VIPs from the router, a host on the lab bridge:
// each, of both families (ARP for IPv4, NDP for IPv6), is answered with
// the MAC of a worker whose kube-proxy serves it from a pod on that worker
// (externalTrafficPolicy Local), and the VIPs spread over the workers.
func layer2VIPs(t *testing.T, ns string) {
	ctx := context.Background()
	setCloudConfig(t, strings.Replace(lab.CloudConfig(), "  pools:\n", "  pools:\n"+l2Pool, 1))
	patch, err := LabCopy("deploy/l2-patch.yaml", nil, "")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(lab.Dir, "l2-patch.yaml")
	if err := os.WriteFile(path, []byte(patch), 0o644); err != nil {
		t.Fatal(err)
	}
	// One control-plane node: the second replica is Pending, and a rolling
	// update could never replace the running one beside it (the README
	// says replicas: 1 there).
	if out, err := lab.Kubectl("-n", "kube-system", "scale", "deployment", "baremetal-cloud-controller-manager", "--replicas=1"); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	patched := time.Now()
	if out, err := lab.Kubectl("-n", "kube-system", "patch", "deployment", "baremetal-cloud-controller-manager", "--patch-file", path); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	var leader string
	framework.Eventually(t, 3*time.Minute, "a replica of the patched Deployment answering ARP", func() (bool, string) {
		pods, err := lab.Admin.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{LabelSelector: ccmSelector})
		if err != nil {
			return false, err.Error()
		}
		var seen []string
		for _, p := range pods.Items {
			if p.Spec.SecurityContext.RunAsUser != nil && *p.Spec.SecurityContext.RunAsUser == 0 &&
				strings.Contains(ccmLogs(t, p.Name), "Answering ARP and NDP") {
				leader = p.Name
				return true, ""
			}
			seen = append(seen, fmt.Sprintf("%s %s", p.Name, p.Status.Phase))
		}
		return false, fmt.Sprintf("CCM Pods %v", seen)
	})
	t.Logf("%s answers for layer 2 VIPs %s after the patch", leader, time.Since(patched).Round(time.Second))
	// Every replica answers from the start, a standby too; addresses are
	// given by the leader, which the patched Pod becomes once the replaced
	// Pod's Lease runs out (deploy/'s lease duration).
	framework.Eventually(t, 3*time.Minute, leader+" holding the Lease", func() (bool, string) {
		return strings.Contains(ccmLogs(t, leader), "Successfully acquired lease"), "not yet"
	})
	t.Logf("%s leads %s after the patch", leader, time.Since(patched).Round(time.Second))

	macs := map[string]string{} // MAC -> worker
	for _, n := range lab.Nodes[1:] {
		out, err := n.NS.IP("-br", "link", "show", "eth0")
		if err != nil {
			t.Fatal(err)
		}
		if f := strings.Fields(out); len(f) >= 3 {
			macs[f[2]] = n.Name
		}
	}
	podNodes, _ := echoPods(t, ns, "echo")
	carried := map[string]int{}
	for i := range 8 {
		name := fmt.Sprintf("echo-l2-%d", i)
		svc := framework.LBService(ns, name)
		svc.Annotations = map[string]string{"baremetal.cloudprovider.io/address-pool": "lan"}
		svc.Spec.Selector = map[string]string{"app": "echo"}
		svc.Spec.Ports = []v1.ServicePort{{Name: "echo", Protocol: v1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(8080)}}
		svc.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
		policy := v1.IPFamilyPolicyRequireDualStack
		svc.Spec.IPFamilyPolicy = &policy
		if _, err := lab.Admin.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		defer framework.ForgetService(lab.Admin, ns, name)
		for _, vip := range framework.WaitIngress(t, lab.Admin, ns, name, 2) {
			var pod, source string
			addr := net.JoinHostPort(vip, "80")
			framework.Eventually(t, time.Minute, addr+" answering the router", func() (bool, string) {
				var err error
				pod, source, err = askFrom(lab.Router, addr, 2*time.Second)
				return err == nil, fmt.Sprint(err)
			})
			out, _ := lab.Router.IP("neigh", "show", vip, "dev", "lab0")
			var mac string
			if f := strings.Fields(out); len(f) >= 3 && f[1] == "lladdr" {
				mac = f[2]
			}
			node := macs[mac]
			if node == "" || podNodes[pod] != node {
				t.Errorf("%s: the router holds %q (worker %q) and was answered by %s on %s; want the pod on the MAC's worker", vip, mac, node, pod, podNodes[pod])
			}
			gw := LabGW
			if strings.Contains(vip, ":") {
				gw = LabGW6
			}
			if source != gw {
				t.Errorf("%s: the pod saw the source %s, want the router's %s (Local policy keeps it)", vip, source, gw)
			}
			carried[node]++
		}
	}
	t.Logf("8 dual-stack layer 2 Services' 16 VIPs carried by %v", carried)
	if len(carried) < 2 {
		t.Errorf("every VIP on %v; want them spread over the workers", carried)
	}
}
