package integration

import (
	"context"
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
	patchService(t, ns, name, fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, key, value))
}

func TestRequestedAddressChanges(t *testing.T) {
	const ns = "fault-req"
	s := newLBSite(t, ns)
	lbNode(t, "req-move-1", true, 61)
	s.startCCM("ccm")
	const ann = "baremetal.cloudprovider.io/load-balancer-ips"
	createLBService(t, ns, "mover", func(svc *v1.Service) { svc.Annotations = map[string]string{ann: "192.0.2.5"} })
	createLBService(t, ns, "holder", func(svc *v1.Service) { svc.Annotations = map[string]string{ann: "192.0.2.6"} })
	waitIngress(t, ns, "holder", 1)
	if ip := waitIngress(t, ns, "mover", 1); ip[0] != "192.0.2.5" {
		t.Fatalf("mover got %v", ip)
	}
	s.waitRoute("192.0.2.5/32", "203.0.113.61")

	// A new requested address moves the Service; the old one is withdrawn
	// and free.
	annotate(t, ns, "mover", ann, "192.0.2.7")
	framework.Eventually(t, waitTimeout, "mover moved to 192.0.2.7", func() (bool, string) {
		ips := ingress(t, ns, "mover")
		return len(ips) == 1 && ips[0] == "192.0.2.7", fmt.Sprint(ips)
	})
	s.waitRoute("192.0.2.7/32", "203.0.113.61")
	s.waitRoute("192.0.2.5/32")
	createLBService(t, ns, "taker", func(svc *v1.Service) { svc.Annotations = map[string]string{ann: "192.0.2.5"} })
	if ip := waitIngress(t, ns, "taker", 1); ip[0] != "192.0.2.5" {
		t.Errorf("the address mover left was not free: taker got %v", ip)
	}

	// A move to a taken address is refused; the Service keeps its own.
	annotate(t, ns, "mover", ann, "192.0.2.6")
	framework.Eventually(t, waitTimeout, "the refused move is an Event", func() (bool, string) {
		for _, ev := range events(t, ns, "mover", "SyncLoadBalancerFailed") {
			if strings.Contains(ev.Message, "192.0.2.6 is in use by Service "+ns+"/holder") {
				return true, ""
			}
		}
		return false, "no Event yet"
	})
	framework.Consistently(t, 3*time.Second, "mover keeps 192.0.2.7 and its route", func() (bool, string) {
		rib, _ := s.peer.RIB("ipv4")
		ips := ingress(t, ns, "mover")
		return len(ips) == 1 && ips[0] == "192.0.2.7" && len(rib["192.0.2.7/32"]) == 1, fmt.Sprint(ips, rib)
	})

	// spec.loadBalancerIP moves a Service too.
	createLBService(t, ns, "legacy", func(svc *v1.Service) { svc.Spec.LoadBalancerIP = "192.0.2.8" })
	waitIngress(t, ns, "legacy", 1)
	patchService(t, ns, "legacy", `{"spec":{"loadBalancerIP":"192.0.2.9"}}`)
	s.waitRoute("192.0.2.9/32", "203.0.113.61")
	s.waitRoute("192.0.2.8/32")
}

