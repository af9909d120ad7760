package provider

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/component-base/metrics/testutil"

	discoverylisters "k8s.io/client-go/listers/discovery/v1"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/config"
	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/l2"
)

// The segment is 192.168.1.0/24. Node a's MAC is in the inventory; b's is
// learned; c lists two, of which the segment sees the second; far is not
// on the segment and lists none.
const l2Config = `
inventory:
  machines:
  - {name: a, addresses: [{type: InternalIP, address: 192.168.1.11}], macAddresses: ["02:00:00:00:00:0a"]}
  - {name: b, addresses: [{type: InternalIP, address: 192.168.1.12}]}
  - {name: c, addresses: [{type: InternalIP, address: 192.168.1.13}], macAddresses: ["02:00:00:00:00:0c", "02:00:00:00:00:cc"]}
  - {name: far, addresses: [{type: InternalIP, address: 10.9.0.1}]}
loadBalancer:
  healthCheck: {enabled: false}
  pools:
  - {name: lan, addresses: [192.168.1.200-192.168.1.250], announce: l2, l2: {interface: eth0}}
  - {name: routed, addresses: [10.1.0.0/24]}
  - {name: elsewhere, addresses: [172.16.0.0/28], autoAssign: false, announce: l2, l2: {interface: eth0}}
bgp: {localASN: 64512, routerID: 10.0.0.254}
`

var l2MACs = map[string]string{"a": "02:00:00:00:00:0a", "b": "02:00:00:00:00:0b", "c": "02:00:00:00:00:cc"}

// fakeSegment is an interface on 192.168.1.0/24 where b and c answer.
type fakeSegment struct {
	ctx     context.Context // ends when the segment is closed
	mu      sync.Mutex
	learned map[netip.Addr]net.HardwareAddr
	// answering are nodes that answer only once asked.
	answering map[netip.Addr]net.HardwareAddr
	asked     []netip.Addr
	tables    []l2.Table
}

func newFakeSegment() *fakeSegment {
	return &fakeSegment{learned: map[netip.Addr]net.HardwareAddr{
		netip.MustParseAddr("192.168.1.12"): mustMAC("02:00:00:00:00:0b"),
		netip.MustParseAddr("192.168.1.13"): mustMAC("02:00:00:00:00:cc"),
	}}
}

func mustMAC(s string) net.HardwareAddr {
	hw, err := net.ParseMAC(s)
	if err != nil {
		panic(err)
	}
	return hw
}

func (f *fakeSegment) Subnets() []netip.Prefix {
	return []netip.Prefix{netip.MustParsePrefix("192.168.1.0/24")}
}
func (f *fakeSegment) Learned(ip netip.Addr) (net.HardwareAddr, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked = append(f.asked, ip)
	mac, ok := f.learned[ip]
	if !ok && f.answering[ip] != nil {
		// The node answers the question a moment later.
		mac := f.answering[ip]
		delete(f.answering, ip)
		time.AfterFunc(50*time.Millisecond, func() { f.mu.Lock(); f.learned[ip] = mac; f.mu.Unlock() })
	}
	return mac, ok
}
func (f *fakeSegment) Set(t l2.Table) { f.mu.Lock(); f.tables = append(f.tables, t); f.mu.Unlock() }
func (f *fakeSegment) last() l2.Table {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.tables) == 0 {
		return nil
	}
	return f.tables[len(f.tables)-1]
}

