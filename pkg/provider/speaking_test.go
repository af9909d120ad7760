package provider

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
)

const followConfig = `
inventory:
  machines:
  - name: a
    addresses: [{type: InternalIP, address: 10.0.0.1}]
  - name: b
    addresses: [{type: InternalIP, address: 10.0.0.2}]
loadBalancer:
  pools:
  - {name: site, addresses: [10.1.0.0/24]}
bgp: {localASN: 64512, routerID: 10.0.0.254}
`

func lbWithStatus(name string, created time.Time, vip string) *v1.Service {
	svc := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, CreationTimestamp: metav1.NewTime(created)},
		Spec:       v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer, Ports: []v1.ServicePort{{Port: 80}}},
	}
	if vip != "" {
		svc.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: vip}}
	}
	return svc
}

func withServices(t *testing.T, c *Cloud, svcs ...*v1.Service) {
	t.Helper()
	c.net.svcs = corelisters.NewServiceLister(namespacedIndex(t, svcs))
}

// namespacedIndex is an informer's index holding objs, by namespace.
func namespacedIndex[T any](t *testing.T, objs []T) cache.Indexer {
	t.Helper()
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, o := range objs {
		if err := idx.Add(o); err != nil {
			t.Fatal(err)
		}
	}
	return idx
}

// announcedVIPs is each VIP the network wants announced, with its next hops.
func announcedVIPs(c *Cloud) []string {
	c.net.mu.Lock()
	defer c.net.mu.Unlock()
	var out []string
	for _, p := range c.net.desiredPaths() {
		out = append(out, fmt.Sprint(p.Prefix.Addr(), " via ", p.NextHops))
	}
	slices.Sort(out)
	return out
}

// A standby announces what the Services' status says, as the leader
// would after taking over, except a Service whose deletion has started.
func TestStandbyAnnouncesWhatTheStatusSays(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	deleting := lbWithStatus("deleting", t0, "10.1.0.3")
	deleting.DeletionTimestamp = &metav1.Time{Time: t0.Add(time.Hour)}
	deleting.Finalizers = []string{"service.kubernetes.io/load-balancer-cleanup"}
	svcs := []*v1.Service{
		lbWithStatus("first", t0, "10.1.0.1"),
		lbWithStatus("copy", t0.Add(time.Minute), "10.1.0.1"), // a younger Service claiming it
		lbWithStatus("outside", t0, "192.0.2.9"),              // kept outside the pools
		lbWithStatus("pending", t0, ""),                       // no address yet
		deleting,
	}
	cluster := lbWithStatus("cluster-ip", t0, "10.1.0.7")
	cluster.Spec.Type = v1.ServiceTypeClusterIP
	svcs = append(svcs, cluster)

	c := newCloud(t, followConfig)
	withNodes(t, c, kubeletNode("a", "10.0.0.1", true, true), kubeletNode("b", "10.0.0.2", false, true))
	withServices(t, c, svcs...)

	c.net.mu.Lock()
	c.net.derive(false)
	c.net.mu.Unlock()
	want := []string{"10.1.0.1 via [10.0.0.1]", "192.0.2.9 via [10.0.0.1]"}
	if got := announcedVIPs(c); !slices.Equal(got, want) {
		t.Errorf("standby announces %v, want %v", got, want)
	}

	// The leader derives the same, and keeps the Service being deleted
	// until the service controller has deleted its load balancer.
	c.net.mu.Lock()
	c.net.derive(true)
	c.net.mu.Unlock()
	want = []string{"10.1.0.1 via [10.0.0.1]", "10.1.0.3 via [10.0.0.1]", "192.0.2.9 via [10.0.0.1]"}
	if got := announcedVIPs(c); !slices.Equal(got, want) {
		t.Errorf("leader announces %v, want %v", got, want)
	}
	if got := c.net.alloc.Addresses("ns/copy"); len(got) != 0 {
		t.Errorf("the younger claimant holds %v; the older Service holds its address", got)
	}
}

func TestRouterIDIsTheReplicasOwnAddressUnlessSet(t *testing.T) {
	t.Setenv(envPodIP, "10.0.0.7")
	c := newCloud(t, followConfig)
	if got := speakerGlobal(c.net.cfg.BGP).RouterID; got != netip.MustParseAddr("10.0.0.254") {
		t.Errorf("router ID %v, want the configured 10.0.0.254", got)
	}
	c = newCloud(t, strings.Replace(followConfig, ", routerID: 10.0.0.254", "", 1))
	if got := speakerGlobal(c.net.cfg.BGP).RouterID; got != netip.MustParseAddr("10.0.0.7") {
		t.Errorf("router ID %v, want POD_IP 10.0.0.7", got)
	}
}

