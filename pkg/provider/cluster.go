package provider

import (
	"context"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	corelisters "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	"k8s.io/client-go/tools/cache"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/config"
	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/desired"
	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/inventory"
)

// cluster is the provider's view of the cluster: Nodes, EndpointSlices and
// Services from the shared informers.
type cluster struct {
	nodes  corelisters.NodeLister
	slices discoverylisters.EndpointSliceLister
	svcs   corelisters.ServiceLister
	// namespaces are for pools that select Services by their Namespace's
	// labels.
	namespaces corelisters.NamespaceLister
	synced     []cache.InformerSynced
	// elsewhere are the addresses in the status of each LoadBalancer
	// Service this CCM does not serve (another implementation's), by
	// Service: kept as the informer says, so a deleted Service leaves.
	elsewhereMu sync.Mutex
	elsewhere   map[string][]netip.Addr
	// informed is closed once SetInformers has run; listed is set once
	// the informers have listed the cluster.
	informed chan struct{}
	once     sync.Once
	listed   atomic.Bool
}

func newCluster() *cluster { return &cluster{informed: make(chan struct{})} }

var _ cloudprovider.InformerUser = &Cloud{}

// SetInformers implements cloudprovider.InformerUser: the provider follows
// Node readiness and EndpointSlices itself, since the service controller
// does not pass those changes on, and a standby follows the Services'
// status. Every replica calls it at start (see Speak); the framework's call
// on the leader, with the same factory, then does nothing.
func (c *Cloud) SetInformers(factory informers.SharedInformerFactory) {
	c.lb.cluster.once.Do(func() { c.lb.follow(factory) })
}

// follow converges the load balancer on every change that can move a next
// hop, a route or (on a standby) an allocation.
func (b *balancer) follow(factory informers.SharedInformerFactory) {
	cl := b.cluster
	nodes := factory.Core().V1().Nodes()
	slicesInf := factory.Discovery().V1().EndpointSlices()
	svcs := factory.Core().V1().Services()
	nsInf := factory.Core().V1().Namespaces()
	cl.nodes, cl.slices, cl.svcs, cl.namespaces = nodes.Lister(), slicesInf.Lister(), svcs.Lister(), nsInf.Lister()
	cl.synced = []cache.InformerSynced{nodes.Informer().HasSynced, slicesInf.Informer().HasSynced, svcs.Informer().HasSynced, nsInf.Informer().HasSynced}
	close(cl.informed)
	onChange := func(any) { b.announce() }
	nodes.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		// A kubelet creates its Node before it reports it Ready; only then
		// does it change any next hop.
		AddFunc: func(obj any) {
			if node := obj.(*v1.Node); desired.Eligible(node) && desired.Ready(node) && desired.Initialised(node) {
				b.announce()
			}
		},
		UpdateFunc: func(old, cur any) {
			if desired.Routing(old.(*v1.Node)) != desired.Routing(cur.(*v1.Node)) {
				b.announce()
			}
		},
		DeleteFunc: onChange,
	})
	slicesInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { b.sliceChanged(nil, obj) },
		UpdateFunc: b.sliceChanged,
		DeleteFunc: func(obj any) { b.sliceChanged(nil, obj) },
	})
	// The leader learns of Services through the service controller's
	// calls; a standby from the status the leader writes.
	following := func(any) {
		if !b.leading.Load() {
			b.announce()
		}
	}
	svcs.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    following,
		UpdateFunc: func(_, cur any) { following(cur) },
		DeleteFunc: following,
	})
	// Another implementation's Services change without any of ours doing
	// so: the allocator, the pool metric and the Event follow them at once.
	elsewhere := func(obj any, deleted bool) {
		if cl.noteElsewhere(obj, deleted) {
			b.elsewhereChanged()
		}
	}
	svcs.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { elsewhere(obj, false) },
		UpdateFunc: func(_, cur any) { elsewhere(cur, false) },
		DeleteFunc: func(obj any) { elsewhere(obj, true) },
	})
}

// noteElsewhere records the addresses a Service this CCM does not serve
// holds (none once it is deleted, served, or without them), and reports
// whether they changed.
func (cl *cluster) noteElsewhere(obj any, deleted bool) (changed bool) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	svc, ok := obj.(*v1.Service)
	if !ok {
		return false
	}
	key := serviceKey(svc)
	var addrs []netip.Addr
	if !deleted && svc.Spec.Type == v1.ServiceTypeLoadBalancer && !managed(svc) {
		addrs = statusAddresses(svc)
	}
	cl.elsewhereMu.Lock()
	defer cl.elsewhereMu.Unlock()
	if slices.Equal(cl.elsewhere[key], addrs) {
		return false
	}
	if len(addrs) == 0 {
		delete(cl.elsewhere, key)
		return true
	}
	if cl.elsewhere == nil {
		cl.elsewhere = map[string][]netip.Addr{}
	}
	cl.elsewhere[key] = addrs
	return true
}

