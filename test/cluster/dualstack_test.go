package cluster

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/test/framework"
)

// dualStackService exposes the echo pods with a Service that requires both
// families: it gets a VIP of each, the router holds each via every worker's
// address of that family, and the client behind the router reaches a pod
// through each, over IPv6 as over IPv4, through kube-proxy on a real node.
func dualStackService(t *testing.T, ns string) {
	ctx := context.Background()
	const name = "echo-dual"
	svc := framework.LBService(ns, name)
	policy := v1.IPFamilyPolicyRequireDualStack
	svc.Spec.IPFamilyPolicy = &policy
	svc.Spec.IPFamilies = []v1.IPFamily{v1.IPv6Protocol, v1.IPv4Protocol}
	svc.Spec.Selector = map[string]string{"app": "echo"}
	svc.Spec.Ports = []v1.ServicePort{{Name: "echo", Protocol: v1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(8080)}}
	if _, err := lab.Admin.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	defer framework.ForgetService(lab.Admin, ns, name)
	vips := framework.WaitIngress(t, lab.Admin, ns, name, 2)
	pool4, pool6 := netip.MustParsePrefix(VIPPool), netip.MustParsePrefix(VIPPool6)
	var families []string
	for _, vip := range vips {
		a, err := netip.ParseAddr(vip)
		if err != nil {
			t.Fatalf("ingress %q: %v", vip, err)
		}
		switch {
		case a.Is6() && pool6.Contains(a):
			families = append(families, "IPv6")
		case a.Is4() && pool4.Contains(a):
			families = append(families, "IPv4")
		default:
			t.Errorf("ingress %s is in neither pool (%s, %s)", vip, VIPPool, VIPPool6)
		}
	}
	// The status lists the VIPs in the order of spec.ipFamilies.
	if !slices.Equal(families, []string{"IPv6", "IPv4"}) {
		t.Errorf("the ingress %v is of the families %v, want IPv6 then IPv4 as spec.ipFamilies says", vips, families)
	}
	for _, vip := range vips {
		want := nodeIPs(workerNames()...)
		if netip.MustParseAddr(vip).Is6() {
			want = nodeIPs6(workerNames()...)
		}
		framework.Eventually(t, time.Minute, vip+" at the router via every worker", func() (bool, string) {
			hops := routerNextHops(vip)
			return slices.Equal(hops, want), fmt.Sprintf("%s via %v, want %v", vip, hops, want)
		})
		addr := net.JoinHostPort(vip, "80")
		pods, _ := answers(t, vip, 20)
		t.Logf("%s: 20 connections answered by %v", addr, pods)
		if len(pods) < 2 {
			t.Errorf("20 connections to %s were answered by %v; want pods on both workers", addr, pods)
		}
	}
}