// A replica stops speaking once the API server has been away for the
// whole apiLoss, and not for a shorter gap.
func TestAPILossIsTheWholeGrace(t *testing.T) {
	defer func(p time.Duration) { apiPoll = p }(apiPoll)
	apiPoll = 5 * time.Millisecond
	n := newCloud(t, followConfig).net
	down := errors.New("connection refused")

	answers := make(chan error)
	reachable := func(ctx context.Context) error {
		select {
		case err := <-answers:
			return err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	lost := make(chan time.Time, 1)
	start := time.Now()
	go func() {
		if n.watchAPI(context.Background(), reachable, 200*time.Millisecond) {
			lost <- time.Now()
		}
	}()
	// Failures for a while, then an answer: not lost.
	deadline := time.Now().Add(150 * time.Millisecond)
	for time.Now().Before(deadline) {
		answers <- down
	}
	answers <- nil
	// Then failures until it gives up.
	failFrom := time.Now()
	for {
		select {
		case at := <-lost:
			if at.Sub(failFrom) < 200*time.Millisecond {
				t.Fatalf("gave up %v after the last answer (%v after start); the grace is 200ms", at.Sub(failFrom), at.Sub(start))
			}
			return
		case answers <- down:
		case <-time.After(5 * time.Second):
			t.Fatal("the replica never gave up on an API server that stopped answering")
		}
	}
}

// statusBy gives a Service managed fields as the API server records them
// when manager last wrote its status.loadBalancer.ingress.
func statusBy(svc *v1.Service, manager string) *v1.Service {
	svc.ManagedFields = append(svc.ManagedFields, metav1.ManagedFieldsEntry{
		Manager: manager, Operation: metav1.ManagedFieldsOperationUpdate, Subresource: "status", APIVersion: "v1",
		FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:status":{"f:loadBalancer":{"f:ingress":{}}}}`)},
	})
	return svc
}

// A rebuild settles conflicting status the same way every time, and the
// Service whose address the CCM wrote keeps it against an older Service
// whose status was edited by hand to the same address; the loser is told,
// and keeps its other family.
func TestRebuildIsDeterministicAndTheTrueHolderWins(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	sameSecond := func(name string) *v1.Service { return statusBy(lbWithStatus(name, t0, "10.1.0.1"), fieldManager) }
	edited := lbWithStatus("edited", t0.Add(-time.Hour), "10.1.0.2")
	edited.Status.LoadBalancer.Ingress = append(edited.Status.LoadBalancer.Ingress, v1.LoadBalancerIngress{IP: "10.1.0.9"})
	edited.Spec.IPFamilies = []v1.IPFamily{v1.IPv4Protocol, v1.IPv4Protocol} // two addresses of one family stand in for two families
	statusBy(edited, "kubectl-edit")
	holder := statusBy(lbWithStatus("holder", t0.Add(time.Hour), "10.1.0.2"), fieldManager)

	winners := map[string]int{}
	for range 20 {
		c := newCloud(t, followConfig)
		var events []string
		c.net.eventf = func(ref *v1.ObjectReference, _, reason, format string, args ...any) {
			events = append(events, ref.Name+" "+reason+": "+fmt.Sprintf(format, args...))
		}
		withNodes(t, c, kubeletNode("a", "10.0.0.1", true, true))
		svcs := []*v1.Service{sameSecond("x"), sameSecond("y"), sameSecond("z"), edited, holder}
		rand.Shuffle(len(svcs), func(i, j int) { svcs[i], svcs[j] = svcs[j], svcs[i] })
		withServices(t, c, svcs...)
		c.net.mu.Lock()
		c.net.derive(true)
		for _, name := range []string{"x", "y", "z"} {
			if len(c.net.alloc.Addresses("ns/"+name)) > 0 {
				winners[name]++
			}
		}
		holds := c.net.alloc.Addresses("ns/holder")
		keeps := c.net.alloc.Addresses("ns/edited")
		c.net.mu.Unlock()
		if len(holds) != 1 || holds[0] != netip.MustParseAddr("10.1.0.2") {
			t.Errorf("the Service whose address the CCM wrote holds %v, want 10.1.0.2", holds)
		}
		if len(keeps) != 1 || keeps[0] != netip.MustParseAddr("10.1.0.9") {
			t.Errorf("the hand-edited Service keeps %v, want its other address 10.1.0.9", keeps)
		}
		if !slices.ContainsFunc(events, func(e string) bool { return strings.HasPrefix(e, "edited AddressConflict") }) {
			t.Errorf("no AddressConflict Event on the loser: %v", events)
		}
	}
	if len(winners) != 1 || winners["x"] != 20 {
		t.Errorf("winners over 20 rebuilds of three Services created in one second: %v, want x every time", winners)
	}
}

// A replica in a Pod on a Node the CCM has not initialised yet (the first
// start on a kubeadm cluster: the CCM initialises its own Node) has no
// POD_IP, as the kubelet knows no address for the Node. Its router ID is
// then the address it speaks to the routers from.
func TestRouterIDWithoutPodIPIsTheAddressTowardsThePeers(t *testing.T) {
	t.Setenv(envPodIP, "")
	cfg := strings.Replace(followConfig, "bgp: {localASN: 64512, routerID: 10.0.0.254}",
		"bgp: {localASN: 64512, peers: [{address: 127.0.0.1, asn: 64500}]}", 1)
	c := newCloud(t, cfg)
	if got := speakerGlobal(c.net.cfg.BGP).RouterID; got != netip.MustParseAddr("127.0.0.1") {
		t.Errorf("router ID %v, want 127.0.0.1, this host's address towards its peer", got)
	}
}

// A and B share an address; B is edited so that it may not share (its
// port now clashes) and EnsureLoadBalancer refused that, keeping the
// address. A failover must not renumber the innocent A: both keep it, and
// the edited B is the one refused when it is ensured again.
func TestRebuildKeepsARefusedShare(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	shared := func(name string, created time.Time, port int32) *v1.Service {
		svc := lbWithStatus(name, created, "10.1.0.7")
		svc.Annotations = map[string]string{AnnotationSharingKey: "web"}
		svc.Spec.Ports = []v1.ServicePort{{Port: port, Protocol: v1.ProtocolTCP}}
		statusBy(svc, fieldManager)
		at := metav1.NewTime(created.Add(time.Second))
		svc.ManagedFields[0].Time = &at
		svc.ManagedFields = append(svc.ManagedFields, metav1.ManagedFieldsEntry{Manager: "kubectl-client-side-apply", Operation: metav1.ManagedFieldsOperationUpdate, Time: ptr(metav1.NewTime(created))})
		return svc
	}
	// B is the older one, so a rebuild replays it first.
	b := shared("b", t0, 80)
	b.ManagedFields[1].Time = ptr(metav1.NewTime(t0.Add(time.Hour))) // edited after its status: port 443 -> 80
	a := shared("a", t0.Add(time.Minute), 80)
	for _, leading := range []bool{true, false} {
		c := newCloud(t, followConfig)
		withNodes(t, c, kubeletNode("a", "10.0.0.1", true, true))
		withServices(t, c, a, b)
		c.net.mu.Lock()
		c.net.derive(leading)
		holdsA, holdsB := c.net.alloc.Addresses("ns/a"), c.net.alloc.Addresses("ns/b")
		c.net.mu.Unlock()
		want := []netip.Addr{netip.MustParseAddr("10.1.0.7")}
		if !slices.Equal(holdsA, want) || !slices.Equal(holdsB, want) {
			t.Fatalf("leading %v: after the rebuild A holds %v and B %v, want both %v", leading, holdsA, holdsB, want)
		}
	}
	c := newCloud(t, followConfig)
	withNodes(t, c, kubeletNode("a", "10.0.0.1", true, true))
	withServices(t, c, a, b)
	c.net.mu.Lock()
	c.net.derive(true)
	c.net.mu.Unlock()
	ctx := context.Background()
	if st, err := c.EnsureLoadBalancer(ctx, "", a, nil); err != nil || st.Ingress[0].IP != "10.1.0.7" {
		t.Errorf("the innocent A ensured: %v %v", st, err)
	}
	if _, err := c.EnsureLoadBalancer(ctx, "", b, nil); err == nil || !strings.Contains(err.Error(), "keeps its address") {
		t.Errorf("the edited B ensured: %v, want a refusal that keeps its address", err)
	}
}

func ptr[T any](v T) *T { return &v }