// l2Cloud is a leader with nodes a, b, c and far Ready, answering on a
// fake eth0, with count Services of the lan pool and one of routed.
func l2Cloud(t *testing.T, count int) (*Cloud, *fakeSegment, *events) {
	t.Helper()
	c := newCloud(t, l2Config)
	withNodes(t, c, kubeletNode("a", "192.168.1.11", true, true), kubeletNode("b", "192.168.1.12", true, true),
		kubeletNode("c", "192.168.1.13", true, true), kubeletNode("far", "10.9.0.1", true, true))
	withSlices(t, c)
	ev := &events{}
	c.net.eventf = func(ref *v1.ObjectReference, _, reason, format string, args ...any) {
		ev.add(ref.Kind + " " + ref.Name + " " + reason + ": " + fmt.Sprintf(format, args...))
	}
	c.net.podEventf = func(_, reason, format string, args ...any) {
		ev.add("Pod " + reason + ": " + fmt.Sprintf(format, args...))
	}
	seg := newFakeSegment()
	open := openSegment
	openSegment = func(ctx context.Context, _ string, _ *network) (segment, error) { seg.ctx = ctx; return seg, nil }
	t.Cleanup(func() { openSegment = open })
	c.net.leading = true
	c.net.openSegments(context.Background())
	for i := range count {
		ensure(t, c, svcNamed("ns", fmt.Sprintf("web-%d", i)))
	}
	routed := svcNamed("ns", "routed")
	routed.Annotations = map[string]string{"baremetal.cloudprovider.io/address-pool": "routed"}
	ensure(t, c, routed)
	return c, seg, ev
}

func withSlices(t *testing.T, c *Cloud, slices ...*discoveryv1.EndpointSlice) {
	t.Helper()
	c.net.slices = discoverylisters.NewEndpointSliceLister(namespacedIndex(t, slices))
}

// answers is the table as VIP → node name.
func answers(t *testing.T, table l2.Table) map[string]string {
	t.Helper()
	byMAC := map[string]string{}
	for n, mac := range l2MACs {
		byMAC[mac] = n
	}
	out := map[string]string{}
	for vip, mac := range table {
		n, ok := byMAC[mac.String()]
		if !ok {
			t.Fatalf("%s answered with %s, no node's address", vip, mac)
		}
		out[vip.String()] = n
	}
	return out
}

func TestLayer2AnswersEachVIPWithOneEligibleNode(t *testing.T) {
	c, seg, _ := l2Cloud(t, 30)
	c.net.convergeL2()
	got := answers(t, seg.last())
	if len(got) != 30 {
		t.Fatalf("answering for %d VIPs, want the 30 of pool lan: %v", len(got), got)
	}
	perNode := map[string]int{}
	for vip, n := range got {
		perNode[n]++
		if want := l2.Choose(netip.MustParseAddr(vip), []string{"a", "b", "c"}); n != want {
			t.Errorf("%s answered with %s, want %s (the rendezvous choice among a, b, c)", vip, n, want)
		}
	}
	if len(perNode) != 3 {
		t.Errorf("30 VIPs on nodes %v; want them spread over a, b and c (far is off the segment)", perNode)
	}
	for node, want := range perNode {
		if v, err := testutil.GetGaugeMetricValue(l2VIPs.WithLabelValues("eth0", node)); err != nil || int(v) != want {
			t.Errorf("baremetal_l2_vips{interface=eth0,node=%s} = %v (%v), want %d", node, v, err, want)
		}
	}
	// The routed pool's VIP goes to BGP, the layer 2 ones do not.
	paths := announcedVIPs(c)
	if len(paths) != 1 || !strings.HasPrefix(paths[0], "10.1.0.") {
		t.Errorf("BGP paths %v, want the routed pool's VIP only", paths)
	}
}

func TestLayer2VIPsOfALeavingNodeMoveAndOnlyThose(t *testing.T) {
	c, seg, ev := l2Cloud(t, 30)
	c.net.convergeL2()
	before := answers(t, seg.last())
	c.net.nodes = nodeLister(t, kubeletNode("a", "192.168.1.11", true, true), kubeletNode("b", "192.168.1.12", false, true),
		kubeletNode("c", "192.168.1.13", true, true))
	c.net.convergeL2()
	after := answers(t, seg.last())
	for vip, n := range before {
		switch {
		case n == "b" && after[vip] == "b":
			t.Errorf("%s still on b, which is NotReady", vip)
		case n != "b" && after[vip] != n:
			t.Errorf("%s moved from %s to %s, though %s stays", vip, n, after[vip], n)
		}
	}
	// No node at all: said on the Service.
	c.net.nodes = nodeLister(t, kubeletNode("far", "10.9.0.1", true, true))
	c.net.convergeL2()
	if len(seg.last()) != 0 {
		t.Errorf("answering %v with no node on the segment", seg.last())
	}
	if !ev.has("Service web-0 VIPNotAnnounced: address 192.168.1.") {
		t.Errorf("no VIPNotAnnounced Event: %v", ev.all)
	}
	if v, err := testutil.GetGaugeMetricValue(l2VIPsUnanswered); err != nil || v != 30 {
		t.Errorf("baremetal_l2_vips_unanswered = %v (%v), want 30", v, err)
	}
}

