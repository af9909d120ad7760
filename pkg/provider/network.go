package provider

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	corelisters "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	"k8s.io/client-go/tools/cache"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/klog/v2"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/bgp"
	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/config"
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
	speaker  *bgp.Speaker

	// ready is closed once the allocations are rebuilt from the Services.
	ready chan struct{}
	// announceMu keeps one convergence of the speaker at a time.
	announceMu sync.Mutex
	// kick asks convergeLoop for a convergence.
	kick chan struct{}

	nodes  corelisters.NodeLister
	slices discoverylisters.EndpointSliceLister
	svcs   corelisters.ServiceLister
	synced []cache.InformerSynced
	// informed is closed once SetInformers has run.
	informed chan struct{}

	// peersInForce are the peers the speaker has, by address; peerErrors
	// the problems last reported with them.
	peersInForce map[netip.Addr]bgp.Peer
	peerErrors   string
	podEventf    func(eventType, reason, format string, args ...any)
}

func newNetwork(cfg *config.Config, inv *inventory.Inventory) *network {
	return &network{
		cfg:      cfg,
		inv:      inv,
		alloc:    ipam.New(cfg.LoadBalancer.Pools),
		services: map[string]*lbService{},
		routes:   map[string]*route{},
		ready:    make(chan struct{}),
		informed: make(chan struct{}),
		kick:     make(chan struct{}, 1),
		eventf:   func(*v1.ObjectReference, string, string, string, ...any) {},

		podEventf: func(string, string, string, ...any) {},
	}
}

var _ cloudprovider.InformerUser = &Cloud{}

// SetInformers implements cloudprovider.InformerUser: the provider follows
// Node readiness and EndpointSlices itself, since the service controller
// does not pass those changes on.
func (c *Cloud) SetInformers(factory informers.SharedInformerFactory) {
	n := c.net
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
		AddFunc:    onChange,
		UpdateFunc: func(_, cur any) { n.announce() },
		DeleteFunc: onChange,
	})
}

// start rebuilds the allocations from the Services' status, then starts
// the BGP speaker with the paths already known, so that a new leader
// announces everything at once. It runs on the leader only.
func (n *network) start(ctx context.Context) {
	// The framework calls SetInformers right after Initialize.
	select {
	case <-n.informed:
	case <-ctx.Done():
		return
	}
	if !cache.WaitForNamedCacheSync("baremetal-load-balancer", ctx.Done(), n.synced...) {
		return
	}
	n.rebuild()
	close(n.ready)
	n.mu.Lock()
	cfg := n.cfg
	n.mu.Unlock()
	if (cfg.LoadBalancer.Announce != config.AnnounceBGP && cfg.Routes == nil) || cfg.BGP.LocalASN == 0 {
		klog.InfoS("BGP announcements are off", "announce", cfg.LoadBalancer.Announce)
		return
	}
	// No peers yet: no session may open before the whole table is in.
	speaker, err := bgp.Start(ctx, speakerGlobal(cfg.BGP), slog.New(logr.ToSlogHandler(klog.Background().WithName("bgp"))), peerStateChanged)
	if err != nil {
		klog.ErrorS(err, "Starting the BGP speaker failed; VIPs are allocated but not announced")
		return
	}
	n.mu.Lock()
	n.speaker = speaker
	n.mu.Unlock()
	// Paths first, then peers: the first UPDATEs hold the whole table. The
	// peers are those of the config in force now: a reload that came while
	// the speaker started found no speaker to give them to.
	if err := n.converge(); err != nil {
		klog.ErrorS(err, "Setting the first BGP paths")
	}
	n.setPeers(ctx)
	go n.convergeLoop(ctx)
	go n.rereadPasswords(ctx)
	go func() {
		<-ctx.Done()
		speaker.Stop(context.Background(), true)
	}()
}

func (n *network) waitReady(ctx context.Context) error {
	select {
	case <-n.ready:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("load-balancer state not rebuilt from the Services yet: %w", ctx.Err())
	}
}

