// Package bgpannouncer announces the desired state's paths over BGP: it
// owns the speaker, its peers and their password files, graceful restart
// across API-server outages, and the session metrics. It takes paths and a
// config; it knows nothing of Kubernetes objects.
//
// Every replica announces. Its table is derived from the cluster, so a
// standby holds sessions of its own with the same table as the leader. A
// failover then changes no session: the routers have the new leader's
// paths already, and only the dead replica's own session ends.
//
// Routers are sent different paths when their peers' maximumPaths or
// nodeSelector differ: the peers of each such selection have a speaker of
// their own (GoBGP sends every peer of a server the same paths), with that
// selection's table. A reload that moves a router to another selection, or
// changes its session's settings, hands it over to another speaker
// gracefully (see handover.go).
package bgpannouncer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/netip"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/bfd"
	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/bgp"
	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/config"
	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/report"
)

// EnvPodIP names the replica's own address (the downward API's
// status.podIP; with host networking, its node's address): the BGP router
// ID when the cloud config sets none, so that replicas differ.
const EnvPodIP = "POD_IP"

// APIPoll is how often a replica checks that it still reaches the API
// server, whose view its table is derived from.
var APIPoll = 2 * time.Second

// Announcer holds one replica's BGP speaker.
type Announcer struct {
	report *report.Reporter

	mu       sync.Mutex
	cfg      *config.Config
	speakers []*speaker                    // running
	tables   map[string][]bgp.Announcement // what each converges to, by selection key
	// running is the context speakers are started in while Run speaks,
	// nil otherwise; failed are the selections whose speaker did not start
	// in it (said on the Pod), not tried again until the next run.
	running context.Context
	failed  map[string]bool
	peers   peerBook
	// bfd is the BFD sessions of every speaker's routers (one listener
	// per process), created with the first peer that asks for BFD;
	// guarded by peers.set.
	bfd *bfd.Server

	applyMu  sync.Mutex    // one SetPaths at a time
	reloaded chan struct{} // a new config is in force
}

// New is an announcer for cfg, reporting to r; Run starts its speaker.
func New(cfg *config.Config, r *report.Reporter) *Announcer {
	return &Announcer{report: r, cfg: cfg, reloaded: make(chan struct{}, 1), peers: newPeerBook()}
}

// speaker is a running BGP speaker and the selection whose table it
// announces. key and held change under both applyMu and mu.
type speaker struct {
	*bgp.Speaker
	key string
	// listens is whether it holds bgp.listenPort.
	listens bool
	// held is set while it announces the table of the speaker it took
	// routers over from, until they have it (see release): Apply leaves
	// its table alone until then.
	held bool
}

// Speaks is whether a config has the speaker run.
func Speaks(cfg *config.Config) bool {
	return (cfg.LoadBalancer.AnnouncesBGP() || cfg.Routes != nil) && cfg.BGP.LocalASN != 0
}

// SetConfig puts a new config in force: its peers and their passwords. A
// config that gives BGP its first pool starts the speakers.
func (a *Announcer) SetConfig(ctx context.Context, cfg *config.Config) {
	a.mu.Lock()
	a.cfg = cfg
	a.mu.Unlock()
	select {
	case a.reloaded <- struct{}{}:
	default:
	}
	a.setPeers(ctx)
}

// Apply makes tables, by selection key (config.PathSelection.Key), the
// speakers' tables; a speaker whose selection has a table starts with it.
// A running speaker whose key is missing keeps its table: the config it
// belongs to is on its way out.
func (a *Announcer) Apply(tables map[string][]bgp.Announcement) error {
	a.applyMu.Lock()
	a.mu.Lock()
	a.tables = tables
	speakers := slices.Clone(a.speakers)
	unstarted := false
	for key := range tables {
		unstarted = unstarted || (a.keyed(key) == nil && a.running != nil && !a.failed[key])
	}
	a.mu.Unlock()
	var errs []error
	for _, s := range speakers {
		if paths, ok := tables[s.key]; ok && !s.held {
			errs = append(errs, a.setPaths(s.Speaker, paths))
		}
	}
	a.applyMu.Unlock()
	if unstarted {
		// A selection new to the config gets its speaker with its table.
		a.setPeers(context.Background())
	}
	return errors.Join(errs...)
}

