package integration

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/test/framework"
)

// lbSite is a CCM whose BGP speaker peers with a real gobgpd on loopback.
type lbSite struct {
	*site
	peer *framework.GoBGPD
	ns   string
}

const lbConfig = `
inventory:
  unlistedNodes: allow
loadBalancer:
  pools:
  - name: public
    addresses: [192.0.2.0/28, "2001:db8:cafe::/124"]
    avoidBuggyIPs: true
    bgp:
      communities: ["64512:100"]
  - name: team
    addresses: ["198.51.100.10-198.51.100.20"]
    autoAssign: false
    namespaces: [%[1]s-team]
bgp:
  localASN: 64512
  routerID: 127.0.0.2
  peers:
  - address: 127.0.0.1
    port: %[2]d
    asn: 64500
    holdTime: 9s
    connectRetryTime: 1s
`

func newLBSite(t *testing.T, ns string) *lbSite {
	t.Helper()
	peer, err := framework.StartGoBGPD(t.TempDir(), "gobgpd", "127.0.0.1", 64500,
		[]framework.GoBGPNeighbor{{Address: "127.0.0.1", ASN: 64512, AddPath: true}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(peer.Stop)
	s := &lbSite{site: newSite(t, fmt.Sprintf(lbConfig, ns, peer.Port)), peer: peer, ns: ns}
	for _, name := range []string{ns, ns + "-team"} {
		createNamespace(t, name)
	}
	return s
}

func createNamespace(t *testing.T, name string) {
	t.Helper()
	_, err := cluster.Admin.CoreV1().Namespaces().Create(context.Background(), &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// lbNode registers a Node with an IPv4 and an IPv6 InternalIP.
func lbNode(t *testing.T, name string, ready bool, n int) {
	t.Helper()
	createNode(t, nodeSpec{name: name, ready: ready, addresses: []v1.NodeAddress{
		{Type: v1.NodeInternalIP, Address: fmt.Sprintf("203.0.113.%d", n)},
		{Type: v1.NodeInternalIP, Address: fmt.Sprintf("2001:db8:1::%d", n)},
	}})
}

func createLBService(t *testing.T, ns, name string, mutate func(*v1.Service)) {
	t.Helper()
	svc := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1.ServiceSpec{
			Type:     v1.ServiceTypeLoadBalancer,
			Selector: map[string]string{"app": name},
			Ports:    []v1.ServicePort{{Name: "http", Protocol: v1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(8080)}},
		},
	}
	if mutate != nil {
		mutate(svc)
	}
	if _, err := cluster.Admin.CoreV1().Services(ns).Create(context.Background(), svc, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating Service %s/%s: %v", ns, name, err)
	}
	// Runs before the CCM is stopped (cleanups run last-in first-out), so
	// that the CCM removes its finalizer.
	t.Cleanup(func() { forgetService(t, ns, name) })
}

// forgetService deletes a Service at the end of a test even when no CCM
// runs any more to remove its finalizer.
func forgetService(t *testing.T, ns, name string) {
	ctx := context.Background()
	services := cluster.Admin.CoreV1().Services(ns)
	if err := services.Delete(ctx, name, metav1.DeleteOptions{}); apierrors.IsNotFound(err) {
		return
	}
	time.Sleep(200 * time.Millisecond)
	if svc, err := services.Get(ctx, name, metav1.GetOptions{}); err == nil && len(svc.Finalizers) > 0 {
		svc.Finalizers = nil
		services.Update(ctx, svc, metav1.UpdateOptions{})
	}
}

// patchService applies a JSON merge patch to a Service.
func patchService(t *testing.T, ns, name, patch string) {
	t.Helper()
	if _, err := cluster.Admin.CoreV1().Services(ns).Patch(context.Background(), name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatalf("patching Service %s/%s with %s: %v", ns, name, patch, err)
	}
}

func deleteService(t *testing.T, ns, name string) {
	t.Helper()
	ctx := context.Background()
	err := cluster.Admin.CoreV1().Services(ns).Delete(ctx, name, metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		return
	}
	if err != nil {
		t.Errorf("deleting Service %s/%s: %v", ns, name, err)
	}
	framework.Eventually(t, waitTimeout, "Service "+ns+"/"+name+" deleted", func() (bool, string) {
		_, err := cluster.Admin.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
}

func ingress(t *testing.T, ns, name string) []string {
	t.Helper()
	svc, err := cluster.Admin.CoreV1().Services(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var ips []string
	for _, in := range svc.Status.LoadBalancer.Ingress {
		ips = append(ips, in.IP)
	}
	return ips
}

func waitIngress(t *testing.T, ns, name string, count int) []string {
	t.Helper()
	var ips []string
	framework.Eventually(t, waitTimeout, "Service "+ns+"/"+name+" has an external IP", func() (bool, string) {
		ips = ingress(t, ns, name)
		return len(ips) == count, fmt.Sprintf("ingress %v", ips)
	})
	return ips
}

// waitRoute waits until gobgpd has exactly these next hops for prefix
// (none: the prefix is withdrawn).
func (s *lbSite) waitRoute(prefix string, nextHops ...string) {
	s.t.Helper()
	family := "ipv4"
	if strings.Contains(prefix, ":") {
		family = "ipv6"
	}
	slices.Sort(nextHops)
	framework.Eventually(s.t, waitTimeout, fmt.Sprintf("gobgpd has %s via %v", prefix, nextHops), func() (bool, string) {
		rib, err := s.peer.RIB(family)
		if err != nil {
			return false, err.Error()
		}
		got := rib[prefix]
		slices.Sort(got)
		return slices.Equal(got, nextHops), fmt.Sprintf("%s via %v", prefix, got)
	})
}

func TestLoadBalancerAnnouncedToPeer(t *testing.T) {
	const ns = "lb-basic"
	s := newLBSite(t, ns)
	lbNode(t, "lb-1", true, 1)
	lbNode(t, "lb-2", true, 2)
	lbNode(t, "lb-3", false, 3)
	s.startCCM("ccm")
	createLBService(t, ns, "web", nil)

	ips := waitIngress(t, ns, "web", 1)
	if ips[0] != "192.0.2.1" {
		t.Errorf("web got %v, want 192.0.2.1 (the first address of pool public that is not .0)", ips)
	}
	s.waitRoute("192.0.2.1/32", "203.0.113.1", "203.0.113.2")
	out, err := cluster.Kubectl("-n", ns, "get", "svc", "web")
	if err != nil || !strings.Contains(out, "192.0.2.1") {
		t.Errorf("kubectl get svc does not show the external IP: %v\n%s", err, out)
	}

	// Readiness changes reach the router without a Service change.
	setNodeStatus(t, "lb-3", true, nil)
	s.waitRoute("192.0.2.1/32", "203.0.113.1", "203.0.113.2", "203.0.113.3")
	setNodeStatus(t, "lb-1", false, nil)
	s.waitRoute("192.0.2.1/32", "203.0.113.2", "203.0.113.3")

	// A restarted CCM rebuilds the allocation from the status: same address.
	createLBService(t, ns, "api", nil)
	apiIP := waitIngress(t, ns, "api", 1)[0]
	s.ccms[0].Kill()
	s.startCCM("ccm-restarted")
	createLBService(t, ns, "after-restart", nil)
	after := waitIngress(t, ns, "after-restart", 1)[0]
	if after == ips[0] || after == apiIP {
		t.Errorf("after a restart a new Service got %s, which web (%s) or api (%s) holds", after, ips[0], apiIP)
	}
	if got := ingress(t, ns, "web"); !slices.Equal(got, ips) {
		t.Errorf("web moved from %v to %v across a restart", ips, got)
	}
	s.waitRoute("192.0.2.1/32", "203.0.113.2", "203.0.113.3")
	s.waitRoute(apiIP+"/32", "203.0.113.2", "203.0.113.3")

	// The routes above may still be the killed leader's, kept by graceful
	// restart: wait for the new leader's session.
	framework.Eventually(t, waitTimeout, "the new leader's BGP metrics", func() (bool, string) {
		body := metrics(t, s.ccms[1])
		for _, want := range []string{`baremetal_bgp_peer_established{peer="127.0.0.1"} 1`, "baremetal_bgp_announced_paths 6", `baremetal_bgp_path_updates_total{operation="announce"}`} {
			if !strings.Contains(body, want) {
				return false, "/metrics lacks " + want
			}
		}
		return true, ""
	})

	deleteService(t, ns, "web")
	s.waitRoute("192.0.2.1/32")

	// A type change away from LoadBalancer withdraws and frees too.
	patchService(t, ns, "api", `{"spec":{"type":"ClusterIP"}}`)
	s.waitRoute(apiIP + "/32")
	createLBService(t, ns, "reuses", func(svc *v1.Service) {
		svc.Annotations = map[string]string{"baremetal.cloudprovider.io/load-balancer-ips": apiIP}
	})
	if got := waitIngress(t, ns, "reuses", 1); got[0] != apiIP {
		t.Errorf("the address api gave up was not free: reuses got %v", got)
	}
}

func readyEndpoints(t *testing.T, ns, svc string, nodes ...string) {
	t.Helper()
	ctx := context.Background()
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: svc + "-1", Labels: map[string]string{discoveryv1.LabelServiceName: svc}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080), Protocol: ptr.To(v1.ProtocolTCP)}},
	}
	for i, n := range nodes {
		slice.Endpoints = append(slice.Endpoints, discoveryv1.Endpoint{
			Addresses: []string{fmt.Sprintf("10.244.%d.10", i)}, NodeName: ptr.To(n),
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)},
		})
	}
	client := cluster.Admin.DiscoveryV1().EndpointSlices(ns)
	old, err := client.Get(ctx, slice.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = client.Create(ctx, slice, metav1.CreateOptions{})
	} else if err == nil {
		slice.ResourceVersion = old.ResourceVersion
		_, err = client.Update(ctx, slice, metav1.UpdateOptions{})
	}
	if err != nil {
		t.Fatalf("writing the EndpointSlice of %s/%s: %v", ns, svc, err)
	}
}