func TestServiceChurnResetsNoSession(t *testing.T) {
	const ns = "fault-churn"
	// CI-sized (the pool has 15 addresses): 3 rounds of 12.
	const rounds, count = 3, 12
	s := newLBSite(t, ns)
	lbNode(t, "churn-1", true, 71)
	s.startCCM("ccm")
	createLBService(t, ns, "steady", nil)
	steady := waitIngress(t, ns, "steady", 1)[0]
	s.waitRoute(steady+"/32", "203.0.113.71")
	transitions := func() string {
		var lines []string
		for _, l := range strings.Split(metrics(t, s.ccms[0]), "\n") {
			if strings.HasPrefix(l, "baremetal_bgp_peer") {
				lines = append(lines, l)
			}
		}
		return strings.Join(lines, "\n")
	}
	before := transitions()
	for r := 0; r < rounds; r++ {
		for i := 0; i < count; i++ {
			createLBService(t, ns, fmt.Sprintf("churn-%d-%d", r, i), nil)
		}
		for i := 0; i < count; i++ {
			waitIngress(t, ns, fmt.Sprintf("churn-%d-%d", r, i), 1)
		}
		for i := 0; i < count; i++ {
			deleteService(t, ns, fmt.Sprintf("churn-%d-%d", r, i))
		}
	}
	s.waitRoute(steady+"/32", "203.0.113.71")
	if after := transitions(); after != before {
		t.Errorf("BGP sessions changed state while Services came and went:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	state, err := s.peer.NeighborState("127.0.0.1")
	if err != nil || state != "established" {
		t.Errorf("gobgpd's session with the CCM: %q %v", state, err)
	}
	t.Logf("%d Services created and deleted; session transitions unchanged: %s", rounds*count, before)
}

func TestPeerRestartGetsEverythingBack(t *testing.T) {
	const ns = "fault-peer"
	s := newLBSite(t, ns)
	lbNode(t, "peer-1", true, 81)
	s.startCCM("ccm")
	createLBService(t, ns, "a", nil)
	createLBService(t, ns, "b", nil)
	a, b := waitIngress(t, ns, "a", 1)[0], waitIngress(t, ns, "b", 1)[0]
	s.waitRoute(a+"/32", "203.0.113.81")
	s.waitRoute(b+"/32", "203.0.113.81")

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
}

func TestLocalTrafficNodeDies(t *testing.T) {
	const ns = "fault-local"
	s := newLBSite(t, ns)
	lbNode(t, "die-1", true, 91)
	lbNode(t, "die-2", true, 92)
	s.startCCM("ccm")
	readyEndpoints(t, ns, "only", "die-1")
	createLBService(t, ns, "only", func(svc *v1.Service) {
		svc.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
	})
	vip := waitIngress(t, ns, "only", 1)[0] + "/32"
	s.waitRoute(vip, "203.0.113.91")
	setNodeStatus(t, "die-1", false, nil)
	s.waitRoute(vip)
	// The endpoint is rescheduled on die-2.
	readyEndpoints(t, ns, "only", "die-2")
	s.waitRoute(vip, "203.0.113.92")
}

func TestInventoryFaultsWithdrawNothing(t *testing.T) {
	const ns = "fault-inv"
	s := newLBSite(t, ns)
	good := fmt.Sprintf(lbConfig, ns, s.peer.Port) + "routes: {}\n"
	s.writeConfig(good)
	routeNode(t, "inv-1", 101, "10.244.101.0/24")
	ccm := s.startCCM("ccm", "--configure-cloud-routes=true", "--cluster-cidr=10.244.0.0/16", "--route-reconciliation-period=2s")
	createLBService(t, ns, "vip", nil)
	vip := waitIngress(t, ns, "vip", 1)[0] + "/32"
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
		_, ok := getNode(t, "inv-1")
		return ok && len(rib[vip]) == 1 && len(rib["10.244.101.0/24"]) == 1, fmt.Sprintf("node there: %v, RIB %v", ok, rib)
	}
	faults := []struct {
		what  string
		apply func() error
		inLog string
	}{
		{"truncated", func() error { return s.config.Write(good[:len(good)/2]) }, "Cloud config not reloaded"},
		{"invalid YAML", func() error { return s.config.Write("inventory: [\n") }, "not valid YAML"},
		{"unreadable (a directory)", func() error {
			if err := removeFile(s.config.Path()); err != nil {
				return err
			}
			return os.Mkdir(s.config.Path(), 0o755)
		}, "is a directory"},
		{"deleted", func() error { return os.Remove(s.config.Path()) }, "no such file"},
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
	if err := s.config.Write(strings.Replace(good, "avoidBuggyIPs: true", "avoidBuggyIPs: false", 1)); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 30*time.Second, "the repaired config is in force", func() (bool, string) {
		return ccm.LogContains("Reloaded cloud config"), "not yet"
	})
	framework.Consistently(t, 2*time.Second, "and nothing moved", intact)
}

func TestServiceAccountIsRefusedOutsideItsRole(t *testing.T) {
	cfg, err := clientcmd.BuildConfigFromFlags("", ccmKubeconfig)
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
