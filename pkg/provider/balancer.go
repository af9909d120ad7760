package provider

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/bgpannouncer"
	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/config"
	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/desired"
	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/inventory"
	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/ipam"
	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/l2announcer"
	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/report"
)

// balancer is the load balancer as the framework drives it: the
// allocations (kept by the load-balancer calls on the leader, derived from
// the Services' status on a standby), the routes, and the loop that
// computes the desired state on a change and hands it to the announcers.
// Data flows one way: cluster and config in, desired state out, announcers
// take it; none of them calls back.
type balancer struct {
	mu       sync.Mutex
	cfg      *config.Config
	inv      *inventory.Inventory
	alloc    *ipam.Allocator
	derived  bool // alloc holds the cluster's allocations, not just the pools
	services map[string]*lbService
	routes   routeTable
	pins     pinnedAddresses
	last     *desired.State // computed last; a VIP whose pool went keeps its way from it
	// leading is set once this replica allocates; until then it follows
	// what the Services' status says. ready is closed when it is set.
	// Atomic: the reporter asks it while b.mu is held.
	leading atomic.Bool
	ready   chan struct{}
	kick    chan struct{} // asks the loop for a convergence

	cluster *cluster
	health  *nodeHealth
	report  *report.Reporter
	bgp     *bgpannouncer.Announcer
	l2      *l2announcer.Announcer
}

// lbService is what the provider knows of one LoadBalancer Service. Its
// traffic policy is its addresses' (ipam.Allocator.TrafficLocal): a
// refused edit of the spec does not move its next hops.
type lbService struct {
	namespace, name string
}

func newBalancer(cfg *config.Config, inv *inventory.Inventory, r *report.Reporter) *balancer {
	b := &balancer{
		cfg:      cfg,
		inv:      inv,
		alloc:    ipam.New(cfg.LoadBalancer.Pools),
		services: map[string]*lbService{},
		routes:   newRouteTable(),
		pins:     newPinnedAddresses(),
		ready:    make(chan struct{}),
		kick:     make(chan struct{}, 1),
		cluster:  newCluster(),
		report:   r,
		bgp:      bgpannouncer.New(cfg, r),
		l2:       l2announcer.New(r),
	}
	b.health = newNodeHealth(cfg.LoadBalancer.HealthCheck, r, b.announce)
	b.countPools()
	return b
}

func (b *balancer) waitReady(ctx context.Context) error {
	select {
	case <-b.ready:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("load-balancer state not rebuilt from the Services yet: %w", ctx.Err())
	}
}

// run follows the cluster and announces until ctx ends; every replica runs
// it at start. The first table is computed before the speaker starts, so
// that it opens no session without it, and before the layer 2 segments
// open, so that they answer from it. Layer 2 goes on through an API-server
// outage, from the last table and the health checks: a segment has no
// graceful restart to lean on, as routers have for BGP.
func (b *balancer) run(ctx context.Context, reachable func(context.Context) error, apiLoss time.Duration) {
	if !b.cluster.waitSynced(ctx) {
		return
	}
	b.health.start(ctx)
	if err := b.converge(); err != nil {
		klog.ErrorS(err, "Computing the first table")
	}
	go b.loop(ctx)
	go b.l2.Run(ctx)
	b.bgp.Run(ctx, reachable, apiLoss)
}

// lead makes this replica the one that allocates: the allocations are
// derived from the Services' status once more, then kept by the load
// balancer calls. Its speaker and its layer 2 segments, running since the
// process started, go on: a failover opens no session and leaves no
// question unanswered.
func (b *balancer) lead(ctx context.Context) {
	if !b.cluster.waitSynced(ctx) {
		return
	}
	b.mu.Lock()
	b.leading.Store(true) // first: what the rebuild says goes on the Services
	b.derive(true)
	b.mu.Unlock()
	close(b.ready)
	b.health.start(ctx)
	b.announce()
}

// reload puts a new config in force: pools, attributes, peers and the
// machines that may be next hops change, allocations stay.
func (b *balancer) reload(ctx context.Context, cfg *config.Config, inv *inventory.Inventory) {
	b.mu.Lock()
	b.cfg, b.inv = cfg, inv
	b.health.setSettings(cfg.LoadBalancer.HealthCheck)
	b.alloc.SetPools(cfg.LoadBalancer.Pools)
	b.countPools()
	b.mu.Unlock()
	b.bgp.SetConfig(ctx, cfg)
	b.announce()
}

// announce asks for a convergence. Requests coalesce: a burst of changes
// (a thousand Services created at once, a Node that every VIP uses) costs
// a few convergences, not one each.
func (b *balancer) announce() {
	select {
	case b.kick <- struct{}{}:
	default: // one is pending already; it will see this change too
	}
}

// settle is the least time between the starts of two convergences. A
// change after a quiet spell (a Node joining or going NotReady) is
// converged at once; in a burst, the changes that come within settle of
// the last convergence share the next one (each costs a pass over every
// path) and share its UPDATE messages: paths are packed by next hop, so a
// Service converged alone costs one UPDATE per node.
const settle = 100 * time.Millisecond