// rebuild records the addresses every Service already has.
func (n *network) rebuild() {
	svcs, err := n.svcs.List(labels.Everything())
	if err != nil {
		klog.ErrorS(err, "Listing Services to rebuild the allocations")
		return
	}
	// Oldest first, so that in a conflict the Service that had the address
	// first keeps it.
	slices.SortFunc(svcs, func(a, b *v1.Service) int { return a.CreationTimestamp.Compare(b.CreationTimestamp.Time) })
	n.mu.Lock()
	defer n.mu.Unlock()
	count := 0
	for _, svc := range svcs {
		vips := statusAddresses(svc)
		if !managed(svc) || len(vips) == 0 {
			continue
		}
		req, err := allocationRequest(svc)
		if err != nil {
			klog.ErrorS(err, "Annotation of a Service with addresses is not valid; keeping its addresses", "service", klog.KObj(svc))
		}
		if err := n.alloc.Assign(req, vips); err != nil {
			klog.ErrorS(err, "Service status claims an address another Service holds", "service", klog.KObj(svc))
			n.eventf(serviceRef(svc.Namespace, svc.Name), v1.EventTypeWarning, "AddressConflict", "the addresses in this Service's status are held by another Service: %v", err)
			continue
		}
		n.services[req.Service] = &lbService{namespace: svc.Namespace, name: svc.Name,
			etpLocal: svc.Spec.ExternalTrafficPolicy == v1.ServiceExternalTrafficPolicyLocal}
		count++
	}
	klog.InfoS("Rebuilt load-balancer allocations from Service status", "services", count)
	n.warnOutsidePools(n.alloc.Outside())
	n.rebuildRoutes()
}

// reload puts a new config in force: pools, attributes, peers and the
// machines that may be next hops change, allocations stay.
func (n *network) reload(ctx context.Context, cfg *config.Config, inv *inventory.Inventory) {
	n.mu.Lock()
	n.cfg, n.inv = cfg, inv
	n.warnOutsidePools(n.alloc.SetPools(cfg.LoadBalancer.Pools))
	n.mu.Unlock()
	n.setPeers(ctx)
	n.announce()
}

// warnOutsidePools tells the Services whose address a pool edit left
// outside every pool. They keep it. Callers hold n.mu.
func (n *network) warnOutsidePools(outside []netip.Addr) {
	for key, s := range n.services {
		for _, vip := range n.alloc.Addresses(key) {
			if slices.Contains(outside, vip) {
				klog.InfoS("Service address is outside every pool; it keeps serving", "service", s.namespace+"/"+s.name, "address", vip)
				n.eventf(serviceRef(s.namespace, s.name), v1.EventTypeWarning, "AddressOutsidePools",
					"address %s is no longer in any pool of loadBalancer.pools; it keeps serving, but a new allocation would not get it", vip)
			}
		}
	}
}

// announce asks for the speaker to be converged to the current state.
// Requests coalesce: a burst of changes (a thousand Services created at
// once, a Node that every VIP uses) costs a few convergences, not one each.
func (n *network) announce() {
	select {
	case n.kick <- struct{}{}:
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
	if n.cfg.LoadBalancer.Announce != config.AnnounceBGP {
		return paths
	}
	attrs := map[string]bgp.Attributes{}
	for _, p := range n.cfg.LoadBalancer.Pools {
		attrs[p.Name] = attributesOf(p.BGP)
	}
	ready := n.readyNodes()
	all := byFamily(n.nextHops(nil, ready))
	// The allocator is the one record of which Service holds which address.
	for key, s := range n.services {
		hops := all
		if s.etpLocal {
			hops = byFamily(n.nextHops(s, ready))
		}
		for _, vip := range n.alloc.Addresses(key) {
			paths = append(paths, bgp.Announcement{
				Prefix:     netip.PrefixFrom(vip, vip.BitLen()),
				NextHops:   hops[vip.Is4()],
				Attributes: attrs[n.alloc.PoolOf(vip)],
			})
		}
	}
	return paths
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
