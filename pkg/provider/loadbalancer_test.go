package provider

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/component-base/metrics/testutil"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/annotations"
	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/bgp"
	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/config"
	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/report"
)

const lbConfig = `
inventory:
  machines:
  - name: a
    addresses: [{type: InternalIP, address: 10.0.0.1}]
loadBalancer:
  pools:
  - name: private
    addresses: [10.1.0.0/28]
    bgp: {communities: ["65535:65281"]}
%s
bgp: {localASN: 64512, routerID: 10.0.0.254}
`

// lbCloud is a leading cloud whose only node, a, is Ready with an IPv4
// address, recording the Events it emits.
func lbCloud(t *testing.T, extraPools string) (*Cloud, *[]string) {
	t.Helper()
	c := newCloud(t, fmt.Sprintf(lbConfig, extraPools))
	c.lb.leading.Store(true)
	var events []string
	c.lb.report.Events = func(ref report.Object, _, reason, msg string) {
		events = append(events, ref.Namespace+"/"+ref.Name+" "+reason+": "+msg)
	}
	withNodes(t, c, kubeletNode("a", "10.0.0.1", true, true))
	return c, &events
}

func ensure(t *testing.T, c *Cloud, svc *v1.Service) []string {
	t.Helper()
	st, err := c.EnsureLoadBalancer(context.Background(), "", svc, nil)
	if err != nil {
		t.Fatalf("EnsureLoadBalancer %s: %v", svc.Name, err)
	}
	var out []string
	for _, in := range st.Ingress {
		out = append(out, in.IP)
	}
	return out
}

func reloadWith(t *testing.T, c *Cloud, extraPools string, pools ...string) {
	t.Helper()
	text := fmt.Sprintf(lbConfig, extraPools)
	if len(pools) > 0 {
		text = strings.Replace(text, "  - name: private\n    addresses: [10.1.0.0/28]\n    bgp: {communities: [\"65535:65281\"]}\n", strings.Join(pools, ""), 1)
	}
	cfg, err := config.Parse([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	c.apply(cfg)
}

func svcNamed(ns, name string) *v1.Service {
	return &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer, Ports: []v1.ServicePort{{Protocol: v1.ProtocolTCP, Port: 80}}}}
}

// A VIP whose pool goes from the config keeps the attributes it was
// announced with (a no-export VIP must not leak out of the AS), and its
// Service is told once; a reload that changes nothing for it says nothing.
func TestRemovedPoolKeepsTheVIPsAttributes(t *testing.T) {
	c, events := lbCloud(t, "")
	vip := ensure(t, c, svcNamed("ns", "web"))[0]
	want := "via [10.0.0.1] communities [4294967041]" // 65535:65281, no-export
	if got := pathTo(c, vip); got != want {
		t.Fatalf("before: %s, want %s", got, want)
	}
	other := "  - {name: other, addresses: [10.2.0.0/28]}\n"
	reloadWith(t, c, "", other)
	if got := pathTo(c, vip); got != want {
		t.Errorf("after its pool was removed: %s, want %s", got, want)
	}
	reloadWith(t, c, "", other, "  - {name: third, addresses: [10.3.0.0/28]}\n")
	var outside []string
	for _, e := range *events {
		if strings.Contains(e, "AddressOutsidePools") {
			outside = append(outside, e)
		}
	}
	if len(outside) != 1 || !strings.HasPrefix(outside[0], "ns/web AddressOutsidePools") {
		t.Errorf("AddressOutsidePools Events over two reloads: %q, want one on ns/web", outside)
	}
	if got := pathTo(c, vip); got != want {
		t.Errorf("after an unrelated reload: %s, want %s", got, want)
	}
}

