package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/test/framework"
)

const routesConfig = `
inventory:
  unlistedNodes: allow
routes:
  bgp:
    communities: ["64512:200"]
`

// routeNode registers a Node with pod CIDRs, as kube-controller-manager's
// node IPAM (or a kubelet flag) would have given it.
func routeNode(t *testing.T, name string, n int, podCIDRs ...string) {
	t.Helper()
	createNode(t, nodeSpec{name: name, ready: true, addresses: []v1.NodeAddress{
		{Type: v1.NodeInternalIP, Address: fmt.Sprintf("203.0.113.%d", n)},
		{Type: v1.NodeInternalIP, Address: fmt.Sprintf("2001:db8:1::%d", n)},
	}})
	setPodCIDR(t, name, podCIDRs...)
}

// setPodCIDR gives a Node its pod CIDRs.
func setPodCIDR(t *testing.T, name string, podCIDRs ...string) {
	t.Helper()
	patch, _ := json.Marshal(map[string]any{"spec": map[string]any{"podCIDR": podCIDRs[0], "podCIDRs": podCIDRs}})
	if _, err := suite.Cluster.Admin.CoreV1().Nodes().Patch(context.Background(), name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatalf("giving Node %s its pod CIDRs: %v", name, err)
	}
}

func networkAvailable(t *testing.T, name string) (bool, string) {
	n, ok := getNode(t, name)
	if !ok {
		return false, "no Node"
	}
	for _, c := range n.Status.Conditions {
		if c.Type == v1.NodeNetworkUnavailable {
			return c.Status == v1.ConditionFalse, fmt.Sprintf("NetworkUnavailable=%s (%s)", c.Status, c.Reason)
		}
	}
	return false, "no NetworkUnavailable condition"
}

func TestPodCIDRRoutes(t *testing.T) {
	peer := framework.StartPeer(t)
	s := &lbSite{site: newSite(t, routesConfig+framework.PeerConfig(peer)), peer: peer}
	routeArgs := []string{"--configure-cloud-routes=true", "--cluster-cidr=10.244.0.0/16,fd00:244::/48", "--route-reconciliation-period=2s"}

	routeNode(t, "rt-1", 51, "10.244.1.0/24", "fd00:244:0:1::/64")
	routeNode(t, "rt-2", 52, "10.244.2.0/24", "fd00:244:0:2::/64")
	s.startCCM("ccm", routeArgs...)
	s.waitRoute("10.244.1.0/24", "203.0.113.51")
	s.waitRoute("10.244.2.0/24", "203.0.113.52")
	s.waitRoute("fd00:244:0:1::/64", "2001:db8:1::51")
	for _, name := range []string{"rt-1", "rt-2"} {
		framework.Eventually(t, waitTimeout, name+" has its network", func() (bool, string) { return networkAvailable(t, name) })
	}

	// A Node that joins gets its route; one that goes loses it.
	routeNode(t, "rt-3", 53, "10.244.3.0/24", "fd00:244:0:3::/64")
	s.waitRoute("10.244.3.0/24", "203.0.113.53")
	if err := suite.Cluster.Admin.CoreV1().Nodes().Delete(context.Background(), "rt-2", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	s.waitRoute("10.244.2.0/24")
	s.waitRoute("fd00:244:0:2::/64")

	// A new leader announces the routes it derives from the Nodes.
	s.ccms[0].Kill()
	next := s.startCCM("ccm-next", routeArgs...)
	framework.Eventually(t, waitTimeout, "the new leader announces the routes", func() (bool, string) {
		return next.LogContains("BGP paths converged", "added=4"), "not yet"
	})
	s.waitRoute("10.244.1.0/24", "203.0.113.51")
	s.waitRoute("10.244.3.0/24", "203.0.113.53")
	s.waitRoute("fd00:244:0:3::/64", "2001:db8:1::53")
}

func TestRoutesSectionRemovedByReloadStaysInForce(t *testing.T) {
	peer := framework.StartPeer(t)
	s := &lbSite{site: newSite(t, routesConfig+framework.PeerConfig(peer)), peer: peer}
	routeNode(t, "rt-keep", 54, "10.244.54.0/24")
	ccm := s.startCCM("ccm", "--configure-cloud-routes=true", "--cluster-cidr=10.244.0.0/16", "--route-reconciliation-period=2s")
	s.waitRoute("10.244.54.0/24", "203.0.113.54")
	framework.Eventually(t, waitTimeout, "rt-keep has its network", func() (bool, string) { return networkAvailable(t, "rt-keep") })

	// Switching routes off needs a restart: the reload keeps them, says so,
	// and the rest of the new config is in force.
	s.writeConfig("inventory:\n  unlistedNodes: allow\n  defaults: {zone: z-new}\n" + framework.PeerConfig(peer))
	framework.Eventually(t, waitTimeout, "an Event on the CCM's Pod says the change needs a restart", func() (bool, string) {
		for _, ev := range events(t, "kube-system", "ccm", "CloudConfigNeedsRestart") {
			if ev.Type == v1.EventTypeWarning && strings.Contains(ev.Message, "removes the routes section") {
				return true, ""
			}
		}
		return false, "no such Event"
	})
	if !ccm.LogContains("needs a restart of the CCM") {
		t.Errorf("the log does not say that switching routes needs a restart")
	}
	framework.Consistently(t, 6*time.Second, "the pod route stays announced and the Node keeps its network", func() (bool, string) {
		rib, err := peer.RIB("ipv4")
		if err != nil {
			return false, err.Error()
		}
		if hops := rib["10.244.54.0/24"]; len(hops) != 1 || hops[0] != "203.0.113.54" {
			return false, fmt.Sprintf("RIB %v", rib)
		}
		return networkAvailable(t, "rt-keep")
	})
	// A Node that joins after the reload is routed too.
	routeNode(t, "rt-later", 55, "10.244.55.0/24")
	s.waitRoute("10.244.55.0/24", "203.0.113.55")
}
