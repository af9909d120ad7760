package l2announcer

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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/component-base/metrics/testutil"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/config"
	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/desired"
	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/inventory"
	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/l2"
	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/report"
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

func init() { legacyregistry.MustRegister(Metrics()...) }

// events records the Events said, as "Kind name Reason: message".
type events struct {
	mu  sync.Mutex
	all []string
}

func (e *events) add(obj report.Object, _, reason, msg string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.all = append(e.all, strings.TrimSpace(obj.Kind+" "+obj.Name)+" "+reason+": "+msg)
}

func (e *events) count(prefix string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for _, s := range e.all {
		if strings.HasPrefix(s, prefix) {
			n++
		}
	}
	return n
}

// site is the desired state's inputs: Ready, initialised nodes and the
// Services holding layer 2 (and one routed) VIPs.
type site struct {
	cfg      *config.Config
	nodes    []*v1.Node
	services []desired.Service
	last     *desired.State
}

func newSite(t *testing.T, text string, vips int) *site {
	t.Helper()
	cfg, err := config.Parse([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	s := &site{cfg: cfg}
	for name, addr := range map[string]string{"a": "192.168.1.11", "b": "192.168.1.12", "c": "192.168.1.13", "far": "10.9.0.1"} {
		s.nodes = append(s.nodes, node(name, addr, true))
	}
	for i := range vips {
		s.add(fmt.Sprintf("web-%d", i), fmt.Sprintf("192.168.1.%d", 200+i), "lan", nil)
	}
	s.add("routed", "10.1.0.1", "routed", nil)
	return s
}

func node(name, addr string, ready bool) *v1.Node {
	status := v1.ConditionFalse
	if ready {
		status = v1.ConditionTrue
	}
	return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1.NodeSpec{ProviderID: "baremetal://" + name},
		Status: v1.NodeStatus{Addresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: addr}},
			Conditions: []v1.NodeCondition{{Type: v1.NodeReady, Status: status}}}}
}

func (s *site) add(name, vip, pool string, endpoints map[string]bool) {
	s.services = append(s.services, desired.Service{Namespace: "ns", Name: name, Local: endpoints != nil, EndpointNodes: endpoints,
		VIPs: []desired.Held{{Addr: netip.MustParseAddr(vip), Pool: pool}}})
}

func (s *site) state() *desired.State {
	s.last = desired.Compute(desired.Input{LoadBalancer: &s.cfg.LoadBalancer,
		Nodes: desired.Judge(s.nodes, inventory.New(s.cfg.Inventory), nil), Services: s.services, Previous: s.last})
	return s.last
}

// leader is an announcer answering s on a fake eth0.
func leader(t *testing.T, s *site) (*Announcer, *fakeSegment, *events) {
	t.Helper()
	ev := &events{}
	a := New(&report.Reporter{Events: ev.add})
	seg := newFakeSegment()
	a.Open = func(ctx context.Context, _ string, _ *Announcer) (Segment, error) { seg.ctx = ctx; return seg, nil }
	a.want = s.state()
	a.openSegments(context.Background())
	return a, seg, ev
}

// step gives a the site's state now and converges once.
func step(a *Announcer, s *site) {
	a.want = s.state()
	a.openSegments(context.Background())
	a.converge()
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

func TestAnswersEachVIPWithOneEligibleNode(t *testing.T) {
	s := newSite(t, l2Config, 30)
	a, seg, _ := leader(t, s)
	step(a, s)
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
		if v, err := testutil.GetGaugeMetricValue(vipsPerNode.WithLabelValues("eth0", node)); err != nil || int(v) != want {
			t.Errorf("baremetal_l2_vips{interface=eth0,node=%s} = %v (%v), want %d", node, v, err, want)
		}
	}
}