func TestLayer2LocalPolicyNamesOnlyNodesWithAnEndpoint(t *testing.T) {
	c, seg, _ := l2Cloud(t, 0)
	for i := range 10 {
		svc := svcNamed("ns", fmt.Sprintf("local-%d", i))
		svc.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
		ensure(t, c, svc)
	}
	var sl []*discoveryv1.EndpointSlice
	for i := range 10 {
		sl = append(sl, endpointSlice(fmt.Sprintf("local-%d", i), map[string]bool{"c": true, "a": false}))
		sl[i].Name = fmt.Sprintf("local-%d-1", i)
	}
	withSlices(t, c, sl...)
	c.net.convergeL2()
	for vip, n := range answers(t, seg.last()) {
		if n != "c" {
			t.Errorf("%s answered with %s; only c has a ready endpoint", vip, n)
		}
	}
}

func TestLayer2StandbyNeverAnswers(t *testing.T) {
	c, seg, _ := l2Cloud(t, 3)
	c.net.mu.Lock()
	c.net.leading = false
	c.net.mu.Unlock()
	c.net.convergeL2()
	if len(seg.tables) != 0 {
		t.Errorf("a standby set tables %v", seg.tables)
	}
}

// A node whose machine lists no MAC is asked for on the segment; a node
// listing several is asked for too, and named by the one seen there.
func TestLayer2HardwareAddresses(t *testing.T) {
	c, seg, _ := l2Cloud(t, 30)
	c.net.convergeL2()
	if !slices.Contains(seg.asked, netip.MustParseAddr("192.168.1.12")) {
		t.Errorf("b's address was not asked for on the segment: %v", seg.asked)
	}
	if slices.Contains(seg.asked, netip.MustParseAddr("192.168.1.11")) {
		t.Errorf("a's address was asked for, though the inventory gives its one MAC: %v", seg.asked)
	}
	for _, mac := range seg.last() {
		if mac.String() == "02:00:00:00:00:0c" {
			t.Errorf("c answered with the MAC the segment does not see")
		}
	}
}

// A node listing several MACs, none of them seen on the segment, is not
// named there: any of them may be on another segment, and its share of
// the VIPs would be black-holed. Its Node is told, once, naming the
// machine and the interface; once a MAC is seen it carries VIPs again.
func TestLayer2NodeWithSeveralMACsNoneSeenIsSkipped(t *testing.T) {
	c, seg, ev := l2Cloud(t, 30)
	c.net.convergeL2()
	if !slices.Contains(answersOf(seg.last()), "02:00:00:00:00:cc") {
		t.Fatalf("c, seen at its second MAC, carries nothing: %v", seg.last())
	}
	seg.mu.Lock()
	delete(seg.learned, netip.MustParseAddr("192.168.1.13"))
	seg.mu.Unlock()
	c.net.convergeL2()
	c.net.convergeL2()
	for _, mac := range answersOf(seg.last()) {
		if mac == "02:00:00:00:00:0c" || mac == "02:00:00:00:00:cc" {
			t.Fatalf("c, none of whose MACs is seen on eth0, is named: %v", seg.last())
		}
	}
	if len(seg.last()) != 30 {
		t.Errorf("%d of 30 VIPs answered, want all on the other nodes", len(seg.last()))
	}
	said := 0
	for _, e := range ev.all {
		if strings.HasPrefix(e, "Node c L2MACNotSeen: ") && strings.Contains(e, `machine "c"`) && strings.Contains(e, "eth0") {
			said++
		}
	}
	if said != 1 {
		t.Errorf("L2MACNotSeen said %d times, want once: %v", said, ev.all)
	}
	seg.mu.Lock()
	seg.learned[netip.MustParseAddr("192.168.1.13")] = mustMAC("02:00:00:00:00:0c")
	seg.mu.Unlock()
	c.net.convergeL2()
	if !slices.Contains(answersOf(seg.last()), "02:00:00:00:00:0c") {
		t.Errorf("c, seen again at its first MAC, carries nothing: %v", seg.last())
	}
}

