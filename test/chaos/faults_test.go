package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/test/framework"
)

func annotate(t *testing.T, ns, name, key, value string) {
	t.Helper()
	framework.PatchService(t, admin(), ns, name, fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, key, value))
}

func TestRequestedAddressChanges(t *testing.T) {
	const ns = "fault-req"
	s := newSite(t, ns)
	node(t, "req-move-1", true, 61)
	s.StartCCM("ccm")
	const ann = "baremetal.cloudprovider.io/load-balancer-ips"
	framework.CreateLBService(t, admin(), ns, "mover", func(svc *v1.Service) { svc.Annotations = map[string]string{ann: "192.0.2.5"} })
	framework.CreateLBService(t, admin(), ns, "holder", func(svc *v1.Service) { svc.Annotations = map[string]string{ann: "192.0.2.6"} })
	framework.WaitIngress(t, admin(), ns, "holder", 1)
	if ip := framework.WaitIngress(t, admin(), ns, "mover", 1); ip[0] != "192.0.2.5" {
		t.Fatalf("mover got %v", ip)
	}
	s.waitRoute("192.0.2.5/32", "203.0.113.61")

	// A new requested address moves the Service; the old one is withdrawn
	// and free.
	annotate(t, ns, "mover", ann, "192.0.2.7")
	framework.Eventually(t, framework.WaitTimeout, "mover moved to 192.0.2.7", func() (bool, string) {
		ips := framework.Ingress(t, admin(), ns, "mover")
		return len(ips) == 1 && ips[0] == "192.0.2.7", fmt.Sprint(ips)
	})
	s.waitRoute("192.0.2.7/32", "203.0.113.61")
	s.waitRoute("192.0.2.5/32")
	framework.CreateLBService(t, admin(), ns, "taker", func(svc *v1.Service) { svc.Annotations = map[string]string{ann: "192.0.2.5"} })
	if ip := framework.WaitIngress(t, admin(), ns, "taker", 1); ip[0] != "192.0.2.5" {
		t.Errorf("the address mover left was not free: taker got %v", ip)
	}

	// A move to a taken address is refused; the Service keeps its own.
	annotate(t, ns, "mover", ann, "192.0.2.6")
	framework.Eventually(t, framework.WaitTimeout, "the refused move is an Event", func() (bool, string) {
		for _, ev := range framework.Events(t, admin(), ns, "mover", "SyncLoadBalancerFailed") {
			if strings.Contains(ev.Message, "192.0.2.6 is in use by Service "+ns+"/holder") {
				return true, ""
			}
		}
		return false, "no Event yet"
	})
	framework.Consistently(t, 3*time.Second, "mover keeps 192.0.2.7 and its route", func() (bool, string) {
		rib, _ := s.peer.RIB("ipv4")
		ips := framework.Ingress(t, admin(), ns, "mover")
		return len(ips) == 1 && ips[0] == "192.0.2.7" && len(rib["192.0.2.7/32"]) == 1, fmt.Sprint(ips, rib)
	})

	// spec.loadBalancerIP moves a Service too.
	framework.CreateLBService(t, admin(), ns, "legacy", func(svc *v1.Service) { svc.Spec.LoadBalancerIP = "192.0.2.8" })
	framework.WaitIngress(t, admin(), ns, "legacy", 1)
	framework.PatchService(t, admin(), ns, "legacy", `{"spec":{"loadBalancerIP":"192.0.2.9"}}`)
	s.waitRoute("192.0.2.9/32", "203.0.113.61")
	s.waitRoute("192.0.2.8/32")
}