func TestVIPsOfALeavingNodeMoveAndOnlyThose(t *testing.T) {
	s := newSite(t, l2Config, 30)
	a, seg, ev := leader(t, s)
	step(a, s)
	before := answers(t, seg.last())
	s.nodes = []*v1.Node{node("a", "192.168.1.11", true), node("b", "192.168.1.12", false), node("c", "192.168.1.13", true)}
	step(a, s)
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
	s.nodes = []*v1.Node{node("far", "10.9.0.1", true)}
	step(a, s)
	if len(seg.last()) != 0 {
		t.Errorf("answering %v with no node on the segment", seg.last())
	}
	if ev.count("Service web-0 VIPNotAnnounced: address 192.168.1.") != 1 {
		t.Errorf("no VIPNotAnnounced Event: %v", ev.all)
	}
	if v, err := testutil.GetGaugeMetricValue(vipsUnanswered); err != nil || v != 30 {
		t.Errorf("baremetal_l2_vips_unanswered = %v (%v), want 30", v, err)
	}
	// The series of nodes that carry nothing any more are gone.
	families, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == "baremetal_l2_vips" && len(f.GetMetric()) != 0 {
			t.Errorf("%d series of baremetal_l2_vips with no VIP answered", len(f.GetMetric()))
		}
	}
}

func TestLocalPolicyNamesOnlyNodesWithAnEndpoint(t *testing.T) {
	s := newSite(t, l2Config, 0)
	for i := range 10 {
		s.add(fmt.Sprintf("local-%d", i), fmt.Sprintf("192.168.1.%d", 220+i), "lan", map[string]bool{"c": true})
	}
	a, seg, _ := leader(t, s)
	step(a, s)
	got := answers(t, seg.last())
	if len(got) != 10 {
		t.Errorf("answering %d VIPs, want 10", len(got))
	}
	for vip, n := range got {
		if n != "c" {
			t.Errorf("%s answered with %s; only c has a ready endpoint", vip, n)
		}
	}
}

