package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/test/framework"
)

// site is a CCM whose speaker peers with a real gobgpd on loopback.
type site struct {
	*framework.Site
	peer *framework.GoBGPD
	ns   string
}

// siteConfig has a small pool for tests that name addresses and a large
// one (chosen by annotation) for tests with many Services.
const siteConfig = `
inventory:
  unlistedNodes: allow
loadBalancer:
  # The nodes' addresses are not on this machine: nothing may dial them.
  healthCheck: {enabled: false}
  pools:
  - name: public
    addresses: [192.0.2.0/28]
    avoidBuggyIPs: true
  - name: large
    addresses: [198.18.0.0/20, "2001:db8:5::/112"]
    autoAssign: false
`

// newSite starts a peer that also takes sessions from replicas at the
// other addresses (see framework.Site.StartReplicaFrom).
func newSite(t *testing.T, ns string, others ...string) *site {
	t.Helper()
	peer := framework.StartPeer(t, others...)
	framework.CreateNamespace(t, suite.Cluster.Admin, ns)
	return &site{Site: suite.NewSite(t, siteConfig+framework.PeerConfig(peer)), peer: peer, ns: ns}
}

// node registers a Ready-or-not Node with the addresses 203.0.113.n and
// 2001:db8:1::n.
func node(t *testing.T, name string, ready bool, n int) {
	t.Helper()
	framework.CreateNode(t, suite.Cluster.Admin, name, "", ready, nodeAddresses(n))
}

func nodeAddresses(n int) []v1.NodeAddress {
	return []v1.NodeAddress{
		{Type: v1.NodeInternalIP, Address: fmt.Sprintf("203.0.113.%d", n)},
		{Type: v1.NodeInternalIP, Address: fmt.Sprintf("2001:db8:1::%d", n)},
	}
}

func (s *site) waitRoute(prefix string, nextHops ...string) {
	s.T.Helper()
	framework.WaitRoute(s.T, s.peer, prefix, nextHops...)
}

// sessionCounters is the CCM's own record of its BGP sessions.
func sessionCounters(t *testing.T, p *framework.Process) string {
	t.Helper()
	var lines []string
	for _, l := range strings.Split(suite.Metrics(t, p), "\n") {
		if strings.HasPrefix(l, "baremetal_bgp_peer") {
			lines = append(lines, l)
		}
	}
	return strings.Join(lines, "\n")
}

// hostPrefix is the /32 or /128 of an address.
func hostPrefix(ip string) string {
	if strings.Contains(ip, ":") {
		return ip + "/128"
	}
	return ip + "/32"
}

// ribPaths is every prefix the peer has with its sorted next hops, over
// both families, from whichever replicas.
func ribPaths(peer *framework.GoBGPD) (map[string][]string, error) {
	all := map[string][]string{}
	for _, family := range []string{"ipv4", "ipv6"} {
		rib, err := peer.RIB(family)
		if err != nil {
			return nil, err
		}
		for prefix, hops := range rib {
			// Every replica announces the same next hops.
			slices.Sort(hops)
			all[prefix] = slices.Compact(hops)
		}
	}
	return all, nil
}

func admin() kubernetes.Interface { return suite.Cluster.Admin }

func setNodeStatus(t *testing.T, name string, ready bool, addresses []v1.NodeAddress) {
	t.Helper()
	if err := framework.SetNodeStatus(context.Background(), admin(), name, ready, addresses); err != nil {
		t.Fatal(err)
	}
}

// routeNode registers a Ready Node with pod CIDRs, as node IPAM would have
// given it.
func routeNode(t *testing.T, name string, n int, podCIDRs ...string) {
	t.Helper()
	node(t, name, true, n)
	patch, _ := json.Marshal(map[string]any{"spec": map[string]any{"podCIDR": podCIDRs[0], "podCIDRs": podCIDRs}})
	if _, err := admin().CoreV1().Nodes().Patch(context.Background(), name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatalf("giving Node %s its pod CIDRs: %v", name, err)
	}
}

func nodeExists(t *testing.T, name string) bool {
	t.Helper()
	_, err := admin().CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	return err == nil
}

// inPool puts a Service in the large pool.
func inPool(svc *v1.Service) {
	if svc.Annotations == nil {
		svc.Annotations = map[string]string{}
	}
	svc.Annotations["baremetal.cloudprovider.io/address-pool"] = "large"
}

// readyNodes registers count Ready Nodes (prefix-1, ...) with the
// addresses of base+1, ... and returns their addresses by family (true:
// IPv6): the next hops every VIP should have.
func readyNodes(t *testing.T, prefix string, base, count int) map[bool][]string {
	t.Helper()
	hops := map[bool][]string{}
	for i := 1; i <= count; i++ {
		node(t, fmt.Sprintf("%s-%d", prefix, i), true, base+i)
		hops[false] = append(hops[false], fmt.Sprintf("203.0.113.%d", base+i))
		hops[true] = append(hops[true], fmt.Sprintf("2001:db8:1::%d", base+i))
	}
	return hops
}

// createMixed creates mixedService(ns, i) for i from first up to end.
func createMixed(ns string, first, end int) error {
	return framework.Parallel(end-first, 8, func(i int) error {
		_, err := admin().CoreV1().Services(ns).Create(context.Background(), mixedService(ns, first+i), metav1.CreateOptions{})
		return err
	})
}
