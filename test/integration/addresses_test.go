package integration

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/test/framework"
)

// warned waits for a Warning Event of reason on the Service that says want.
func warned(t *testing.T, ns, name, reason, want string) {
	t.Helper()
	framework.Eventually(t, waitTimeout, ns+"/"+name+" gets a "+reason+" Event", func() (bool, string) {
		for _, ev := range events(t, ns, name, reason) {
			if ev.Type == v1.EventTypeWarning && strings.Contains(ev.Message, want) {
				return true, ""
			}
		}
		return false, "no " + reason + " Event with " + want
	})
}

// What a user sees of the address rules (README "How addresses are chosen
// and kept"): an address a Service keeps asking for never changes, an edit
// that breaks a share is refused with the address kept, and a key shares
// only between Services announced alike in one namespace.
func TestAddressesAreKeptAndSharedByTheRules(t *testing.T) {
	const ns = "lb-keep"
	s := newLBSite(t, ns)
	lbNode(t, "keep-1", true, 51)
	s.startCCM("ccm")

	// Single to dual stack and back: the IPv4 address stays.
	createLBService(t, ns, "grow", nil)
	v4 := waitIngress(t, ns, "grow", 1)[0]
	createLBService(t, ns, "other", func(svc *v1.Service) {
		svc.Spec.IPFamilyPolicy = ptr.To(v1.IPFamilyPolicyRequireDualStack)
		svc.Spec.IPFamilies = []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol}
	})
	waitIngress(t, ns, "other", 2)
	patchService(t, ns, "grow", `{"spec":{"ipFamilyPolicy":"RequireDualStack","ipFamilies":["IPv4","IPv6"]}}`)
	if got := waitIngress(t, ns, "grow", 2); got[0] != v4 {
		t.Errorf("turned dual-stack, grow moved from %s to %v", v4, got)
	}
	patchService(t, ns, "grow", `{"spec":{"ipFamilyPolicy":"SingleStack","ipFamilies":["IPv4"]}}`)
	if got := waitIngress(t, ns, "grow", 1); got[0] != v4 {
		t.Errorf("turned single-stack again, grow moved from %s to %v", v4, got)
	}

	// A share, then an edit that would break it: refused, address kept.
	keyed := func(port int32, proto v1.Protocol) func(*v1.Service) {
		return func(svc *v1.Service) {
			svc.Annotations = map[string]string{"baremetal.cloudprovider.io/sharing-key": "k"}
			svc.Spec.Ports = []v1.ServicePort{{Name: "p", Protocol: proto, Port: port}}
		}
	}
	createLBService(t, ns, "web", keyed(443, v1.ProtocolTCP))
	createLBService(t, ns, "dns", keyed(53, v1.ProtocolUDP))
	web, dns := waitIngress(t, ns, "web", 1), waitIngress(t, ns, "dns", 1)
	if web[0] != dns[0] {
		t.Fatalf("web %v and dns %v do not share", web, dns)
	}
	patchService(t, ns, "dns", `{"spec":{"ports":[{"name":"p","protocol":"UDP","port":53},{"name":"q","protocol":"TCP","port":443}]}}`)
	warned(t, ns, "dns", "SyncLoadBalancerFailed", "the Service keeps its address: "+web[0]+" is shared with Service "+ns+"/web, which also uses port 443/TCP")
	if got := ingress(t, ns, "dns"); !slices.Equal(got, web) {
		t.Errorf("after the refused edit dns holds %v, want %v", got, web)
	}

	// The same key in another namespace, or with another traffic policy,
	// gets an address of its own, and is told why.
	createLBService(t, ns+"-team", "tenant", keyed(8443, v1.ProtocolTCP))
	if got := waitIngress(t, ns+"-team", "tenant", 1); got[0] == web[0] {
		t.Errorf("a Service of another namespace shares %v under the same key", got)
	}
	warned(t, ns+"-team", "tenant", "SharingRefused", "of another namespace")
	createLBService(t, ns, "local", func(svc *v1.Service) {
		keyed(8080, v1.ProtocolTCP)(svc)
		svc.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
	})
	if got := waitIngress(t, ns, "local", 1); got[0] == web[0] {
		t.Errorf("an externalTrafficPolicy Local Service shares %v with Cluster ones", got)
	}
	warned(t, ns, "local", "SharingRefused", "whose externalTrafficPolicy is Cluster")

	// A requested address outside a newly named pool: refused as a fresh
	// request would be, address kept.
	createLBService(t, ns, "pinned", func(svc *v1.Service) {
		svc.Annotations = map[string]string{"baremetal.cloudprovider.io/load-balancer-ips": "192.0.2.9"}
	})
	waitIngress(t, ns, "pinned", 1)
	patchService(t, ns, "pinned", `{"metadata":{"annotations":{"baremetal.cloudprovider.io/address-pool":"team"}}}`)
	warned(t, ns, "pinned", "SyncLoadBalancerFailed", `requested address 192.0.2.9 is in pool "public", not in the requested pool "team"`)
	if got := ingress(t, ns, "pinned"); !slices.Equal(got, []string{"192.0.2.9"}) {
		t.Errorf("after the refused edit pinned holds %v", got)
	}
}

