package provider

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	corelisters "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/klog/v2"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/bgp"
	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/config"
	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/health"
	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/inventory"
	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/ipam"
)

// network holds the load-balancer state: the address allocations and the
// desired BGP paths, both derived from the cluster (Service status and
// annotations, Nodes, EndpointSlices), never stored elsewhere.
type network struct {
	eventf func(ref *v1.ObjectReference, eventType, reason, format string, args ...any)

	mu       sync.Mutex
	cfg      *config.Config
	inv      *inventory.Inventory
	alloc    *ipam.Allocator
	services map[string]*lbService
	routes   map[string]*route // by pod CIDR
	// leaving are routes deleted a moment ago, still announced (routeLinger).
	leaving map[string]*route
	speaker *bgp.Speaker

	// leading is set once this replica allocates; until then it follows
	// what the Services' status says. ready is closed when it is set.
	leading bool
	ready   chan struct{}
	// announceMu keeps one convergence of the speaker at a time.
	announceMu sync.Mutex
	// kick asks convergeLoop for a convergence; reloaded tells speak that
	// a new config is in force.
	kick     chan struct{}
	reloaded chan struct{}

	nodes  corelisters.NodeLister
	slices discoverylisters.EndpointSliceLister
	svcs   corelisters.ServiceLister
	synced []cache.InformerSynced
	// informed is closed once SetInformers has run.
	informed     chan struct{}
	informedOnce sync.Once
	speakOnce    sync.Once
	probeOnce    sync.Once

	// peersInForce are the peers the speaker has, by address; peerErrors
	// the problems last reported with them.
	peersInForce map[netip.Addr]bgp.Peer
	peersMu      sync.Mutex // one setPeers at a time
	peersWanted  map[netip.Addr]bool
	peerErrors   string
	noPeersSaid  bool
	podEventf    func(eventType, reason, format string, args ...any)

	// vipAttrs are the attributes each VIP was last announced with, kept
	// for a VIP whose pool went from the config: a no-export VIP must not
	// start leaking out of the AS. outside are the VIPs already reported
	// outside every pool, and stranded those reported without a next hop
	// of their family: each is said once.
	vipAttrs map[netip.Addr]bgp.Attributes
	outside  map[netip.Addr]bool
	stranded map[netip.Addr]bool

	// health probes the nodes; held is set while every node fails at once.
	health *health.Checker
	held   bool

	// The leader's layer 2 answers (layer2.go): the interfaces open, by
	// name, the errors said of those that would not open and when each was
	// last tried; l2kick asks
	// for a convergence of their tables. vipL2 is the interface each layer
	// 2 VIP was last answered on (kept for a VIP whose pool went);
	// offSegment and l2Stranded are VIPs reported unanswerable, once;
	// l2Counted the series of the per-node metric.
	segments      map[string]*openedSegment
	segmentErrors map[string]string
	segmentTried  map[string]time.Time
	l2kick        chan struct{}
	vipL2         map[netip.Addr]string
	offSegment    map[netip.Addr]bool
	l2Stranded    map[netip.Addr]bool
	l2Counted     map[[2]string]float64
	// macUnseen are the nodes, by (interface, node name), said to have
	// none of their several MACs seen there.
	macUnseen map[[2]string]eligibleNode

	// listedCluster is set once the informers have listed the cluster;
	// live is what the speaker and the sockets report (readiness.go).
	listedCluster bool
	live          liveness

	// pinned are the addresses Nodes without inventory addresses were
	// initialised with.
	pinned pinnedAddresses

	// poolSeries are the pool and family of each series of
	// baremetal_pool_addresses, to delete those of a pool that went.
	poolSeries map[[2]string]bool
}