// An IPv6 VIP where no eligible node has an IPv6 address is not announced,
// and its Service is told once, with the metric counting it.
func TestVIPWithoutNextHopsOfItsFamilyIsReported(t *testing.T) {
	c, events := lbCloud(t, `  - {name: v6, addresses: ["2001:db8::/124"], autoAssign: false}`)
	svc := svcNamed("ns", "six")
	svc.Annotations = map[string]string{annotations.AddressPool: "v6"}
	svc.Spec.IPFamilies = []v1.IPFamily{v1.IPv6Protocol}
	vip := ensure(t, c, svc)[0]
	pathTo(c, vip)
	if got := pathTo(c, vip); got != "via [] communities []" {
		t.Errorf("the IPv6 VIP: %s, want no next hops", got)
	}
	var said []string
	for _, e := range *events {
		if strings.Contains(e, "VIPNotAnnounced") {
			said = append(said, e)
		}
	}
	if len(said) != 1 || !strings.Contains(said[0], "ns/six VIPNotAnnounced: address "+vip+" is not announced: no Ready, initialised node that may carry traffic has an IPv6 address") {
		t.Errorf("Events: %q", said)
	}
	if v, err := testutil.GetGaugeMetricValue(vipsWithoutNextHops); err != nil || v != 1 {
		t.Errorf("baremetal_load_balancer_vips_without_next_hops = %v (%v), want 1", v, err)
	}
	// A standby derives the same and counts it, but the Service hears it
	// from the leader alone.
	svc.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: vip}}
	withServices(t, c, svc)
	c.lb.mu.Lock()
	c.lb.leading.Store(false)
	c.lb.report = &report.Reporter{Events: c.lb.report.Events, Quiet: c.quiet} // nothing said yet
	c.lb.mu.Unlock()
	*events = nil
	if got := pathTo(c, vip); got != "via [] communities []" {
		t.Errorf("the standby announces the IPv6 VIP %s, want it without next hops", got)
	}
	if len(*events) != 0 {
		t.Errorf("a standby told the Service: %q", *events)
	}
	if v, err := testutil.GetGaugeMetricValue(vipsWithoutNextHops); err != nil || v != 1 {
		t.Errorf("the standby's baremetal_load_balancer_vips_without_next_hops = %v (%v), want 1", v, err)
	}
}

// The provider's requests carry the traffic policy and selector, so two
// Services of one key share only when announced alike.
func TestLocalAndClusterServicesDoNotShare(t *testing.T) {
	c, _ := lbCloud(t, "")
	web := svcNamed("ns", "web")
	web.Annotations = map[string]string{annotations.SharingKey: "k"}
	local := svcNamed("ns", "dns")
	local.Annotations = map[string]string{annotations.SharingKey: "k"}
	local.Spec.Ports[0].Port = 53
	local.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
	local.Spec.Selector = map[string]string{"app": "dns"}
	w, l := ensure(t, c, web), ensure(t, c, local)
	if slices.Equal(w, l) {
		t.Errorf("a Local and a Cluster Service share %v", w)
	}
}

func endpointSlice(svc string, ready map[string]bool) *discoveryv1.EndpointSlice {
	sl := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: svc + "-1",
		Labels: map[string]string{discoveryv1.LabelServiceName: svc}}}
	for _, node := range slices.Sorted(maps.Keys(ready)) {
		r := ready[node]
		sl.Endpoints = append(sl.Endpoints, discoveryv1.Endpoint{NodeName: &node, Conditions: discoveryv1.EndpointConditions{Ready: &r}})
	}
	return sl
}

// Only what can change a next hop converges: an endpoint of a Local load
// balancer whose nodes with ready endpoints change.
func TestOnlyEndpointChangesThatMoveNextHopsConverge(t *testing.T) {
	c, _ := lbCloud(t, "")
	local := svcNamed("ns", "local")
	local.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
	cluster := svcNamed("ns", "cluster")
	internal := svcNamed("ns", "internal")
	internal.Spec.Type = v1.ServiceTypeClusterIP
	internal.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
	withServices(t, c, local, cluster, internal)
	onA := map[string]bool{"a": true}
	for _, tc := range []struct {
		name     string
		old, cur *discoveryv1.EndpointSlice
		converge bool
	}{
		{"a Local load balancer's slice added", nil, endpointSlice("local", onA), true},
		{"its endpoint turns ready on another node", endpointSlice("local", onA), endpointSlice("local", map[string]bool{"a": true, "b": true}), true},
		{"its endpoint turns unready", endpointSlice("local", onA), endpointSlice("local", map[string]bool{"a": false}), true},
		{"a resync", endpointSlice("local", onA), endpointSlice("local", onA), false},
		{"a second pod where one is ready already", endpointSlice("local", onA), func() *discoveryv1.EndpointSlice {
			sl := endpointSlice("local", onA)
			sl.Endpoints = append(sl.Endpoints, sl.Endpoints[0])
			return sl
		}(), false},
		{"a Cluster load balancer's endpoints move", endpointSlice("cluster", onA), endpointSlice("cluster", map[string]bool{"b": true}), false},
		{"a ClusterIP Service's endpoints move", endpointSlice("internal", onA), endpointSlice("internal", map[string]bool{"b": true}), false},
		{"a slice of no Service", nil, endpointSlice("gone", onA), false},
	} {
		select { // nothing pending
		case <-c.lb.kick:
		default:
		}
		var old any
		if tc.old != nil {
			old = tc.old
		}
		c.lb.sliceChanged(old, tc.cur)
		converged := false
		select {
		case <-c.lb.kick:
			converged = true
		default:
		}
		if converged != tc.converge {
			t.Errorf("%s: converged %v, want %v", tc.name, converged, tc.converge)
		}
	}
}