// A Service's status edited by hand to another Service's address does not
// take it at the next start: the Service whose address the CCM wrote keeps
// it, and the edited one is told and given another.
func TestHandEditedStatusDoesNotStealAtRestart(t *testing.T) {
	const ns = "lb-edit"
	s := newLBSite(t, ns)
	lbNode(t, "edit-1", true, 61)
	ccm := s.startCCM("ccm")
	createLBService(t, ns, "older", nil)
	waitIngress(t, ns, "older", 1)
	createLBService(t, ns, "younger", nil)
	taken := waitIngress(t, ns, "younger", 1)[0]
	ccm.Kill()

	writeStatus(t, ns, "older", taken, "")

	s.startCCM("ccm-restarted")
	warned(t, ns, "older", "AddressConflict", "claims an address another Service holds")
	framework.Eventually(t, waitTimeout, "older has an address of its own", func() (bool, string) {
		got := ingress(t, ns, "older")
		return len(got) == 1 && got[0] != taken, strings.Join(got, ",")
	})
	if got := ingress(t, ns, "younger"); !slices.Equal(got, []string{taken}) {
		t.Errorf("younger, whose address the CCM wrote, holds %v, want %s", got, taken)
	}
	s.waitRoute(taken+"/32", "203.0.113.61")
}

// A VIP that no eligible node can carry is said, not silently put in the
// status: here the only machine has no IPv6 address.
func TestVIPWithoutNextHopsIsReported(t *testing.T) {
	const ns = "lb-stranded"
	peer := framework.StartPeer(t)
	s := newSite(t, `
inventory:
  machines:
  - name: v4only-1
    addresses: [{type: InternalIP, address: 203.0.113.71}]
loadBalancer:
  # The nodes' addresses are not on this machine: nothing may dial them.
  healthCheck: {enabled: false}
  pools:
  - name: six
    addresses: ["2001:db8:beef::/124"]
`+framework.PeerConfig(peer))
	createNamespace(t, ns)
	createNode(t, nodeSpec{name: "v4only-1", ready: true, addresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "203.0.113.71"}}})
	ccm := s.startCCM("ccm")
	waitInitialized(t, "v4only-1")
	createLBService(t, ns, "six", func(svc *v1.Service) {
		svc.Spec.IPFamilyPolicy = ptr.To(v1.IPFamilyPolicySingleStack)
		svc.Spec.IPFamilies = []v1.IPFamily{v1.IPv6Protocol}
	})
	vip := waitIngress(t, ns, "six", 1)[0]
	warned(t, ns, "six", "VIPNotAnnounced", "address "+vip+" is not announced: no Ready, initialised node that may carry traffic has an IPv6 address")
	framework.Eventually(t, waitTimeout, "the metric counts it", func() (bool, string) {
		body := metrics(t, ccm)
		return strings.Contains(body, "baremetal_load_balancer_vips_without_next_hops 1"), "not in /metrics"
	})
}

