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
	"k8s.io/apimachinery/pkg/types"
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
  # The nodes' addresses are not on this machine: nothing may dial them.
  healthCheck: {enabled: false}
  pools:
  - name: public
    addresses: [192.0.2.0/28, "2001:db8:cafe::/124"]
    avoidBuggyIPs: true
    bgp:
      communities: ["64512:100"]
  - name: team
    addresses: ["198.51.100.10-198.51.100.20"]
    autoAssign: false
    namespaces: [%s-team]
`

func newLBSite(t *testing.T, ns string) *lbSite {
	t.Helper()
	peer := framework.StartPeer(t)
	s := &lbSite{site: newSite(t, fmt.Sprintf(lbConfig, ns)+framework.PeerConfig(peer)), peer: peer, ns: ns}
	for _, name := range []string{ns, ns + "-team"} {
		createNamespace(t, name)
	}
	return s
}

func createNamespace(t *testing.T, name string) {
	t.Helper()
	framework.CreateNamespace(t, suite.Cluster.Admin, name)
}

// lbNode registers a Node with an IPv4 and an IPv6 InternalIP.
func lbNode(t *testing.T, name string, ready bool, n int) {
	t.Helper()
	createNode(t, nodeSpec{name: name, ready: ready, addresses: []v1.NodeAddress{
		{Type: v1.NodeInternalIP, Address: fmt.Sprintf("203.0.113.%d", n)},
		{Type: v1.NodeInternalIP, Address: fmt.Sprintf("2001:db8:1::%d", n)},
	}})
}

func createLBService(t *testing.T, ns, name string, mutate func(*v1.Service)) *v1.Service {
	t.Helper()
	return framework.CreateLBService(t, suite.Cluster.Admin, ns, name, mutate)
}

func patchService(t *testing.T, ns, name, patch string) {
	t.Helper()
	framework.PatchService(t, suite.Cluster.Admin, ns, name, patch)
}

func deleteService(t *testing.T, ns, name string) {
	t.Helper()
	framework.DeleteService(t, suite.Cluster.Admin, ns, name)
}

func ingress(t *testing.T, ns, name string) []string {
	t.Helper()
	return framework.Ingress(t, suite.Cluster.Admin, ns, name)
}

func waitIngress(t *testing.T, ns, name string, count int) []string {
	t.Helper()
	return framework.WaitIngress(t, suite.Cluster.Admin, ns, name, count)
}

func (s *lbSite) waitRoute(prefix string, nextHops ...string) {
	s.T.Helper()
	framework.WaitRoute(s.T, s.peer, prefix, nextHops...)
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
	out, err := suite.Cluster.Kubectl("-n", ns, "get", "svc", "web")
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

// TestLoadBalancerFinalizerFromAdmission: deploy/load-balancer-finalizer.yaml
// (applied by the suite, as by the README's install) gives a new
// LoadBalancer Service the cleanup finalizer as it is created, so the CCM
// writes the Service once, its status; a Service of another
// loadBalancerClass is left alone; deleting still frees the address.
func TestLoadBalancerFinalizerFromAdmission(t *testing.T) {
	const ns = "lb-finalizer"
	s := newLBSite(t, ns)
	lbNode(t, "fin-1", true, 1)
	s.startCCM("ccm")
	from := time.Now()
	// Before 1.36 the policy is left out (install.md): the Service is
	// created without the finalizer and the CCM patches it in first.
	policy := suite.Cluster.HasFinalizerPolicy()
	if web := createLBService(t, ns, "web", nil); slices.Contains(web.Finalizers, framework.LBFinalizer) != policy {
		t.Errorf("Service web was created with finalizers %v; with the admission policy in force (%v) it has %s", web.Finalizers, policy, framework.LBFinalizer)
	}
	other := createLBService(t, ns, "other", func(svc *v1.Service) { svc.Spec.LoadBalancerClass = ptr.To("example.com/other") })
	if len(other.Finalizers) > 0 {
		t.Errorf("Service other, of loadBalancerClass example.com/other, was created with finalizers %v", other.Finalizers)
	}
	ip := waitIngress(t, ns, "web", 1)[0]
	s.waitRoute(ip+"/32", "203.0.113.1")

	written := func(name string) []string {
		events, err := suite.Cluster.Writes(framework.CCMUser, from)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, ev := range events {
			if ev.ObjectRef.Resource == "services" && ev.ObjectRef.Namespace == ns && ev.ObjectRef.Name == name {
				out = append(out, ev.Verb+" services/"+ev.ObjectRef.Subresource)
			}
		}
		return out
	}
	framework.Eventually(t, waitTimeout, "the CCM's status write in the audit log", func() (bool, string) {
		got := written("web")
		return len(got) > 0, fmt.Sprint(got)
	})
	want := []string{"patch services/status"}
	if !policy {
		want = []string{"patch services/status", "patch services/status"} // the finalizer, then the address
	}
	framework.Eventually(t, waitTimeout, "the CCM's writes in the audit log", func() (bool, string) {
		got := written("web")
		return len(got) >= len(want), fmt.Sprint(got)
	})
	if got := written("web"); !slices.Equal(got, want) {
		t.Errorf("the CCM wrote %v to Service web, want only %v", got, want)
	}
	if got := written("other"); len(got) > 0 {
		t.Errorf("the CCM wrote %v to Service other, which is another loadBalancerClass's", got)
	}

	deleteService(t, ns, "web")
	s.waitRoute(ip + "/32")
	createLBService(t, ns, "next", nil)
	if got := waitIngress(t, ns, "next", 1); got[0] != ip {
		t.Errorf("the address web gave up was not free: next got %v, want %s", got, ip)
	}
}

func readyEndpoints(t *testing.T, ns, svc string, nodes ...string) {
	t.Helper()
	framework.WriteEndpointSlice(t, suite.Cluster.Admin, ns, svc, nodes...)
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
	if _, err := suite.Cluster.Admin.CoreV1().Nodes().Patch(context.Background(), "local-2", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
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
	s.writeConfig(strings.Replace(fmt.Sprintf(lbConfig, ns)+framework.PeerConfig(s.peer), "192.0.2.0/28", "192.0.2.0/29", 1))
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
	s.writeConfig(strings.Replace(fmt.Sprintf(lbConfig, ns)+framework.PeerConfig(s.peer), "loadBalancer:\n", "loadBalancer:\n  announce: none\n", 1))
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

// A config that starts with no pool announced over BGP and no routes, and
// gains one by a reload, is announced from then on: the speaker starts at
// the reload instead of never ("allocated but not announced" in silence).
func TestReloadThatAddsTheFirstBGPPoolStartsTheSpeaker(t *testing.T) {
	const ns = "lb-first-bgp"
	peer := framework.StartPeer(t)
	withBGP := fmt.Sprintf(lbConfig, ns) + framework.PeerConfig(peer)
	noneFirst := strings.Replace(withBGP, "loadBalancer:\n", "loadBalancer:\n  announce: none\n", 1)
	s := &lbSite{site: newSite(t, noneFirst), peer: peer, ns: ns}
	createNamespace(t, ns)
	lbNode(t, "first-bgp-1", true, 81)
	ccm := s.startCCM("ccm")
	createLBService(t, ns, "web", nil)
	vip := waitIngress(t, ns, "web", 1)[0]
	framework.Eventually(t, waitTimeout, "the speaker is off", func() (bool, string) {
		return ccm.LogContains("BGP announcements are off"), "not said yet"
	})
	s.writeConfig(withBGP)
	s.waitRoute(vip+"/32", "203.0.113.81")
}

// Degradations that no error shows are said on the CCM's Pod and in its
// metrics: a router that takes one next hop per VIP (no ADD-PATH), and
// pools announced over BGP to no peer at all.
func TestSilentBGPDegradationsAreSaid(t *testing.T) {
	const ns = "lb-silent"
	peer, err := framework.StartGoBGPD(t.TempDir(), "gobgpd", "127.0.0.1", 64500, []framework.GoBGPNeighbor{{Address: "127.0.0.1", ASN: 64512}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(peer.Stop)
	s := &lbSite{site: newSite(t, fmt.Sprintf(lbConfig, ns)+framework.PeerConfig(peer)), peer: peer, ns: ns}
	ccm := s.startCCM("ccm-silent")
	framework.Eventually(t, waitTimeout, "BGPPeerWithoutAddPath on the Pod", func() (bool, string) {
		return len(events(t, "kube-system", "ccm-silent", "BGPPeerWithoutAddPath")) > 0, "no Event"
	})
	if m := suite.Metrics(t, ccm); !strings.Contains(m, `baremetal_bgp_peer_add_path{peer="127.0.0.1"} 0`) {
		t.Errorf("no baremetal_bgp_peer_add_path 0 for the peer")
	}
	s.writeConfig(fmt.Sprintf(lbConfig, ns) + "bgp:\n  localASN: 64512\n  routerID: 127.0.0.2\n")
	framework.Eventually(t, waitTimeout, "BGPNoPeers on the Pod", func() (bool, string) {
		return len(events(t, "kube-system", "ccm-silent", "BGPNoPeers")) > 0, "no Event"
	})
	m := suite.Metrics(t, ccm)
	if !strings.Contains(m, "baremetal_bgp_pools_without_peers 2") {
		t.Errorf("baremetal_bgp_pools_without_peers is not 2")
	}
	if strings.Contains(m, `peer="127.0.0.1"`) {
		t.Errorf("series of the removed peer remain")
	}
}

// TestLoadBalancerClassBesideAnotherImplementation runs the CCM as beside
// MetalLB (--load-balancer-class, --ignore-class-less-services): it serves
// the Services of its class, and writes nothing to the class-less one that
// the other implementation serves, though that one carries the cleanup
// finalizer (deploy/'s policy gives it to class-less Services), nor to one
// of a third class. The other implementation's address lies in one of the
// CCM's pools (overlapping pools): the CCM hands it to none of its own
// Services, announces it nowhere, and says so in its metrics. Deleted, the
// other implementation's Service goes: the CCM takes the finalizer off,
// which nothing else would.
func TestLoadBalancerClassBesideAnotherImplementation(t *testing.T) {
	const ns, class = "lb-class", "example.com/baremetal"
	s := newLBSite(t, ns)
	lbNode(t, "cls-1", true, 1)
	var finalizer func(*v1.Service)
	if !suite.Cluster.HasFinalizerPolicy() {
		// Before 1.36 no policy gives it: the Service carries it as one
		// the CCM finalized before --ignore-class-less-services would.
		finalizer = func(svc *v1.Service) { svc.Finalizers = []string{framework.LBFinalizer} }
	}
	theirs := createLBService(t, ns, "theirs", finalizer)
	if !slices.Contains(theirs.Finalizers, framework.LBFinalizer) {
		t.Fatalf("Service theirs has finalizers %v; the test needs the policy's %s on it", theirs.Finalizers, framework.LBFinalizer)
	}
	// The other implementation's address, written as it writes it: the
	// first of pool public, which the CCM would hand out first.
	theirs.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: "192.0.2.1"}}
	theirs, err := suite.Cluster.Admin.CoreV1().Services(ns).UpdateStatus(context.Background(), theirs, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	third := createLBService(t, ns, "third", func(svc *v1.Service) { svc.Spec.LoadBalancerClass = ptr.To("example.com/third") })
	// One of ours is there before the CCM starts (created while it was
	// down, or before a restart): it is served from the first list.
	createLBService(t, ns, "before", func(svc *v1.Service) { svc.Spec.LoadBalancerClass = ptr.To(class) })
	from := time.Now()
	ccm := s.startCCM("ccm", "--load-balancer-class="+class, "--ignore-class-less-services")
	if got := waitIngress(t, ns, "before", 1)[0]; got != "192.0.2.2" {
		t.Errorf("before got %s, want 192.0.2.2: 192.0.2.1 is theirs", got)
	}
	createLBService(t, ns, "ours", func(svc *v1.Service) { svc.Spec.LoadBalancerClass = ptr.To(class) })
	ip := waitIngress(t, ns, "ours", 1)[0]
	if ip != "192.0.2.3" {
		t.Errorf("ours got %s, want 192.0.2.3: 192.0.2.1 is theirs, .2 before's", ip)
	}
	s.waitRoute(ip+"/32", "203.0.113.1")
	if rib, err := s.peer.RIB("ipv4"); err != nil || len(rib["192.0.2.1/32"]) > 0 {
		t.Errorf("the peer has a route to the other implementation's address (%v): %v", err, rib)
	}
	framework.Eventually(t, waitTimeout, "the held address in the pool metrics", func() (bool, string) {
		body := metrics(t, ccm)
		want := `baremetal_pool_addresses{family="IPv4",pool="public",state="elsewhere"} 1`
		return strings.Contains(body, want), "/metrics lacks " + want
	})
	requested := createLBService(t, ns, "requested", func(svc *v1.Service) {
		svc.Spec.LoadBalancerClass = ptr.To(class)
		svc.Annotations = map[string]string{"baremetal.cloudprovider.io/load-balancer-ips": "192.0.2.1"}
	})
	framework.Eventually(t, waitTimeout, "the request for the held address refused on the Service", func() (bool, string) {
		evs := events(t, ns, requested.Name, "SyncLoadBalancerFailed")
		return len(evs) > 0 && strings.Contains(evs[0].Message, "held by Service lb-class/theirs"), fmt.Sprint(evs)
	})

	// Long enough for a resync or a second pass to have written anything.
	time.Sleep(3 * time.Second)
	writes, err := suite.Cluster.Writes(framework.CCMUser, from)
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range writes {
		if ev.ObjectRef.Resource == "services" && ev.ObjectRef.Namespace == ns && !slices.Contains([]string{"ours", "requested", "before"}, ev.ObjectRef.Name) {
			t.Errorf("the CCM wrote %s services/%s %s, which it does not serve", ev.Verb, ev.ObjectRef.Name, ev.ObjectRef.Subresource)
		}
	}
	// The informers' view of a Service of ours is never written back.
	before, err := suite.Cluster.Admin.CoreV1().Services(ns).Get(context.Background(), "before", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(before.Annotations) > 0 || before.Spec.LoadBalancerClass == nil || *before.Spec.LoadBalancerClass != class {
		t.Errorf("Service before has annotations %v and class %v in the API, want none and %s", before.Annotations, before.Spec.LoadBalancerClass, class)
	}
	for _, svc := range []*v1.Service{theirs, third} {
		got, err := suite.Cluster.Admin.CoreV1().Services(ns).Get(context.Background(), svc.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got.Finalizers, svc.Finalizers) || !slices.Equal(ingressIPs(got), ingressIPs(svc)) {
			t.Errorf("Service %s changed: finalizers %v, addresses %v; was %v, %v", svc.Name, got.Finalizers, ingressIPs(got), svc.Finalizers, ingressIPs(svc))
		}
	}
	// The other implementation's Services change while none of ours does:
	// the metric (and the alert on it) follows them, not the next change
	// of a Service of ours.
	elsewhere := func(what string, n int) {
		t.Helper()
		framework.Eventually(t, waitTimeout, what, func() (bool, string) {
			want := fmt.Sprintf(`baremetal_pool_addresses{family="IPv4",pool="public",state="elsewhere"} %d`, n)
			return strings.Contains(metrics(t, ccm), want), "/metrics lacks " + want
		})
	}
	third, err = suite.Cluster.Admin.CoreV1().Services(ns).Get(context.Background(), "third", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	third.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: "192.0.2.9"}}
	if _, err := suite.Cluster.Admin.CoreV1().Services(ns).UpdateStatus(context.Background(), third, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	elsewhere("a third implementation's new address in the pool metrics", 2)
	deleteService(t, ns, "theirs") // waits until it is gone
	if got := ingress(t, ns, "ours"); !slices.Equal(got, []string{ip}) {
		t.Errorf("ours has %v after theirs went, want %s", got, ip)
	}
	elsewhere("the address of the Service that went out of the pool metrics", 1)
}

func ingressIPs(svc *v1.Service) []string {
	var out []string
	for _, in := range svc.Status.LoadBalancer.Ingress {
		out = append(out, in.IP)
	}
	return out
}

// TestLoadBalancerPoolByNamespaceLabels: a pool with a namespaceSelector
// (MetalLB's serviceAllocation.namespaceSelectors) gives its addresses to
// Services of the Namespaces whose labels match, and the next pool serves
// the others.
func TestLoadBalancerPoolByNamespaceLabels(t *testing.T) {
	peer := framework.StartPeer(t)
	s := &lbSite{site: newSite(t, `