func newNetwork(cfg *config.Config, inv *inventory.Inventory) *network {
	n := &network{
		cfg:      cfg,
		inv:      inv,
		alloc:    ipam.New(cfg.LoadBalancer.Pools),
		services: map[string]*lbService{},
		routes:   map[string]*route{},
		leaving:  map[string]*route{},
		ready:    make(chan struct{}),
		informed: make(chan struct{}),
		kick:     make(chan struct{}, 1),
		reloaded: make(chan struct{}, 1),
		eventf:   func(*v1.ObjectReference, string, string, string, ...any) {},
		vipAttrs: map[netip.Addr]bgp.Attributes{},
		outside:  map[netip.Addr]bool{},
		stranded: map[netip.Addr]bool{},

		segments:      map[string]*openedSegment{},
		segmentErrors: map[string]string{},
		segmentTried:  map[string]time.Time{},
		l2kick:        make(chan struct{}, 1),
		vipL2:         map[netip.Addr]string{},
		offSegment:    map[netip.Addr]bool{},
		l2Stranded:    map[netip.Addr]bool{},
		poolSeries:    map[[2]string]bool{},
		pinned:        newPinnedAddresses(),

		podEventf: func(string, string, string, ...any) {},
		health:    health.New(healthSettings(cfg.LoadBalancer.HealthCheck), nil),
	}
	n.health.OnRound = n.healthRound
	n.countPools()
	return n
}

var _ cloudprovider.InformerUser = &Cloud{}

// SetInformers implements cloudprovider.InformerUser: the provider follows
// Node readiness and EndpointSlices itself, since the service controller
// does not pass those changes on, and a standby follows the Services'
// status. Every replica calls it at start (see Speak); the framework's call
// on the leader, with the same factory, then does nothing.
func (c *Cloud) SetInformers(factory informers.SharedInformerFactory) {
	c.net.informedOnce.Do(func() { c.net.setInformers(factory) })
}

func (n *network) setInformers(factory informers.SharedInformerFactory) {
	nodes := factory.Core().V1().Nodes()
	slicesInf := factory.Discovery().V1().EndpointSlices()
	svcs := factory.Core().V1().Services()
	n.nodes, n.slices, n.svcs = nodes.Lister(), slicesInf.Lister(), svcs.Lister()
	n.synced = []cache.InformerSynced{nodes.Informer().HasSynced, slicesInf.Informer().HasSynced, svcs.Informer().HasSynced}
	close(n.informed)
	onChange := func(any) { n.announce() }
	nodes.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		// A kubelet creates its Node before it reports it Ready; only then
		// does it change any next hop.
		AddFunc: func(obj any) {
			if node := obj.(*v1.Node); nodeEligible(node) && nodeReady(node) && initialised(node) {
				n.announce()
			}
		},
		UpdateFunc: func(old, cur any) {
			if nodeRouting(old.(*v1.Node)) != nodeRouting(cur.(*v1.Node)) {
				n.announce()
			}
		},
		DeleteFunc: onChange,
	})
	slicesInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { n.sliceChanged(nil, obj) },
		UpdateFunc: n.sliceChanged,
		DeleteFunc: func(obj any) { n.sliceChanged(nil, obj) },
	})
	// The leader learns of Services through the service controller's
	// calls; a standby from the status the leader writes.
	following := func(any) {
		n.mu.Lock()
		leading := n.leading
		n.mu.Unlock()
		if !leading {
			n.announce()
		}
	}
	svcs.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    following,
		UpdateFunc: func(_, cur any) { following(cur) },
		DeleteFunc: following,
	})
}

// sliceChanged converges when an EndpointSlice added, deleted or changed
// (from old to cur) can change a next hop: only an endpoint of an
// externalTrafficPolicy: Local load balancer does, and only when the nodes
// with a ready endpoint change. Pods of other Services, and resyncs, cost
// nothing.
func (n *network) sliceChanged(old, cur any) {
	if (old == nil || readyNodesOf(old) != readyNodesOf(cur)) && n.localLoadBalancer(cur) {
		n.announce()
	}
}