// A share broken by a refused edit survives a restart: the edited Service
// is the older one, so a rebuild replays it first; the innocent one keeps
// its address (nothing renumbered), and the edited one is refused again.
func TestARefusedShareSurvivesARestart(t *testing.T) {
	const ns = "lb-refused"
	s := newLBSite(t, ns)
	lbNode(t, "refused-1", true, 71)
	ccm := s.startCCM("ccm")
	keyed := func(port int32) func(*v1.Service) {
		return func(svc *v1.Service) {
			svc.Annotations = map[string]string{"baremetal.cloudprovider.io/sharing-key": "k"}
			svc.Spec.Ports = []v1.ServicePort{{Name: "p", Protocol: v1.ProtocolTCP, Port: port}}
		}
	}
	createLBService(t, ns, "edited", keyed(8443))
	shared := waitIngress(t, ns, "edited", 1)
	createLBService(t, ns, "innocent", keyed(443))
	if got := waitIngress(t, ns, "innocent", 1); !slices.Equal(got, shared) {
		t.Fatalf("innocent %v and edited %v do not share", got, shared)
	}
	// The API server records changes to the second: the edit comes after
	// the status the CCM wrote.
	time.Sleep(1100 * time.Millisecond)
	patchService(t, ns, "edited", `{"spec":{"ports":[{"name":"p","protocol":"TCP","port":443}]}}`)
	warned(t, ns, "edited", "SyncLoadBalancerFailed", "the Service keeps its address")
	ccm.Kill()

	s.startCCM("ccm-restarted")
	framework.Consistently(t, 5*time.Second, "both keep the shared address", func() (bool, string) {
		innocent, edited := ingress(t, ns, "innocent"), ingress(t, ns, "edited")
		return slices.Equal(innocent, shared) && slices.Equal(edited, shared), fmt.Sprintf("innocent %v, edited %v, want both %v", innocent, edited, shared)
	})
	s.waitRoute(shared[0]+"/32", "203.0.113.71")
}

// Whoever may write a Service's status cannot have any address announced:
// an address outside every pool that another writer put in the status is
// not sent to the router at the next start (the leader derives its
// allocations from the status, as a standby does at every convergence);
// the Service is told, and gets an address of a pool.
func TestForeignStatusAddressIsNotAnnounced(t *testing.T) {
	const ns, foreign = "lb-foreign", "198.51.100.99"
	s := newLBSite(t, ns)
	lbNode(t, "foreign-1", true, 62)
	ccm := s.startCCM("ccm")
	createLBService(t, ns, "web", nil)
	waitIngress(t, ns, "web", 1)
	ccm.Kill()

	writeStatus(t, ns, "web", foreign, "another-tool")

	s.startCCM("ccm-restarted")
	warned(t, ns, "web", "AddressNotInPool", foreign)
	framework.Eventually(t, waitTimeout, "web has an address of a pool", func() (bool, string) {
		got := ingress(t, ns, "web")
		return len(got) == 1 && strings.HasPrefix(got[0], "192.0.2."), strings.Join(got, ",")
	})
	s.waitRoute(ingress(t, ns, "web")[0]+"/32", "203.0.113.62")
	rib, err := s.peer.RIB("ipv4")
	if err != nil {
		t.Fatal(err)
	}
	if hops, ok := rib[foreign+"/32"]; ok {
		t.Errorf("the router was sent %s (another writer's status) via %v", foreign, hops)
	}
}

// writeStatus puts ip in the Service's status as a writer other than the
// CCM does (a hand edit, another tool), under fieldManager ("" for
// the client's default).
func writeStatus(t *testing.T, ns, name, ip, fieldManager string) {
	t.Helper()
	ctx := context.Background()
	svcs := suite.Cluster.Admin.CoreV1().Services(ns)
	svc, err := svcs.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	svc.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: ip}}
	if _, err := svcs.UpdateStatus(ctx, svc, metav1.UpdateOptions{FieldManager: fieldManager}); err != nil {
		t.Fatal(err)
	}
}