inventory:
  unlistedNodes: allow
loadBalancer:
  healthCheck: {enabled: false}
  pools:
  - name: team-a
    addresses: [192.0.2.64/30]
    namespaceSelector: {matchLabels: {team: a}}
  - name: public
    addresses: [192.0.2.0/28]
`+framework.PeerConfig(peer)), peer: peer}
	for ns, labels := range map[string]string{"nssel-a": `{"team":"a"}`, "nssel-b": `{"team":"b"}`} {
		createNamespace(t, ns)
		if _, err := suite.Cluster.Admin.CoreV1().Namespaces().Patch(context.Background(), ns, types.MergePatchType,
			[]byte(`{"metadata":{"labels":`+labels+`}}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	lbNode(t, "nssel-1", true, 1)
	s.startCCM("ccm")
	createLBService(t, "nssel-a", "web", nil)
	createLBService(t, "nssel-b", "web", nil)
	if got := waitIngress(t, "nssel-a", "web", 1); got[0] != "192.0.2.64" {
		t.Errorf("the Service of team a got %v, want 192.0.2.64 of pool team-a", got)
	}
	if got := waitIngress(t, "nssel-b", "web", 1); got[0] != "192.0.2.0" {
		t.Errorf("the Service of team b got %v, want 192.0.2.0 of pool public", got)
	}
	s.waitRoute("192.0.2.64/32", "203.0.113.1")
}