func (a *Announcer) setPaths(speaker *bgp.Speaker, paths []bgp.Announcement) error {
	change, err := speaker.SetPaths(paths)
	pathUpdates.WithLabelValues("announce").Add(float64(change.Announced))
	pathUpdates.WithLabelValues("withdraw").Add(float64(change.Withdrawn))
	a.mu.Lock()
	total := 0
	for _, s := range a.speakers {
		total += s.Announced()
	}
	a.mu.Unlock()
	announcedPaths.Set(float64(total))
	a.countPeerPaths()
	return err
}

// countPeerPaths sets what each peer is sent, by family, from its
// speaker's table.
func (a *Announcer) countPeerPaths() {
	a.peers.mu.Lock()
	defer a.peers.mu.Unlock()
	for addr, p := range a.peers.inForce {
		s := a.peers.speakerOf[addr]
		for _, f := range []struct {
			name   string
			on, v6 bool
		}{{"IPv4", p.IPv4, false}, {"IPv6", p.IPv6, true}} {
			if !f.on || s == nil {
				peerPaths.DeleteLabelValues(addr.String(), f.name)
				continue
			}
			peerPaths.WithLabelValues(addr.String(), f.name).Set(float64(s.AnnouncedIn(f.v6)))
		}
	}
}

// Run runs the speakers until ctx ends, while the API server is reachable
// (reachable) and the config speaks BGP. A replica that has not reached
// the API server for apiLoss (the leader election's renew deadline, after
// which a leader exits) stops its speakers as a leader would, gracefully:
// the routers keep its paths as stale for their restart time, and it
// speaks again with fresh tables when the API server is back. Call it
// once the first tables are applied.
func (a *Announcer) Run(ctx context.Context, reachable func(context.Context) error, apiLoss time.Duration) {
	saidOff := false
	for ctx.Err() == nil {
		a.mu.Lock()
		cfg := a.cfg
		a.mu.Unlock()
		if !Speaks(cfg) {
			// A reload may give BGP a pool: the speakers start then.
			if !saidOff {
				klog.InfoS("BGP announcements are off; a reload that announces a pool over BGP starts them", "announce", cfg.LoadBalancer.Announce, "localASN", cfg.BGP.LocalASN)
				saidOff = true
			}
			select {
			case <-ctx.Done():
				return
			case <-a.reloaded:
			}
			continue
		}
		saidOff = false
		sctx, cancel := context.WithCancel(ctx)
		if err := a.checkRouterID(cfg.BGP); err != nil {
			cancel()
			return
		}
		a.mu.Lock()
		a.running, a.failed = sctx, map[string]bool{}
		a.mu.Unlock()
		a.setPeers(sctx)
		go a.rereadPasswords(sctx)
		lost := watchAPI(sctx, reachable, apiLoss)
		a.stopAll()
		cancel()
		if !lost {
			return
		}
		klog.ErrorS(nil, "The API server has been unreachable too long to trust this replica's view of the cluster; its BGP sessions end gracefully, and the routers keep its paths for their restart time", "after", apiLoss)
		waitAPI(ctx, reachable)
		klog.InfoS("The API server is back; speaking BGP again")
	}
}

// checkRouterID says, on the Pod and in a metric, when the speakers cannot
// start for want of a router ID.
func (a *Announcer) checkRouterID(b config.BGP) error {
	if speakerGlobal(b).RouterID.Is4() {
		return nil
	}
	a.report.Event(report.Problem{Reason: "BGPNotStarted", Object: report.Self,
		Log: "No BGP router ID: bgp.routerID is not set, POD_IP is not an IPv4 address and no IPv4 peer is reachable; VIPs are allocated but not announced", LogValues: []any{EnvPodIP, os.Getenv(EnvPodIP)},
		Message: fmt.Sprintf("bgp.routerID is not set, %s (%q) is not an IPv4 address and no IPv4 peer is reachable: set bgp.routerID and restart the CCM", EnvPodIP, os.Getenv(EnvPodIP))})
	speakerNotStarted.Set(1)
	return errors.New("no router ID")
}

// stopAll stops every speaker gracefully: the API server is away, or the
// replica is stopping.
func (a *Announcer) stopAll() {
	a.peers.set.Lock()
	defer a.peers.set.Unlock()
	a.mu.Lock()
	speakers := a.speakers
	a.speakers, a.running = nil, nil
	a.mu.Unlock()
	for _, s := range speakers {
		s.Stop(context.Background(), true)
	}
	a.peers.stopped()
	// After the sessions' graceful end: told AdminDown, the routers keep
	// the paths for their restart time rather than drop them as failed.
	a.setBFD(config.BGP{}, nil)
}