// localLoadBalancer reports whether an EndpointSlice (or its tombstone)
// belongs to a LoadBalancer Service of this provider with
// externalTrafficPolicy Local.
func (n *network) localLoadBalancer(obj any) bool {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	sl, ok := obj.(*discoveryv1.EndpointSlice)
	if !ok {
		return false
	}
	svc, err := n.svcs.Services(sl.Namespace).Get(sl.Labels[discoveryv1.LabelServiceName])
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

func (n *network) waitReady(ctx context.Context) error {
	select {
	case <-n.ready:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("load-balancer state not rebuilt from the Services yet: %w", ctx.Err())
	}
}

// lead makes this replica the one that allocates: the allocations are
// derived from the Services' status once more, then kept by the load
// balancer calls. Its speaker, running since the process started, goes on
// with its sessions: a failover opens none.
func (n *network) lead(ctx context.Context) {
	if !n.waitSynced(ctx) {
		return
	}
	n.mu.Lock()
	n.derive(true)
	n.leading = true
	n.mu.Unlock()
	close(n.ready)
	n.startProbing(ctx)
	go n.answerLoop(ctx)
	n.announce()
}

// waitSynced waits for SetInformers and for the informers' first lists.
func (n *network) waitSynced(ctx context.Context) bool {
	select {
	case <-n.informed:
	case <-ctx.Done():
		return false
	}
	return cache.WaitForNamedCacheSync("baremetal-load-balancer", ctx.Done(), n.synced...)
}

// byHolder orders Services for a rebuild, so that in a conflict the true
// holder keeps the address, the same one at every rebuild: first those
// whose addresses this CCM wrote (its field manager owns their
// status.loadBalancer.ingress; a hand edit or a tool's takes it over), then
// the oldest, then by namespace and name. Who wrote each status is read
// once per Service, not at every comparison: a standby sorts at every
// convergence.
func byHolder(svcs []*v1.Service) {
	wrote := make(map[*v1.Service]bool, len(svcs))
	for _, svc := range svcs {
		wrote[svc] = wroteStatus(svc)
	}
	slices.SortFunc(svcs, func(a, b *v1.Service) int {
		if wa, wb := wrote[a], wrote[b]; wa != wb {
			if wa {
				return -1
			}
			return 1
		}
		if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
			return c
		}
		return strings.Compare(serviceKey(a), serviceKey(b))
	})
}

// fieldManager is the manager the API server records for this process's
// writes: the first word of its user agent, the binary's name.
var fieldManager = strings.SplitN(rest.DefaultKubernetesUserAgent(), "/", 2)[0]

// wroteStatus reports whether the CCM wrote the addresses in the Service's
// status.
func wroteStatus(svc *v1.Service) bool {
	for _, mf := range svc.ManagedFields {
		if mf.Manager == fieldManager && mf.Subresource == "status" && mf.FieldsV1 != nil &&
			bytes.Contains(mf.FieldsV1.Raw, []byte(`"f:ingress"`)) {
			return true
		}
	}
	return false
}

// editedSinceStatus reports whether the Service's spec or metadata was
// changed by someone else after this CCM last wrote its addresses: the
// API server records when each manager last changed what it owns (to the
// second).
func editedSinceStatus(svc *v1.Service) bool {
	var wrote, edited time.Time
	for _, mf := range svc.ManagedFields {
		if mf.Time == nil {
			continue
		}
		switch {
		case mf.Manager == fieldManager && mf.Subresource == "status":
			if mf.Time.After(wrote) {
				wrote = mf.Time.Time
			}
		case mf.Manager != fieldManager && mf.Subresource == "":
			if mf.Time.After(edited) {
				edited = mf.Time.Time
			}
		}
	}
	return !wrote.IsZero() && edited.After(wrote)
}