// secondPeer is another router, on 127.0.0.3, that a test leaves alone
// to see that it is not disturbed.
func (s *site) addSecondPeer(t *testing.T) *framework.GoBGPD {
	t.Helper()
	other, err := framework.StartGoBGPD(t.TempDir(), "gobgpd-other", "127.0.0.3", 64501,
		[]framework.GoBGPNeighbor{{Address: "127.0.0.1", ASN: 64512, AddPath: true}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(other.Stop)
	s.WriteConfig(siteConfig + framework.PeerConfig(s.peer) + fmt.Sprintf("  - {address: 127.0.0.3, port: %d, asn: 64501, holdTime: 9s, connectRetryTime: 1s}\n", other.Port))
	return other
}

// sessionUptime is when gobgpd's session with the CCM came up.
func sessionUptime(t *testing.T, peer *framework.GoBGPD) string {
	t.Helper()
	out, err := peer.CLI("neighbor", "127.0.0.1", "-j")
	if err != nil {
		t.Fatal(err)
	}
	var n struct {
		State struct {
			SessionState int `json:"session_state"`
		} `json:"state"`
		Timers struct {
			State struct {
				Uptime any `json:"uptime"`
			} `json:"state"`
		} `json:"timers"`
	}
	if err := json.Unmarshal(out, &n); err != nil {
		t.Fatalf("reading gobgp neighbor %q: %v", out, err)
	}
	return fmt.Sprintf("state %d, up since %v", n.State.SessionState, n.Timers.State.Uptime)
}

func TestServiceChurnResetsNoSession(t *testing.T) {
	const ns = "fault-churn"
	s := newSite(t, ns)
	other := s.addSecondPeer(t)
	node(t, "churn-1", true, 71)
	ccm := s.StartCCM("ccm", "--kube-api-qps=200", "--kube-api-burst=300", "--concurrent-service-syncs=4")
	framework.CreateLBService(t, admin(), ns, "steady", nil)
	steady := framework.WaitIngress(t, admin(), ns, "steady", 1)[0]
	s.waitRoute(steady+"/32", "203.0.113.71")
	framework.WaitRoute(t, other, steady+"/32", "203.0.113.71")
	before, uptime, otherUptime := sessionCounters(t, ccm), sessionUptime(t, s.peer), sessionUptime(t, other)

	// In rounds of up to 50, so that the pool and the CCM's client limits
	// are not what is tested.
	for done := 0; done < *churn; done += 50 {
		round := min(50, *churn-done)
		for i := 0; i < round; i++ {
			framework.CreateLBService(t, admin(), ns, fmt.Sprintf("churn-%d", done+i), inPool)
		}
		for i := 0; i < round; i++ {
			framework.WaitIngress(t, admin(), ns, fmt.Sprintf("churn-%d", done+i), 1)
		}
		for i := 0; i < round; i++ {
			framework.DeleteService(t, admin(), ns, fmt.Sprintf("churn-%d", done+i))
		}
	}
	s.waitRoute(steady+"/32", "203.0.113.71")
	if after := sessionCounters(t, ccm); after != before {
		t.Errorf("the CCM's BGP sessions changed state while Services came and went:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	if after := sessionUptime(t, s.peer); after != uptime {
		t.Errorf("gobgpd's session with the CCM was reset: %s, then %s", uptime, after)
	}
	if after := sessionUptime(t, other); after != otherUptime {
		t.Errorf("the second peer's session was reset: %s, then %s", otherUptime, after)
	}
	if rib, _ := ribPaths(s.peer); len(rib) != 1 {
		t.Errorf("gobgpd has %d prefixes after the churn, want only the steady VIP: %v", len(rib), rib)
	}
	t.Logf("%d Services created and deleted; sessions unchanged (%s); CCM counters:\n%s", *churn, uptime, before)
}

func TestPeerRestartGetsEverythingBack(t *testing.T) {
	const ns = "fault-peer"
	s := newSite(t, ns)
	other := s.addSecondPeer(t)
	node(t, "peer-1", true, 81)
	ccm := s.StartCCM("ccm")
	framework.CreateLBService(t, admin(), ns, "a", nil)
	framework.CreateLBService(t, admin(), ns, "b", nil)
	a, b := framework.WaitIngress(t, admin(), ns, "a", 1)[0], framework.WaitIngress(t, admin(), ns, "b", 1)[0]
	s.waitRoute(a+"/32", "203.0.113.81")
	s.waitRoute(b+"/32", "203.0.113.81")
	framework.WaitRoute(t, other, b+"/32", "203.0.113.81")
	otherUptime := sessionUptime(t, other)
	otherCounter := func() string {
		var lines []string
		for _, l := range strings.Split(sessionCounters(t, ccm), "\n") {
			if strings.Contains(l, "127.0.0.3") {
				lines = append(lines, l)
			}
		}
		return strings.Join(lines, "\n")
	}
	otherBefore := otherCounter()

	// The router restarts on the same address and port.
	port := s.peer.Port
	s.peer.Stop()
	restarted, err := framework.StartGoBGPDOnPort(t.TempDir(), "gobgpd-restarted", "127.0.0.1", port, 64500,
		[]framework.GoBGPNeighbor{{Address: "127.0.0.1", ASN: 64512, AddPath: true}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(restarted.Stop)
	s.peer = restarted
	start := time.Now()
	s.waitRoute(a+"/32", "203.0.113.81")
	s.waitRoute(b+"/32", "203.0.113.81")
	took := time.Since(start)
	t.Logf("every path was back at the restarted peer after %s", took.Round(100*time.Millisecond))
	if took > 9*time.Second {
		t.Errorf("paths took %s to come back, more than the 9 s hold time", took)
	}
	if after := sessionUptime(t, other); after != otherUptime {
		t.Errorf("the other peer's session was disturbed: %s, then %s", otherUptime, after)
	}
	if after := otherCounter(); after != otherBefore || after == "" {
		t.Errorf("the CCM's session with the other peer changed state: %q, then %q", otherBefore, after)
	}
}

func TestLocalTrafficNodeDies(t *testing.T) {
	const ns = "fault-local"
	s := newSite(t, ns)
	node(t, "die-1", true, 91)
	node(t, "die-2", true, 92)
	s.StartCCM("ccm")
	framework.WriteEndpointSlice(t, admin(), ns, "only", "die-1")
	framework.CreateLBService(t, admin(), ns, "only", func(svc *v1.Service) {
		svc.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
	})
	vip := framework.WaitIngress(t, admin(), ns, "only", 1)[0] + "/32"
	s.waitRoute(vip, "203.0.113.91")
	setNodeStatus(t, "die-1", false, nil)
	s.waitRoute(vip)
	// The endpoint is rescheduled on die-2.
	framework.WriteEndpointSlice(t, admin(), ns, "only", "die-2")
	s.waitRoute(vip, "203.0.113.92")
}

func TestInventoryFaultsWithdrawNothing(t *testing.T) {
	const ns = "fault-inv"
	s := newSite(t, ns)
	good := siteConfig + framework.PeerConfig(s.peer) + "routes: {}\n"
	s.WriteConfig(good)
	routeNode(t, "inv-1", 101, "10.244.101.0/24")
	ccm := s.StartCCM("ccm", "--configure-cloud-routes=true", "--cluster-cidr=10.244.0.0/16", "--route-reconciliation-period=2s")
	framework.CreateLBService(t, admin(), ns, "vip", nil)
	vip := framework.WaitIngress(t, admin(), ns, "vip", 1)[0] + "/32"
	s.waitRoute(vip, "203.0.113.101")
	s.waitRoute("10.244.101.0/24", "203.0.113.101")
	setNodeStatus(t, "inv-1", false, nil)
	// NotReady: the VIP loses its next hop, the route stays.
	s.waitRoute(vip)
	setNodeStatus(t, "inv-1", true, nil)
	s.waitRoute(vip, "203.0.113.101")

	intact := func() (bool, string) {
		rib, err := s.peer.RIB("ipv4")
		if err != nil {
			return false, err.Error()
		}
		ok := nodeExists(t, "inv-1")
		return ok && len(rib[vip]) == 1 && len(rib["10.244.101.0/24"]) == 1, fmt.Sprintf("node there: %v, RIB %v", ok, rib)
	}
	faults := []struct {
		what  string
		apply func() error
		inLog string
	}{
		{"truncated", func() error { return s.Config.Write(good[:len(good)/2]) }, "Cloud config not reloaded"},
		{"invalid YAML", func() error { return s.Config.Write("inventory: [\n") }, "not valid YAML"},
		{"unreadable (a directory)", func() error {
			if err := os.Remove(s.Config.Path()); err != nil {
				return err
			}
			return os.Mkdir(s.Config.Path(), 0o755)
		}, "is a directory"},
		{"deleted", func() error { return os.Remove(s.Config.Path()) }, "no such file"},
	}
	for _, f := range faults {
		if err := f.apply(); err != nil {
			t.Fatal(err)
		}
		framework.Eventually(t, 30*time.Second, "the "+f.what+" config is logged", func() (bool, string) {
			return ccm.LogContains("Cloud config not reloaded", f.inLog), "not yet"
		})
		framework.Consistently(t, 3*time.Second, "nothing is withdrawn or deleted with a "+f.what+" config", intact)
	}
	// A valid file again takes effect.
	if err := s.Config.Write(strings.Replace(good, "avoidBuggyIPs: true", "avoidBuggyIPs: false", 1)); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 30*time.Second, "the repaired config is in force", func() (bool, string) {
		return ccm.LogContains("Reloaded cloud config"), "not yet"
	})
	framework.Consistently(t, 2*time.Second, "and nothing moved", intact)
}

func TestServiceAccountIsRefusedOutsideItsRole(t *testing.T) {
	cfg, err := clientcmd.BuildConfigFromFlags("", suite.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	_, err = client.CoreV1().Secrets("kube-system").List(context.Background(), metav1.ListOptions{})
	if !apierrors.IsForbidden(err) {
		t.Errorf("the CCM's ServiceAccount listing Secrets: %v, want Forbidden", err)
	}
	if _, err := client.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{}); err != nil {
		t.Errorf("the CCM's ServiceAccount cannot list Nodes: %v", err)
	}
}