// start starts a speaker of a selection with its whole table in it before
// any session: no peers first, the paths, then (by the caller) its peers.
// The table is the selection's, or from, the table of the speaker whose
// routers it takes over (it is then held, see release). nil if it could
// not start, said on the Pod.
func (a *Announcer) start(ctx context.Context, b config.BGP, key string, from *bgp.Table) *speaker {
	global := speakerGlobal(b)
	a.mu.Lock()
	others := slices.ContainsFunc(a.speakers, func(s *speaker) bool { return s.listens })
	a.mu.Unlock()
	if others && global.ListenPort != 0 {
		// One speaker holds the port (bgp.listenPort is kept from the
		// start; a reload may split the peers into selections since). The
		// others dial out, as every speaker does.
		global.ListenPort = 0
		klog.InfoS("BGP speaker of a second selection dials out only: another holds bgp.listenPort", "selection", key, "listenPort", b.ListenPort)
	}
	started, err := bgp.Start(ctx, global, slog.New(logr.ToSlogHandler(klog.Background().WithName("bgp"))), a.peerStateChanged)
	if err != nil {
		a.report.Event(report.Problem{Reason: "BGPNotStarted", Object: report.Self,
			Log: "Starting the BGP speaker failed; VIPs are allocated but not announced", LogValues: []any{"err", err},
			Message: fmt.Sprintf("the BGP speaker did not start (%v): VIPs are allocated but not announced from this replica until it restarts", err)})
		speakerNotStarted.Set(1)
		a.mu.Lock()
		a.failed[key] = true
		a.mu.Unlock()
		return nil
	}
	speakerNotStarted.Set(0)
	s := &speaker{Speaker: started, key: key, listens: global.ListenPort != 0, held: from != nil}
	// Registered under applyMu: an Apply after this one reaches it.
	a.applyMu.Lock()
	defer a.applyMu.Unlock()
	a.mu.Lock()
	paths := a.tables[key]
	a.speakers = append(a.speakers, s)
	a.mu.Unlock()
	if from != nil {
		if err := started.Load(*from); err != nil {
			klog.ErrorS(err, "Loading the BGP paths of the speaker whose routers this one takes over")
		}
		return s
	}
	if err := a.setPaths(started, paths); err != nil {
		klog.ErrorS(err, "Setting the first BGP paths")
	}
	return s
}

// keyed is the speaker of key to give a new peer: one announcing the
// key's table (not held), else any; nil if none. Called under mu.
func (a *Announcer) keyed(key string) *speaker {
	var held *speaker
	for _, s := range a.speakers {
		if s.key != key {
			continue
		}
		if !s.held {
			return s
		}
		if held == nil {
			held = s
		}
	}
	return held
}

// Status is what readiness is judged on, and the status page shows.
type Status struct {
	Speaking bool
	Peers    []netip.Addr // the peers wanted, sorted
	// Sessions are the peers' sessions as last reported.
	Sessions map[netip.Addr]bgp.PeerState
}

// Status is the speakers' state now.
func (a *Announcer) Status() Status {
	a.mu.Lock()
	speaking := len(a.speakers) > 0
	a.mu.Unlock()
	wanted, sessions := a.peers.snapshot()
	peers := slices.SortedFunc(maps.Keys(wanted), netip.Addr.Compare)
	return Status{Speaking: speaking, Peers: peers, Sessions: sessions}
}

// Sent is what peer is sent now, by prefix (see bgp.Speaker.Sent); nil
// while no speaker runs for it.
func (a *Announcer) Sent(peer netip.Addr) (map[netip.Prefix][]netip.Addr, error) {
	speaker := a.peers.speaker(peer)
	if speaker == nil {
		return nil, nil
	}
	return speaker.Sent(peer)
}

// watchAPI returns false when ctx ends, true once the API server has not
// answered for apiLoss.
func watchAPI(ctx context.Context, reachable func(context.Context) error, apiLoss time.Duration) bool {
	last := time.Now()
	t := time.NewTicker(APIPoll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
		}
		if err := reachable(ctx); err == nil {
			last = time.Now()
		} else if time.Since(last) >= apiLoss {
			return true
		}
	}
}

// waitAPI returns once the API server answers, or ctx ends.
func waitAPI(ctx context.Context, reachable func(context.Context) error) {
	t := time.NewTicker(APIPoll)
	defer t.Stop()
	for reachable(ctx) != nil {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