// derive sets the allocations and routes to what the cluster records: the
// addresses in each Service's status, each Node's pod CIDRs. The leader
// derives them once, when it takes over, and reports conflicts; a standby
// derives them at every convergence, quietly, so that it announces what
// the leader wrote, and drops a Service as soon as its deletion starts.
// Callers hold n.mu.
func (n *network) derive(leading bool) {
	svcs, err := n.svcs.List(labels.Everything())
	if err != nil {
		klog.ErrorS(err, "Listing Services to derive the allocations")
		return
	}
	byHolder(svcs)
	var claims []ipam.Claim
	byKey := map[string]*v1.Service{}
	for _, svc := range svcs {
		vips := statusAddresses(svc)
		if !managed(svc) || len(vips) == 0 || (!leading && svc.DeletionTimestamp != nil) {
			continue
		}
		req, err := allocationRequest(svc)
		if err != nil && leading {
			klog.ErrorS(err, "Annotation of a Service with addresses is not valid; keeping its addresses", "service", klog.KObj(svc))
		}
		byKey[req.Service] = svc
		claims = append(claims, ipam.Claim{Request: req, Addresses: vips, Ours: wroteStatus(svc), Edited: editedSinceStatus(svc)})
	}
	alloc, restored := ipam.Rebuild(n.cfg.LoadBalancer.Pools, claims)
	services := map[string]*lbService{}
	for _, r := range restored {
		svc := byKey[r.Service]
		if r.Lost != nil && leading {
			klog.ErrorS(r.Lost, "Service status claims an address another Service holds", "service", klog.KObj(svc), "kept", r.Kept)
			n.eventf(serviceRef(svc.Namespace, svc.Name), v1.EventTypeWarning, "AddressConflict",
				"status.loadBalancer.ingress claims an address another Service holds (%v); this Service keeps %v and gets a new address for the rest", r.Lost, r.Kept)
		}
		if r.Refused != nil && leading {
			// Its next EnsureLoadBalancer is refused too, and says so on
			// the Service (SyncLoadBalancerFailed).
			klog.ErrorS(r.Refused, "Service edited so that it may no longer share its address; it keeps it, and so do the others", "service", klog.KObj(svc), "kept", r.Kept)
		}
		if len(r.Kept) == 0 {
			continue
		}
		services[r.Service] = &lbService{namespace: svc.Namespace, name: svc.Name,
			etpLocal: svc.Spec.ExternalTrafficPolicy == v1.ServiceExternalTrafficPolicyLocal}
	}
	n.alloc, n.services = alloc, services
	n.countPools()
	n.routes = n.derivedRoutes()
	if leading {
		klog.InfoS("Rebuilt load-balancer allocations from Service status", "services", len(services), "routes", len(n.routes))
		n.warnOutsidePools(n.alloc.Outside())
	}
}

// reload puts a new config in force: pools, attributes, peers and the
// machines that may be next hops change, allocations stay.
func (n *network) reload(ctx context.Context, cfg *config.Config, inv *inventory.Inventory) {
	n.mu.Lock()
	n.cfg, n.inv = cfg, inv
	n.health.SetSettings(healthSettings(cfg.LoadBalancer.HealthCheck))
	n.warnOutsidePools(n.alloc.SetPools(cfg.LoadBalancer.Pools))
	n.countPools()
	n.mu.Unlock()
	select {
	case n.reloaded <- struct{}{}:
	default:
	}
	n.setPeers(ctx)
	n.announce()
}

// countPools sets baremetal_pool_addresses to what the allocator holds.
// Callers hold n.mu.
func (n *network) countPools() {
	now := map[[2]string]bool{}
	for _, u := range n.alloc.Usage() {
		family := u.Family.String()
		poolAddresses.WithLabelValues(u.Pool, family, "used").Set(float64(u.Used))
		poolAddresses.WithLabelValues(u.Pool, family, "free").Set(u.Free())
		now[[2]string{u.Pool, family}] = true
	}
	for series := range n.poolSeries {
		if !now[series] {
			poolAddresses.DeleteLabelValues(series[0], series[1], "used")
			poolAddresses.DeleteLabelValues(series[0], series[1], "free")
		}
	}
	n.poolSeries = now
}