// The route controller replaces a route whose Node's addresses changed by
// deleting it and creating it at once: the pod CIDR is never withdrawn in
// between. A route deleted for good goes once it has lingered.
func TestReplacedRouteIsNeverWithdrawn(t *testing.T) {
	c := newCloud(t, `
inventory:
  machines:
  - name: a
    addresses: [{type: InternalIP, address: 10.0.0.1}]
routes: {}
bgp: {localASN: 64512, routerID: 10.0.0.254}
`)
	withNodes(t, c, kubeletNode("a", "10.0.0.1", true, true))
	ctx := context.Background()
	r := &cloudprovider.Route{Name: "a/10.244.1.0/24", TargetNode: "a", DestinationCIDR: "10.244.1.0/24"}
	announced := func() bool {
		return slices.ContainsFunc(desiredPaths(c), func(a bgp.Announcement) bool { return a.Prefix.String() == "10.244.1.0/24" })
	}
	if err := c.CreateRoute(ctx, "", "", r); err != nil || !announced() {
		t.Fatalf("created: announced %v, %v", announced(), err)
	}
	if err := c.DeleteRoute(ctx, "", r); err != nil || !announced() {
		t.Fatalf("between the delete and the create of a replacement the route is withdrawn (%v)", err)
	}
	if routes, _ := c.ListRoutes(ctx, ""); len(routes) != 0 {
		t.Errorf("a deleted route is still listed: %v", routes)
	}
	if err := c.CreateRoute(ctx, "", "", r); err != nil || !announced() {
		t.Fatalf("re-created: announced %v, %v", announced(), err)
	}
	time.Sleep(routeLinger + 200*time.Millisecond)
	if !announced() {
		t.Errorf("the re-created route went when the old one's linger ended")
	}
	c.DeleteRoute(ctx, "", r)
	time.Sleep(routeLinger + 200*time.Millisecond)
	if announced() {
		t.Errorf("a route deleted for good is still announced after %s", routeLinger)
	}
}

// The service controller's node sync works from its own list of Services
// and may update the hosts of a Service whose load balancer was just
// deleted. That must not give the Service its address back: upstream asks
// GetLoadBalancer after a failed update and ignores the error when there
// is no load balancer.
func TestUpdatingADeletedLoadBalancerDoesNotRecreateIt(t *testing.T) {
	c, _ := lbCloud(t, "")
	ctx := context.Background()
	svc := svcNamed("ns", "gone")
	vip := ensure(t, c, svc)[0]
	if err := c.EnsureLoadBalancerDeleted(ctx, "", svc); err != nil {
		t.Fatal(err)
	}
	if err := c.UpdateLoadBalancer(ctx, "", svc, nil); err == nil {
		t.Error("UpdateLoadBalancer of a deleted load balancer succeeded, want an error")
	}
	if got := pathTo(c, vip); got != "not announced" {
		t.Errorf("%s after the update of the deleted Service: %s", vip, got)
	}
	if _, exists, err := c.GetLoadBalancer(ctx, "", svc); err != nil || exists {
		t.Errorf("GetLoadBalancer: exists %v, error %v; want no load balancer", exists, err)
	}
}