func answersOf(t l2.Table) []string {
	var out []string
	for _, mac := range t {
		out = append(out, mac.String())
	}
	return out
}

func TestLayer2VIPOutsideTheSegmentIsSaidAndNotAnswered(t *testing.T) {
	c, seg, ev := l2Cloud(t, 0)
	svc := svcNamed("ns", "elsewhere")
	svc.Annotations = map[string]string{"baremetal.cloudprovider.io/address-pool": "elsewhere"}
	vip := ensure(t, c, svc)[0]
	c.net.convergeL2()
	c.net.convergeL2()
	if _, ok := seg.last()[netip.MustParseAddr(vip)]; ok {
		t.Errorf("answering for %s, outside 192.168.1.0/24", vip)
	}
	n := 0
	for _, e := range ev.all {
		if strings.HasPrefix(e, "Service elsewhere VIPOutsideSegment: address "+vip+" is in no subnet of interface eth0") {
			n++
		}
	}
	if n != 1 {
		t.Errorf("VIPOutsideSegment said %d times, want once: %v", n, ev.all)
	}
}

// An interface that cannot be opened is said once on the Pod and tried
// again; its VIPs are answered once it opens.
func TestLayer2InterfaceThatWillNotOpen(t *testing.T) {
	c, _, ev := l2Cloud(t, 2)
	c.net.mu.Lock()
	c.net.segments = map[string]*openedSegment{}
	c.net.mu.Unlock()
	openSegment = func(context.Context, string, *network) (segment, error) {
		return nil, errors.New("opening an ARP socket on eth0 (it needs CAP_NET_RAW): operation not permitted")
	}
	c.net.openSegments(context.Background())
	c.net.mu.Lock()
	c.net.segmentTried = map[string]time.Time{} // as if 10 s had passed
	c.net.mu.Unlock()
	c.net.openSegments(context.Background())
	n := 0
	for _, e := range ev.all {
		if strings.HasPrefix(e, `Pod L2NotStarted: loadBalancer.pools[0].l2.interface "eth0": opening an ARP socket on eth0 (it needs CAP_NET_RAW)`) {
			n++
		}
	}
	if n != 1 {
		t.Errorf("L2NotStarted said %d times, want once: %v", n, ev.all)
	}
	seg := newFakeSegment()
	openSegment = func(context.Context, string, *network) (segment, error) { return seg, nil }
	c.net.openSegments(context.Background())
	if len(c.net.segments) != 0 {
		t.Error("tried again at once, not after 10 s")
	}
	c.net.mu.Lock()
	c.net.segmentTried = map[string]time.Time{}
	c.net.mu.Unlock()
	c.net.openSegments(context.Background())
	c.net.convergeL2()
	if len(seg.last()) != 2 {
		t.Errorf("after the interface opened: answering %v, want the 2 VIPs", seg.last())
	}
}