// namespaceLabels are the labels of the Namespace ns (none if it is not
// known yet).
func (cl *cluster) namespaceLabels(ns string) map[string]string {
	if cl.namespaces == nil {
		return nil
	}
	n, err := cl.namespaces.Get(ns)
	if err != nil {
		return nil
	}
	return n.Labels
}

// heldElsewhere is every address Services this CCM does not serve hold,
// with the first such Service by name (the same on every replica).
func (cl *cluster) heldElsewhere() map[netip.Addr]string {
	cl.elsewhereMu.Lock()
	defer cl.elsewhereMu.Unlock()
	out := map[netip.Addr]string{}
	for _, key := range slices.Sorted(maps.Keys(cl.elsewhere)) {
		for _, a := range cl.elsewhere[key] {
			if _, seen := out[a]; !seen {
				out[a] = key
			}
		}
	}
	return out
}

// sliceChanged converges when an EndpointSlice added, deleted or changed
// (from old to cur) can change a next hop: only an endpoint of an
// externalTrafficPolicy: Local load balancer does, and only when the nodes
// with a ready endpoint change. Pods of other Services, and resyncs, cost
// nothing.
func (b *balancer) sliceChanged(old, cur any) {
	if (old == nil || readyNodesOf(old) != readyNodesOf(cur)) && b.cluster.localLoadBalancer(cur) {
		b.announce()
	}
}

// localLoadBalancer reports whether an EndpointSlice (or its tombstone)
// belongs to a LoadBalancer Service of this provider with
// externalTrafficPolicy Local.
func (cl *cluster) localLoadBalancer(obj any) bool {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	sl, ok := obj.(*discoveryv1.EndpointSlice)
	if !ok {
		return false
	}
	svc, err := cl.svcs.Services(sl.Namespace).Get(sl.Labels[discoveryv1.LabelServiceName])
	return err == nil && managed(svc) && svc.Spec.ExternalTrafficPolicy == v1.ServiceExternalTrafficPolicyLocal
}

// readyNodesOf names the nodes where an EndpointSlice has a ready
// endpoint, in order.
func readyNodesOf(obj any) string {
	sl, ok := obj.(*discoveryv1.EndpointSlice)
	if !ok {
		return ""
	}
	var nodes []string
	for _, ep := range sl.Endpoints {
		if ep.NodeName != nil && (ep.Conditions.Ready == nil || *ep.Conditions.Ready) {
			nodes = append(nodes, *ep.NodeName)
		}
	}
	slices.Sort(nodes)
	return strings.Join(slices.Compact(nodes), ",")
}

// endpointNodes are the nodes with a ready endpoint of a Service.
func (cl *cluster) endpointNodes(namespace, name string) map[string]bool {
	out := map[string]bool{}
	sel := labels.SelectorFromSet(labels.Set{discoveryv1.LabelServiceName: name})
	list, _ := cl.slices.EndpointSlices(namespace).List(sel)
	for _, sl := range list {
		for _, ep := range sl.Endpoints {
			if ep.NodeName != nil && (ep.Conditions.Ready == nil || *ep.Conditions.Ready) {
				out[*ep.NodeName] = true
			}
		}
	}
	return out
}

// waitSynced waits for SetInformers and for the informers' first lists.
func (cl *cluster) waitSynced(ctx context.Context) bool {
	select {
	case <-cl.informed:
	case <-ctx.Done():
		return false
	}
	if !cache.WaitForNamedCacheSync("baremetal-load-balancer", ctx.Done(), cl.synced...) {
		return false
	}
	cl.listed.Store(true)
	return true
}

// listedNodes is every Node, once the informers have listed them; ok is
// false before.
func (cl *cluster) listedNodes() ([]*v1.Node, bool) {
	select {
	case <-cl.informed:
	default:
		return nil, false
	}
	for _, synced := range cl.synced {
		if !synced() {
			return nil, false
		}
	}
	all, err := cl.nodes.List(labels.Everything())
	return all, err == nil
}

// nodeKeys are the keys of every Node, once the informers have listed
// them; ok is false before.
func (cl *cluster) nodeKeys() ([]inventory.NodeKeys, bool) {
	all, ok := cl.listedNodes()
	keys := make([]inventory.NodeKeys, 0, len(all))
	for _, node := range all {
		keys = append(keys, desired.NodeKeys(node))
	}
	return keys, ok
}

// nodeOfMachine names another Node than name that the cloud initialised as
// machine m (it has m's provider ID), or "".
func (cl *cluster) nodeOfMachine(m *config.Machine, name string) string {
	all, _ := cl.listedNodes()
	id := m.EffectiveProviderID()
	for _, node := range all {
		if node.Name != name && node.Spec.ProviderID == id {
			return node.Name
		}
	}
	return ""
}