// loop converges on request until ctx ends; a failed convergence is tried
// again.
func (b *balancer) loop(ctx context.Context) {
	var last time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-b.kick:
		}
		if wait := settle - time.Since(last); wait > 0 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
			// This convergence sees what was asked for while it waited.
			select {
			case <-b.kick:
			default:
			}
		}
		last = time.Now()
		if err := b.converge(); err != nil {
			klog.ErrorS(err, "Converging BGP announcements; retrying")
			time.AfterFunc(time.Second, b.announce)
		}
	}
}

// converge computes the desired state and hands it to the announcers.
// Every replica answers on layer 2 as every replica speaks BGP: each
// answer names the node a VIP is placed on (by rendezvous of the VIP and
// the nodes that may carry it), not the replica, so replicas that see the
// same cluster give the same answer, and a replica's death leaves the
// others answering. Their answers differ only while their views do (a
// Service's status, a health verdict on its way), for one convergence.
func (b *balancer) converge() error {
	st, _ := b.compute()
	b.report.Report("desired", st.Problems, func(p report.Problem) bool {
		vip, err := netip.ParseAddr(p.Subject)
		return err != nil || st.Holds(vip)
	})
	vipsWithoutNextHops.Set(float64(st.Unannounced()))
	endpointNodesLeftOut.Set(float64(st.LeftOut))
	tableFingerprint.Set(float64(st.Fingerprint()))
	b.l2.Apply(st)
	return b.bgp.Apply(st.Tables)
}

// selections are the routers' choices of next hops in cfg: one table of
// paths is computed for each.
func selections(cfg *config.Config) []config.PathSelection {
	sels, _ := cfg.BGP.Selections()
	return sels
}

// compute is the desired state of the cluster as this replica sees it: a
// standby first derives the allocations from the Services' status.
func (b *balancer) compute() (_ *desired.State, leading bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.leading.Load() {
		b.derive(false)
	}
	b.last = desired.Compute(b.input())
	return b.last, b.leading.Load()
}

// input is what the desired state is computed from. The health checker's
// targets become the nodes that may carry traffic. Callers hold b.mu.
func (b *balancer) input() desired.Input {
	nodes := b.judged()
	services := make([]desired.Service, 0, len(b.services))
	for key, s := range b.services {
		ds := desired.Service{Namespace: s.namespace, Name: s.name}
		for _, vip := range b.alloc.Addresses(key) {
			ds.VIPs = append(ds.VIPs, desired.Held{Addr: vip, Pool: b.alloc.PoolOf(vip)})
		}
		if len(ds.VIPs) > 0 && b.alloc.TrafficLocal(ds.VIPs[0].Addr) {
			ds.Local, ds.EndpointNodes = true, b.cluster.endpointNodes(s.namespace, s.name)
		}
		services = append(services, ds)
	}
	checked := b.cfg.LoadBalancer.HealthCheck.On() && len(b.services) > 0
	return desired.Input{
		LoadBalancer: &b.cfg.LoadBalancer,
		Routes:       b.cfg.Routes,
		Nodes:        nodes,
		Services:     services,
		Serving:      b.health.verdicts(checked, nodes.Carriers),
		RouteTable:   b.routes.table(),
		Selections:   selections(b.cfg),
		Previous:     b.last,
	}
}

// judged is every Node as the cloud sees it, pinning the addresses of
// those seen initialised for the first time. Callers hold b.mu.
func (b *balancer) judged() desired.Nodes {
	all, _ := b.cluster.nodes.List(labels.Everything())
	b.pins.pin(all, func(n *v1.Node) bool { return desired.Eligible(n) && desired.Ready(n) })
	b.pins.keep(all)
	return desired.Judge(all, b.inv, b.pins.pins)
}

// judgedNode is one Node as the cloud sees it; nil if there is no such
// Node. Callers hold b.mu.
func (b *balancer) judgedNode(name string) *desired.Node {
	node, err := b.cluster.nodes.Get(name)
	if err != nil {
		return nil
	}
	b.pins.pin([]*v1.Node{node}, nil)
	return desired.Judge([]*v1.Node{node}, b.inv, b.pins.pins).ByName[name]
}

// countPools sets baremetal_pool_addresses to what the allocator holds.
// Callers hold b.mu.
func (b *balancer) countPools() {
	var series []report.Series
	for _, u := range b.alloc.Usage() {
		family := u.Family.String()
		series = append(series,
			report.Series{Labels: []string{u.Pool, family, "used"}, Value: float64(u.Used)},
			report.Series{Labels: []string{u.Pool, family, "free"}, Value: u.Free()},
			report.Series{Labels: []string{u.Pool, family, "elsewhere"}, Value: float64(u.Elsewhere)})
	}
	poolSeries.Set(series)
}

// elsewhereChanged follows a change of the addresses another
// implementation's Services hold, once the allocations are derived.
func (b *balancer) elsewhereChanged() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.derived {
		return // derived later, with the set as it is then
	}
	b.noteElsewhere()
	b.countPools()
}