// A VIP whose pool leaves the config is still answered where it was, also
// when no pool names its interface any more.
func TestLayer2VIPOfARemovedPoolIsStillAnswered(t *testing.T) {
	c, seg, _ := l2Cloud(t, 2)
	c.net.convergeL2()
	text := strings.Replace(l2Config, "  - {name: lan, addresses: [192.168.1.200-192.168.1.250], announce: l2, l2: {interface: eth0}}\n", "", 1)
	text = strings.Replace(text, "  - {name: elsewhere, addresses: [172.16.0.0/28], autoAssign: false, announce: l2, l2: {interface: eth0}}\n", "", 1)
	cfg, err := config.Parse([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	c.apply(cfg)
	c.net.openSegments(context.Background())
	if seg.ctx.Err() != nil {
		t.Fatal("eth0 was closed although two VIPs are answered there")
	}
	c.net.mu.Lock()
	c.net.segments["eth0"].segment = newFakeSegment()
	c.net.mu.Unlock()
	seg = c.net.segments["eth0"].segment.(*fakeSegment)
	c.net.convergeL2()
	if len(seg.last()) != 2 {
		t.Errorf("after the pool went: answering %v, want its 2 VIPs still", seg.last())
	}
	if paths := announcedVIPs(c); len(paths) != 1 {
		t.Errorf("BGP paths %v, want only the routed VIP", paths)
	}
}

// A new leader's first table already names the nodes it learns: asked at
// once, they answer within the wait. Without it every VIP would first go
// to the nodes the inventory gives a MAC, then move.
func TestLayer2FirstTableWaitsForLearnedNodes(t *testing.T) {
	c, _, _ := l2Cloud(t, 0)
	for i := range 30 {
		ensure(t, c, svcNamed("ns", fmt.Sprintf("web-%d", i)))
	}
	seg := newFakeSegment()
	b := netip.MustParseAddr("192.168.1.12")
	seg.answering = map[netip.Addr]net.HardwareAddr{b: seg.learned[b]}
	delete(seg.learned, b)
	c.net.mu.Lock()
	c.net.segments = map[string]*openedSegment{}
	c.net.mu.Unlock()
	openSegment = func(context.Context, string, *network) (segment, error) { return seg, nil }
	c.net.openSegments(context.Background())
	c.net.convergeL2()
	perNode := map[string]int{}
	for _, n := range answers(t, seg.tables[0]) {
		perNode[n]++
	}
	if perNode["b"] == 0 {
		t.Errorf("the first table puts no VIP on b, whose MAC answers within the wait: %v", perNode)
	}
}

// What is said of a layer 2 VIP is forgotten with it, whichever pass
// (BGP's or layer 2's) sees it go first: an address given to a new Service
// is said again, and nothing is kept for addresses no Service holds.
func TestLayer2SaidOnceIsForgottenWithTheVIP(t *testing.T) {
	c, _, ev := l2Cloud(t, 0)
	offSegment := func(name string, ip string) *v1.Service {
		svc := svcNamed("ns", name)
		svc.Annotations = map[string]string{"baremetal.cloudprovider.io/address-pool": "elsewhere"}
		if ip != "" {
			svc.Annotations["baremetal.cloudprovider.io/load-balancer-ips"] = ip
		}
		return svc
	}
	first := offSegment("first", "")
	vip := ensure(t, c, first)[0]
	c.net.convergeL2()
	if err := c.EnsureLoadBalancerDeleted(context.Background(), "", first); err != nil {
		t.Fatal(err)
	}
	// The BGP pass runs first, as it does on every replica.
	c.net.mu.Lock()
	c.net.desiredPaths()
	c.net.mu.Unlock()
	c.net.convergeL2()
	c.net.mu.Lock()
	left := len(c.net.offSegment) + len(c.net.l2Stranded) + len(c.net.vipL2)
	c.net.mu.Unlock()
	if left != 0 {
		t.Errorf("%d entries kept for VIPs no Service holds", left)
	}
	ensure(t, c, offSegment("second", vip))
	c.net.convergeL2()
	n := 0
	for _, e := range ev.all {
		if strings.Contains(e, "VIPOutsideSegment: address "+vip+" ") {
			n++
		}
	}
	if n != 2 {
		t.Errorf("VIPOutsideSegment said %d times for %s, held by two Services in turn, want twice: %v", n, vip, ev.all)
	}
}