// A node whose machine lists no MAC is asked for on the segment; a node
// listing several is asked for too, and named by the one seen there.
func TestHardwareAddresses(t *testing.T) {
	s := newSite(t, l2Config, 30)
	a, seg, _ := leader(t, s)
	step(a, s)
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
func TestNodeWithSeveralMACsNoneSeenIsSkipped(t *testing.T) {
	s := newSite(t, l2Config, 30)
	a, seg, ev := leader(t, s)
	step(a, s)
	if !slices.Contains(answersOf(seg.last()), "02:00:00:00:00:cc") {
		t.Fatalf("c, seen at its second MAC, carries nothing: %v", seg.last())
	}
	seg.mu.Lock()
	delete(seg.learned, netip.MustParseAddr("192.168.1.13"))
	seg.mu.Unlock()
	step(a, s)
	step(a, s)
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
	step(a, s)
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

func TestVIPOutsideTheSegmentIsSaidOnceAndNotAnswered(t *testing.T) {
	s := newSite(t, l2Config, 0)
	s.add("elsewhere", "172.16.0.1", "elsewhere", nil)
	a, seg, ev := leader(t, s)
	step(a, s)
	step(a, s)
	if _, ok := seg.last()[netip.MustParseAddr("172.16.0.1")]; ok {
		t.Errorf("answering for 172.16.0.1, outside 192.168.1.0/24")
	}
	if n := ev.count("Service elsewhere VIPOutsideSegment: address 172.16.0.1 is in no subnet of interface eth0"); n != 1 {
		t.Errorf("VIPOutsideSegment said %d times, want once: %v", n, ev.all)
	}
}

// An interface that cannot be opened is said once on the Pod and tried
// again; its VIPs are answered once it opens.
func TestInterfaceThatWillNotOpen(t *testing.T) {
	s := newSite(t, l2Config, 2)
	ev := &events{}
	a := New(&report.Reporter{Events: ev.add})
	a.Open = func(context.Context, string, *Announcer) (Segment, error) {
		return nil, errors.New("opening an ARP socket on eth0 (it needs CAP_NET_RAW): operation not permitted")
	}
	a.want = s.state()
	a.openSegments(context.Background())
	clear(a.tried) // as if 10 s had passed
	a.openSegments(context.Background())
	if n := ev.count(`Pod L2NotStarted: loadBalancer.pools[0].l2.interface "eth0": opening an ARP socket on eth0 (it needs CAP_NET_RAW)`); n != 1 {
		t.Errorf("L2NotStarted said %d times, want once: %v", n, ev.all)
	}
	seg := newFakeSegment()
	a.Open = func(context.Context, string, *Announcer) (Segment, error) { return seg, nil }
	a.openSegments(context.Background())
	if len(a.segments) != 0 {
		t.Error("tried again at once, not after 10 s")
	}
	clear(a.tried)
	step(a, s)
	if len(seg.last()) != 2 {
		t.Errorf("after the interface opened: answering %v, want the 2 VIPs", seg.last())
	}
	if a.failed["eth0"] != nil {
		t.Errorf("the error is kept after the interface opened: %v", a.failed)
	}
}

// A VIP whose pool leaves the config is still answered where it was, also
// when no pool names its interface any more.
func TestVIPOfARemovedPoolIsStillAnswered(t *testing.T) {
	s := newSite(t, l2Config, 2)
	a, seg, _ := leader(t, s)
	step(a, s)
	text := strings.Replace(l2Config, "  - {name: lan, addresses: [192.168.1.200-192.168.1.250], announce: l2, l2: {interface: eth0}}\n", "", 1)
	text = strings.Replace(text, "  - {name: elsewhere, addresses: [172.16.0.0/28], autoAssign: false, announce: l2, l2: {interface: eth0}}\n", "", 1)
	cfg, err := config.Parse([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	s.cfg = cfg
	for i := range s.services {
		if s.services[i].VIPs[0].Pool == "lan" {
			s.services[i].VIPs[0].Pool = "" // outside every pool now
		}
	}
	step(a, s)
	if seg.ctx.Err() != nil {
		t.Fatal("eth0 was closed although two VIPs are answered there")
	}
	if len(seg.last()) != 2 {
		t.Errorf("after the pool went: answering %v, want its 2 VIPs still", seg.last())
	}
}

// A new leader's first table already names the nodes it learns: asked at
// once, they answer within the wait. Without it every VIP would first go
// to the nodes the inventory gives a MAC, then move.
func TestFirstTableWaitsForLearnedNodes(t *testing.T) {
	s := newSite(t, l2Config, 30)
	a := New(&report.Reporter{})
	seg := newFakeSegment()
	b := netip.MustParseAddr("192.168.1.12")
	seg.answering = map[netip.Addr]net.HardwareAddr{b: seg.learned[b]}
	delete(seg.learned, b)
	a.Open = func(context.Context, string, *Announcer) (Segment, error) { return seg, nil }
	step(a, s)
	perNode := map[string]int{}
	for _, n := range answers(t, seg.tables[0]) {
		perNode[n]++
	}
	if perNode["b"] == 0 {
		t.Errorf("the first table puts no VIP on b, whose MAC answers within the wait: %v", perNode)
	}
}

// What is said of a layer 2 VIP is forgotten with it: an address given to
// a new Service is said again.
func TestSaidOnceIsForgottenWithTheVIP(t *testing.T) {
	s := newSite(t, l2Config, 0)
	s.add("first", "172.16.0.1", "elsewhere", nil)
	a, _, ev := leader(t, s)
	step(a, s)
	s.services = slices.DeleteFunc(s.services, func(d desired.Service) bool { return d.Name == "first" })
	step(a, s)
	if said := a.report.Said("l2"); len(said) != 0 {
		t.Errorf("%d problems kept for VIPs no Service holds: %v", len(said), said)
	}
	s.add("second", "172.16.0.1", "elsewhere", nil)
	step(a, s)
	if n := ev.count("Service first VIPOutsideSegment: address 172.16.0.1 ") + ev.count("Service second VIPOutsideSegment: address 172.16.0.1 "); n != 2 {
		t.Errorf("VIPOutsideSegment said %d times for 172.16.0.1, held by two Services in turn, want twice: %v", n, ev.all)
	}
}

// A socket of an interface that closed is not reported down for ever.
func TestSocketsOfAClosedInterfaceAreForgotten(t *testing.T) {
	var s sockets
	s.set("eth1", "arp", true)
	s.set("eth2", "ndp", true)
	s.forget("eth1", "arp")
	if got := s.down(); len(got) != 1 || !got["eth2/ndp"] {
		t.Errorf("sockets down %v, want eth2/ndp only", got)
	}
}