// noteElsewhere hands the allocator the addresses another
// implementation's Services hold, and says which of them are in a pool:
// pools that overlap that implementation's are a misconfiguration the
// CCM survives (it hands none of them out) but the site should fix.
// Callers hold b.mu.
func (b *balancer) noteElsewhere() {
	if b.cluster.svcs == nil {
		return // no informers yet
	}
	b.alloc.SetElsewhere(b.cluster.heldElsewhere())
	var problems []report.Problem
	for _, e := range b.alloc.Elsewhere() {
		problems = append(problems, report.Problem{Reason: "AddressHeldElsewhere", Object: report.Self, Subject: e.Address.String(),
			Log: "An address of a pool is held by a Service another implementation serves; it is not handed out", LogValues: []any{"pool", e.Pool, "address", e.Address, "service", e.Service},
			Message: fmt.Sprintf("address %s of pool %q is held by Service %s, which another implementation serves (another loadBalancerClass, or none with --ignore-class-less-services): this CCM hands it out to no Service; give the two implementations disjoint pools",
				e.Address, e.Pool, e.Service)})
	}
	b.report.Report("elsewhere", problems, nil)
}

// derive sets the allocations and routes to what the cluster records: the
// addresses in each Service's status, each Node's pod CIDRs. The leader
// derives them once, when it takes over, and reports conflicts; a standby
// derives them at every convergence, quietly, so that it announces what
// the leader wrote, and drops a Service as soon as its deletion starts.
// Callers hold b.mu.
func (b *balancer) derive(leading bool) {
	svcs, err := b.cluster.svcs.List(labels.Everything())
	if err != nil {
		klog.ErrorS(err, "Listing Services to derive the allocations")
		return
	}
	var claims []ipam.Claim
	byKey := map[string]*v1.Service{}
	for _, svc := range svcs {
		vips := statusAddresses(svc)
		if !managed(svc) || len(vips) == 0 || (!leading && svc.DeletionTimestamp != nil) {
			continue
		}
		req, err := allocationRequest(svc)
		req.NamespaceLabels = b.cluster.namespaceLabels(svc.Namespace)
		if err != nil && leading {
			klog.ErrorS(err, "Annotation of a Service with addresses is not valid; keeping its addresses", "service", klog.KObj(svc))
		}
		byKey[req.Service] = svc
		claims = append(claims, ipam.Claim{Request: req, Addresses: vips, Ours: wroteStatus(svc), Edited: editedSinceStatus(svc),
			Created: svc.CreationTimestamp.Time})
	}
	alloc, restored := ipam.Rebuild(b.cfg.LoadBalancer.Pools, ipam.ByHolder(claims))
	services := map[string]*lbService{}
	for _, r := range restored {
		svc := byKey[r.Service]
		if r.Lost != nil && leading {
			b.report.Event(report.Problem{Reason: "AddressConflict", Object: report.Service(svc.Namespace, svc.Name),
				Log: "Service status claims an address another Service holds", LogValues: []any{"kept", r.Kept, "err", r.Lost},
				Message: fmt.Sprintf("status.loadBalancer.ingress claims an address another Service holds (%v); this Service keeps %v and gets a new address for the rest", r.Lost, r.Kept)})
		}
		if r.Refused != nil && leading {
			// Its next EnsureLoadBalancer is refused too, and says so on
			// the Service (SyncLoadBalancerFailed).
			klog.ErrorS(r.Refused, "Service edited so that it may no longer share its address; it keeps it, and so do the others", "service", klog.KObj(svc), "kept", r.Kept)
		}
		if len(r.Foreign) > 0 && leading {
			b.report.Event(report.Problem{Reason: "AddressNotInPool", Object: report.Service(svc.Namespace, svc.Name),
				Log: "Service status names an address outside every pool that this CCM did not write; it is not announced", LogValues: []any{"addresses", r.Foreign},
				Message: fmt.Sprintf("status.loadBalancer.ingress names %v, outside every pool of loadBalancer.pools and not written by this CCM: it is not announced, and the Service gets an address of a pool", r.Foreign)})
		}
		if len(r.Kept) == 0 {
			continue
		}
		services[r.Service] = &lbService{namespace: svc.Namespace, name: svc.Name}
	}
	b.alloc, b.services, b.derived = alloc, services, true
	b.noteElsewhere()
	b.countPools()
	b.deriveRoutes()
	if leading {
		klog.InfoS("Rebuilt load-balancer allocations from Service status", "services", len(services), "routes", len(b.routes.routes))
	}
}

// fieldManager is the manager the API server records for this process's
// writes: the first word of its user agent, the binary's name.
var fieldManager = strings.SplitN(rest.DefaultKubernetesUserAgent(), "/", 2)[0]

// wroteStatus reports whether the CCM wrote the addresses in the Service's
// status.
func wroteStatus(svc *v1.Service) bool {
	return slices.ContainsFunc(svc.ManagedFields, func(mf metav1.ManagedFieldsEntry) bool {
		return mf.Manager == fieldManager && mf.Subresource == "status" && mf.FieldsV1 != nil &&
			bytes.Contains(mf.FieldsV1.Raw, []byte(`"f:ingress"`))
	})
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