// warnOutsidePools tells the Services whose address a pool edit left
// outside every pool, once: they keep it. Callers hold n.mu.
func (n *network) warnOutsidePools(outside []netip.Addr) {
	now := map[netip.Addr]bool{}
	for _, vip := range outside {
		now[vip] = true
	}
	for key, s := range n.services {
		for _, vip := range n.alloc.Addresses(key) {
			if now[vip] && !n.outside[vip] {
				klog.InfoS("Service address is outside every pool; it keeps serving", "service", s.namespace+"/"+s.name, "address", vip)
				n.serviceEventf(s, "AddressOutsidePools",
					"address %s is no longer in any pool of loadBalancer.pools; it keeps serving, with the BGP attributes it was announced with, but a new allocation would not get it", vip)
			}
		}
	}
	n.outside = now
}

// announce asks for the speaker to be converged to the current state.
// Requests coalesce: a burst of changes (a thousand Services created at
// once, a Node that every VIP uses) costs a few convergences, not one each.
func (n *network) announce() {
	for _, kick := range []chan struct{}{n.kick, n.l2kick} {
		select {
		case kick <- struct{}{}:
		default: // one is pending already; it will see this change too
		}
	}
}

// settle is the least time between the starts of two convergences. A
// change after a quiet spell (a Node joining or going NotReady) is
// converged at once; in a burst, the changes that come within settle of
// the last convergence share the next one (each costs a pass over every
// path) and share its UPDATE messages: paths are packed by next hop, so a
// Service converged alone costs one UPDATE per node.
const settle = 100 * time.Millisecond

// convergeLoop converges on request until ctx ends; a failed convergence
// is tried again.
func (n *network) convergeLoop(ctx context.Context) {
	var last time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-n.kick:
		}
		if wait := settle - time.Since(last); wait > 0 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
			// This convergence sees what was asked for while it waited.
			select {
			case <-n.kick:
			default:
			}
		}
		last = time.Now()
		if err := n.converge(); err != nil {
			klog.ErrorS(err, "Converging BGP announcements; retrying")
			time.AfterFunc(time.Second, n.announce)
		}
	}
}

// converge sets the speaker's paths to what the current state asks for.
func (n *network) converge() error {
	n.announceMu.Lock()
	defer n.announceMu.Unlock()
	n.mu.Lock()
	speaker := n.speaker
	if speaker == nil {
		n.mu.Unlock()
		return nil
	}
	if !n.leading {
		n.derive(false)
	}
	paths := n.desiredPaths()
	n.mu.Unlock()
	change, err := speaker.SetPaths(paths)
	pathUpdates.WithLabelValues("announce").Add(float64(change.Announced))
	pathUpdates.WithLabelValues("withdraw").Add(float64(change.Withdrawn))
	announcedPaths.Set(float64(speaker.Announced()))
	return err
}

// desiredPaths is every VIP via every eligible node, and every route.
// Services share one slice of next hops unless their traffic policy is
// Local, so the whole state is a few entries per Service. Callers hold n.mu.
func (n *network) desiredPaths() []bgp.Announcement {
	paths := n.routePaths()
	if !n.cfg.LoadBalancer.AnnouncesBGP() {
		return paths
	}
	attrs := map[string]bgp.Attributes{}
	for _, p := range n.cfg.LoadBalancer.Pools {
		attrs[p.Name] = attributesOf(p.BGP)
	}
	ready := n.healthy(n.readyNodes())
	all := byFamily(n.nextHops(nil, ready))
	seen := map[netip.Addr]bool{}
	unannounced := 0
	// The allocator is the one record of which Service holds which address.
	for key, s := range n.services {
		hops := all
		if s.etpLocal {
			hops = byFamily(n.nextHops(s, ready))
		}
		for _, vip := range n.alloc.Addresses(key) {
			seen[vip] = true
			if how, _ := n.announcedBy(vip); how != config.AnnounceBGP {
				continue
			}
			a, inPool := attrs[n.alloc.PoolOf(vip)]
			if inPool {
				n.vipAttrs[vip] = a
			} else {
				a = n.vipAttrs[vip]
			}
			if len(hops[vip.Is4()]) == 0 {
				unannounced++
			}
			n.reportStranded(s, vip, len(all[vip.Is4()]) == 0)
			paths = append(paths, bgp.Announcement{
				Prefix:     netip.PrefixFrom(vip, vip.BitLen()),
				NextHops:   hops[vip.Is4()],
				Attributes: a,
			})
		}
	}
	n.forgetVIPsBut(seen)
	vipsWithoutNextHops.Set(float64(unannounced))
	return paths
}