func TestLoadBalancerLocalTrafficPolicy(t *testing.T) {
	const ns = "lb-local"
	s := newLBSite(t, ns)
	lbNode(t, "local-1", true, 11)
	lbNode(t, "local-2", true, 12)
	lbNode(t, "local-3", true, 13)
	s.startCCM("ccm")
	readyEndpoints(t, ns, "local", "local-2")
	createLBService(t, ns, "local", func(svc *v1.Service) {
		svc.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
	})
	vip := waitIngress(t, ns, "local", 1)[0] + "/32"
	s.waitRoute(vip, "203.0.113.12")

	readyEndpoints(t, ns, "local", "local-1", "local-2")
	s.waitRoute(vip, "203.0.113.11", "203.0.113.12")

	// A node labelled out of load balancing is dropped.
	patch := fmt.Sprintf(`{"metadata":{"labels":{%q:"true"}}}`, v1.LabelNodeExcludeBalancers)
	if _, err := cluster.Admin.CoreV1().Nodes().Patch(context.Background(), "local-2", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	s.waitRoute(vip, "203.0.113.11")

	readyEndpoints(t, ns, "local")
	s.waitRoute(vip)
}

func TestLoadBalancerRequestedAddressesAndSharing(t *testing.T) {
	const ns = "lb-req"
	s := newLBSite(t, ns)
	lbNode(t, "req-1", true, 21)
	s.startCCM("ccm")
	createLBService(t, ns, "first", func(svc *v1.Service) {
		svc.Annotations = map[string]string{"baremetal.cloudprovider.io/load-balancer-ips": "192.0.2.9"}
	})
	if ips := waitIngress(t, ns, "first", 1); ips[0] != "192.0.2.9" {
		t.Errorf("requested 192.0.2.9, got %v", ips)
	}
	s.waitRoute("192.0.2.9/32", "203.0.113.21")

	refused := func(name, want string) {
		t.Helper()
		framework.Eventually(t, waitTimeout, name+" gets a Warning Event", func() (bool, string) {
			for _, ev := range events(t, ns, name, "SyncLoadBalancerFailed") {
				if ev.Type == v1.EventTypeWarning && strings.Contains(ev.Message, want) {
					return true, ""
				}
			}
			return false, "no SyncLoadBalancerFailed event with " + want
		})
		if ips := ingress(t, ns, name); len(ips) != 0 {
			t.Errorf("%s got %v despite the error", name, ips)
		}
	}
	createLBService(t, ns, "second", func(svc *v1.Service) { svc.Spec.LoadBalancerIP = "192.0.2.9" })
	refused("second", "192.0.2.9 is in use by Service "+ns+"/first")
	createLBService(t, ns, "wrong-ns", func(svc *v1.Service) {
		svc.Annotations = map[string]string{"baremetal.cloudprovider.io/address-pool": "team"}
	})
	refused("wrong-ns", `pool "team" is not for namespace "`+ns+`"`)
	createLBService(t, ns, "bad-ip", func(svc *v1.Service) {
		svc.Annotations = map[string]string{"baremetal.cloudprovider.io/load-balancer-ips": "192.0.2.300"}
	})
	refused("bad-ip", `annotation baremetal.cloudprovider.io/load-balancer-ips: "192.0.2.300" is not an IP address`)
	createLBService(t, ns, "no-pool", func(svc *v1.Service) {
		svc.Annotations = map[string]string{"baremetal.cloudprovider.io/address-pool": "gold"}
	})
	refused("no-pool", `there is no pool "gold" (pools: public, team)`)
	// The refusals changed nothing already announced.
	s.waitRoute("192.0.2.9/32", "203.0.113.21")
	if ips := ingress(t, ns, "first"); !slices.Equal(ips, []string{"192.0.2.9"}) {
		t.Errorf("first lost its address: %v", ips)
	}

	// The team pool, from its own namespace.
	createLBService(t, ns+"-team", "team-svc", func(svc *v1.Service) {
		svc.Annotations = map[string]string{"baremetal.cloudprovider.io/address-pool": "team"}
	})
	if ips := waitIngress(t, ns+"-team", "team-svc", 1); ips[0] != "198.51.100.10" {
		t.Errorf("team-svc got %v, want 198.51.100.10", ips)
	}

	// Sharing: one key, other ports share; a clashing port does not.
	share := func(name string, proto v1.Protocol, port int32) func(*v1.Service) {
		return func(svc *v1.Service) {
			svc.Annotations = map[string]string{"baremetal.cloudprovider.io/sharing-key": "dns-and-web"}
			svc.Spec.Ports = []v1.ServicePort{{Name: "p", Protocol: proto, Port: port}}
		}
	}
	createLBService(t, ns, "share-web", share("share-web", v1.ProtocolTCP, 443))
	createLBService(t, ns, "share-dns", share("share-dns", v1.ProtocolUDP, 53))
	createLBService(t, ns, "share-clash", share("share-clash", v1.ProtocolTCP, 443))
	web := waitIngress(t, ns, "share-web", 1)
	dns := waitIngress(t, ns, "share-dns", 1)
	clash := waitIngress(t, ns, "share-clash", 1)
	if web[0] != dns[0] {
		t.Errorf("same sharing key, other ports: %v and %v, want one address", web, dns)
	}
	if clash[0] == web[0] {
		t.Errorf("share-clash uses port 443/TCP like share-web but got its address %v", clash)
	}
	s.waitRoute(web[0]+"/32", "203.0.113.21")

	// The pool shrinks so that first's address falls outside: it keeps
	// serving, with a Warning Event.
	s.writeConfig(strings.Replace(fmt.Sprintf(lbConfig, ns, s.peer.Port), "192.0.2.0/28", "192.0.2.0/29", 1))
	framework.Eventually(t, waitTimeout, "first is told its address left the pools", func() (bool, string) {
		ev := events(t, ns, "first", "AddressOutsidePools")
		return len(ev) > 0 && strings.Contains(ev[0].Message, "192.0.2.9"), fmt.Sprintf("%d events", len(ev))
	})
	framework.Consistently(t, 3*time.Second, "first keeps 192.0.2.9 and its route", func() (bool, string) {
		rib, err := s.peer.RIB("ipv4")
		if err != nil {
			return false, err.Error()
		}
		return slices.Equal(ingress(t, ns, "first"), []string{"192.0.2.9"}) && len(rib["192.0.2.9/32"]) == 1, fmt.Sprintf("RIB %v", rib)
	})
}

func TestLoadBalancerAnnounceNone(t *testing.T) {
	const ns = "lb-none"
	s := newLBSite(t, ns)
	s.writeConfig(strings.Replace(fmt.Sprintf(lbConfig, ns, s.peer.Port), "loadBalancer:\n", "loadBalancer:\n  announce: none\n", 1))
	lbNode(t, "none-1", true, 41)
	ccm := s.startCCM("ccm")
	createLBService(t, ns, "ipam-only", nil)
	waitIngress(t, ns, "ipam-only", 1)
	framework.Consistently(t, 3*time.Second, "nothing is announced", func() (bool, string) {
		rib, err := s.peer.RIB("ipv4")
		return err == nil && len(rib) == 0, fmt.Sprintf("RIB %v %v", rib, err)
	})
	if !ccm.LogContains("BGP announcements are off") {
		t.Errorf("the log does not say that announcements are off")
	}
}

func TestLoadBalancerDualStack(t *testing.T) {
	const ns = "lb-dual"
	s := newLBSite(t, ns)
	lbNode(t, "dual-1", true, 31)
	lbNode(t, "dual-2", true, 32)
	s.startCCM("ccm")
	createLBService(t, ns, "dual", func(svc *v1.Service) {
		svc.Spec.IPFamilyPolicy = ptr.To(v1.IPFamilyPolicyRequireDualStack)
		svc.Spec.IPFamilies = []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol}
	})
	ips := waitIngress(t, ns, "dual", 2)
	if ips[0] != "192.0.2.1" || ips[1] != "2001:db8:cafe::" {
		t.Errorf("dual-stack Service got %v, want [192.0.2.1 2001:db8:cafe::]", ips)
	}
	s.waitRoute("192.0.2.1/32", "203.0.113.31", "203.0.113.32")
	s.waitRoute("2001:db8:cafe::/128", "2001:db8:1::31", "2001:db8:1::32")
}