// baremetal_pool_addresses follows allocations and releases, and a pool
// that leaves the config leaves the metric.
func TestPoolAddressesMetric(t *testing.T) {
	c, _ := lbCloud(t, `  - {name: spare, addresses: ["10.9.0.0/30", "2001:db8::/126"], autoAssign: false}`)
	gauge := func(pool, family, state string) float64 {
		t.Helper()
		v, err := testutil.GetGaugeMetricValue(poolAddresses.WithLabelValues(pool, family, state))
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	check := func(when string, want map[[3]string]float64) {
		t.Helper()
		for k, w := range want {
			if got := gauge(k[0], k[1], k[2]); got != w {
				t.Errorf("%s: baremetal_pool_addresses{pool=%q,family=%q,state=%q} = %v, want %v", when, k[0], k[1], k[2], got, w)
			}
		}
	}
	check("at start", map[[3]string]float64{
		{"private", "IPv4", "used"}: 0, {"private", "IPv4", "free"}: 16,
		{"spare", "IPv4", "free"}: 4, {"spare", "IPv6", "free"}: 4,
	})
	for i := range 3 {
		ensure(t, c, svcNamed("ns", fmt.Sprint("s", i)))
	}
	check("three Services", map[[3]string]float64{{"private", "IPv4", "used"}: 3, {"private", "IPv4", "free"}: 13})
	if err := c.EnsureLoadBalancerDeleted(context.Background(), "", svcNamed("ns", "s1")); err != nil {
		t.Fatal(err)
	}
	check("one deleted", map[[3]string]float64{{"private", "IPv4", "used"}: 2, {"private", "IPv4", "free"}: 14})

	reloadWith(t, c, "")
	families, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var series []string
	for _, mf := range families {
		if mf.GetName() != "baremetal_pool_addresses" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "pool" {
					series = append(series, l.GetValue())
				}
			}
		}
	}
	if slices.Contains(series, "spare") {
		t.Errorf("after pool spare left the config its series remain: %v", series)
	}
}

// Two Services share a VIP; one is edited to externalTrafficPolicy Local,
// which the leader refuses: the VIP stays Cluster (via a, which has no
// endpoint) on the leader, after a node change too (UpdateLoadBalancer),
// and on a standby that derives it from the Services alone.
func TestRefusedPolicyEditMovesNoNextHop(t *testing.T) {
	c, _ := lbCloud(t, "")
	c.lb.cluster.slices = discoverylisters.NewEndpointSliceLister(namespacedIndex[*discoveryv1.EndpointSlice](t, nil))
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	shared := func(name string, port int32) *v1.Service {
		svc := svcNamed("ns", name)
		svc.Annotations = map[string]string{annotations.SharingKey: "k"}
		svc.Spec.Ports[0].Port = port
		return svc
	}
	web, api := shared("web", 80), shared("api", 443)
	vip := ensure(t, c, web)[0]
	if got := ensure(t, c, api); !slices.Equal(got, []string{vip}) {
		t.Fatalf("api got %v, want to share %s", got, vip)
	}
	const cluster = "via [10.0.0.1] communities [4294967041]"
	if got := pathTo(c, vip); got != cluster {
		t.Fatalf("before the edit: %s, want %s", got, cluster)
	}
	edited := api.DeepCopy()
	edited.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
	if _, err := c.EnsureLoadBalancer(context.Background(), "", edited, nil); err == nil {
		t.Fatal("the edit to Local was not refused")
	}
	if got := pathTo(c, vip); got != cluster {
		t.Errorf("the leader after the refused edit: %s, want %s", got, cluster)
	}
	if err := c.UpdateLoadBalancer(context.Background(), "", edited, nil); err != nil {
		t.Fatal(err)
	}
	if got := pathTo(c, vip); got != cluster {
		t.Errorf("the leader after a node change: %s, want %s", got, cluster)
	}

	// A standby sees the statuses the leader wrote at t0, and api's spec
	// edited at t0+1m.
	ours := func(svc *v1.Service) *v1.Service {
		svc = svc.DeepCopy()
		svc.CreationTimestamp = metav1.NewTime(t0)
		svc.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: vip}}
		return wroteIt(svc)
	}
	standbyWeb, standbyAPI := ours(web), ours(edited)
	standbyAPI.ManagedFields = append(standbyAPI.ManagedFields, metav1.ManagedFieldsEntry{Manager: "kubectl", Time: &metav1.Time{Time: t0.Add(time.Minute)}})
	withServices(t, c, standbyWeb, standbyAPI)
	c.lb.mu.Lock()
	c.lb.leading.Store(false)
	c.lb.mu.Unlock()
	if got := pathTo(c, vip); got != cluster {
		t.Errorf("a standby: %s, want %s", got, cluster)
	}
}