// forgetVIPsBut forgets what is kept of every VIP not in held: the
// attributes it was announced with, the interface it was answered on, and
// what was said of it. Both passes call it (a standby runs only the BGP
// one), so whichever sees a VIP go first forgets all of it. Callers hold
// n.mu.
func (n *network) forgetVIPsBut(held map[netip.Addr]bool) {
	gone := func(vip netip.Addr, _ bool) bool { return !held[vip] }
	for _, m := range []map[netip.Addr]bool{n.stranded, n.offSegment, n.l2Stranded} {
		maps.DeleteFunc(m, gone)
	}
	maps.DeleteFunc(n.vipAttrs, func(vip netip.Addr, _ bgp.Attributes) bool { return !held[vip] })
	maps.DeleteFunc(n.vipL2, func(vip netip.Addr, _ string) bool { return !held[vip] })
}

// reportStranded tells a Service, once, that its VIP cannot be announced:
// no eligible node has an address of its family. Callers hold n.mu.
func (n *network) reportStranded(s *lbService, vip netip.Addr, stranded bool) {
	n.sayOnce(n.stranded, s, vip, stranded, "VIP has next hops again", "VIP is not announced: no eligible node has an address of its family",
		func() string {
			return fmt.Sprintf("address %s is not announced: no Ready, initialised node that may carry traffic has an %s address", vip, familyName(vip))
		})
}

// sayOnce tells a Service that its VIP is not announced (VIPNotAnnounced),
// or logs that it is again, only when that changes: said records what was
// said of each VIP; event is built only when it is said. Callers hold n.mu.
func (n *network) sayOnce(said map[netip.Addr]bool, s *lbService, vip netip.Addr, bad bool, again, problem string, event func() string) {
	if bad == said[vip] {
		return
	}
	said[vip] = bad
	if !bad {
		klog.InfoS(again, "service", s.namespace+"/"+s.name, "address", vip)
		return
	}
	klog.ErrorS(nil, problem, "service", s.namespace+"/"+s.name, "address", vip)
	n.serviceEventf(s, "VIPNotAnnounced", "%s", event())
}

// serviceEventf records a Warning Event on a Service, from the leader
// only: every replica derives the same table, and a Service should hear
// each thing once. Callers hold n.mu.
func (n *network) serviceEventf(s *lbService, reason, format string, args ...any) {
	if n.leading {
		n.eventf(serviceRef(s.namespace, s.name), v1.EventTypeWarning, reason, format, args...)
	}
}

// byFamily splits addresses into IPv4 (true) and IPv6 (false).
func byFamily(addrs []netip.Addr) map[bool][]netip.Addr {
	out := map[bool][]netip.Addr{}
	for _, a := range addrs {
		out[a.Is4()] = append(out[a.Is4()], a)
	}
	return out
}

func attributesOf(a config.PoolBGP) bgp.Attributes {
	var out bgp.Attributes
	for _, c := range a.Communities {
		if v, err := config.ParseCommunity(c); err == nil {
			out.Communities = append(out.Communities, v)
		}
	}
	for _, c := range a.LargeCommunities {
		if v, err := config.ParseLargeCommunity(c); err == nil {
			out.LargeCommunities = append(out.LargeCommunities, bgp.LargeCommunity(v))
		}
	}
	if a.LocalPreference != nil {
		out.LocalPref = *a.LocalPreference
	}
	return out
}

func serviceRef(namespace, name string) *v1.ObjectReference {
	return &v1.ObjectReference{Kind: "Service", APIVersion: "v1", Namespace: namespace, Name: name}
}
