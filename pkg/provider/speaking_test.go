package provider

import (
	"context"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/annotations"
	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/report"
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

// wroteIt marks svc's status as this CCM's write, as the API server
// records it.
func wroteIt(svc *v1.Service) *v1.Service {
	svc.ManagedFields = append(svc.ManagedFields, metav1.ManagedFieldsEntry{Manager: fieldManager, Subresource: "status", Time: &svc.CreationTimestamp,
		FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:status":{"f:loadBalancer":{"f:ingress":{}}}}`)}})
	return svc
}

func withServices(t *testing.T, c *Cloud, svcs ...*v1.Service) {
	t.Helper()
	c.lb.cluster.svcs = corelisters.NewServiceLister(namespacedIndex(t, svcs))
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
		wroteIt(lbWithStatus("outside", t0, "192.0.2.9")),     // ours, kept outside the pools
		lbWithStatus("foreign", t0, "198.51.100.1"),           // another writer's, outside the pools: never announced
		lbWithStatus("pending", t0, ""),                       // no address yet
		deleting,
	}
	cluster := lbWithStatus("cluster-ip", t0, "10.1.0.7")
	cluster.Spec.Type = v1.ServiceTypeClusterIP
	svcs = append(svcs, cluster)

	c := newCloud(t, followConfig)
	withNodes(t, c, kubeletNode("a", "10.0.0.1", true, true), kubeletNode("b", "10.0.0.2", false, true))
	withServices(t, c, svcs...)

	c.lb.mu.Lock()
	c.lb.derive(false)
	c.lb.mu.Unlock()
	want := []string{"10.1.0.1 via [10.0.0.1]", "192.0.2.9 via [10.0.0.1]"}
	if got := announcedVIPs(c); !slices.Equal(got, want) {
		t.Errorf("standby announces %v, want %v", got, want)
	}

	// The leader derives the same, and keeps the Service being deleted
	// until the service controller has deleted its load balancer.
	c.lb.mu.Lock()
	c.lb.derive(true)
	c.lb.mu.Unlock()
	want = []string{"10.1.0.1 via [10.0.0.1]", "10.1.0.3 via [10.0.0.1]", "192.0.2.9 via [10.0.0.1]"}
	if got := announcedVIPs(c); !slices.Equal(got, want) {
		t.Errorf("leader announces %v, want %v", got, want)
	}
	if got := c.lb.alloc.Addresses("ns/copy"); len(got) != 0 {
		t.Errorf("the younger claimant holds %v; the older Service holds its address", got)
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
		c.lb.report.Events = func(ref report.Object, _, reason, msg string) {
			events = append(events, ref.Name+" "+reason+": "+msg)
		}
		withNodes(t, c, kubeletNode("a", "10.0.0.1", true, true))
		svcs := []*v1.Service{sameSecond("x"), sameSecond("y"), sameSecond("z"), edited, holder}
		rand.Shuffle(len(svcs), func(i, j int) { svcs[i], svcs[j] = svcs[j], svcs[i] })
		withServices(t, c, svcs...)
		c.lb.mu.Lock()
		c.lb.derive(true)
		for _, name := range []string{"x", "y", "z"} {
			if len(c.lb.alloc.Addresses("ns/"+name)) > 0 {
				winners[name]++
			}
		}
		holds := c.lb.alloc.Addresses("ns/holder")
		keeps := c.lb.alloc.Addresses("ns/edited")
		c.lb.mu.Unlock()
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

// A and B share an address; B is edited so that it may not share (its
// port now clashes) and EnsureLoadBalancer refused that, keeping the
// address. A failover must not renumber the innocent A: both keep it, and
// the edited B is the one refused when it is ensured again.
func TestRebuildKeepsARefusedShare(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	shared := func(name string, created time.Time, port int32) *v1.Service {
		svc := lbWithStatus(name, created, "10.1.0.7")
		svc.Annotations = map[string]string{annotations.SharingKey: "web"}
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
		c.lb.mu.Lock()
		c.lb.derive(leading)
		holdsA, holdsB := c.lb.alloc.Addresses("ns/a"), c.lb.alloc.Addresses("ns/b")
		c.lb.mu.Unlock()
		want := []netip.Addr{netip.MustParseAddr("10.1.0.7")}
		if !slices.Equal(holdsA, want) || !slices.Equal(holdsB, want) {
			t.Fatalf("leading %v: after the rebuild A holds %v and B %v, want both %v", leading, holdsA, holdsB, want)
		}
	}
	c := newCloud(t, followConfig)
	withNodes(t, c, kubeletNode("a", "10.0.0.1", true, true))
	withServices(t, c, a, b)
	c.lb.mu.Lock()
	c.lb.derive(true)
	c.lb.mu.Unlock()
	ctx := context.Background()
	if st, err := c.EnsureLoadBalancer(ctx, "", a, nil); err != nil || st.Ingress[0].IP != "10.1.0.7" {
		t.Errorf("the innocent A ensured: %v %v", st, err)
	}
	if _, err := c.EnsureLoadBalancer(ctx, "", b, nil); err == nil || !strings.Contains(err.Error(), "keeps its address") {
		t.Errorf("the edited B ensured: %v, want a refusal that keeps its address", err)
	}
}

func ptr[T any](v T) *T { return &v }

// A replica that takes the lead says on the Service what its rebuild
// found: the Events of a new leader are not a standby's, kept quiet.
func TestANewLeaderSaysWhatItsRebuildFound(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c := newCloud(t, followConfig)
	ev := recordEvents(c)
	c.lb.cluster.nodes = nodeLister(t, kubeletNode("a", "10.0.0.1", true, true))
	withServices(t, c, statusBy(lbWithStatus("holder", t0, "10.1.0.2"), fieldManager), statusBy(lbWithStatus("edited", t0.Add(-time.Hour), "10.1.0.2"), "kubectl-edit"))
	close(c.lb.cluster.informed)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	c.lb.lead(ctx)
	if !ev.has("Service edited AddressConflict") {
		t.Errorf("the new leader did not tell the loser: %v", ev.all)
	}
}
