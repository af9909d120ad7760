// Package bgpannouncer announces the desired state's paths over BGP: it
// owns the speaker, its peers and their password files, graceful restart
// across API-server outages, and the session metrics. It takes paths and a
// config; it knows nothing of Kubernetes objects.
//
// Every replica announces. Its table is derived from the cluster, so a
// standby holds sessions of its own with the same table as the leader. A
// failover then changes no session: the routers have the new leader's
// paths already, and only the dead replica's own session ends.
package bgpannouncer

import (
	"context"
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

	mu      sync.Mutex
	cfg     *config.Config
	speaker *bgp.Speaker
	paths   []bgp.Announcement // the table the speaker converges to
	peers   peerBook

	applyMu  sync.Mutex    // one SetPaths at a time
	reloaded chan struct{} // a new config is in force
}

// New is an announcer for cfg, reporting to r; Run starts its speaker.
func New(cfg *config.Config, r *report.Reporter) *Announcer {
	return &Announcer{report: r, cfg: cfg, reloaded: make(chan struct{}, 1), peers: newPeerBook()}
}

// Speaks is whether a config has the speaker run.
func Speaks(cfg *config.Config) bool {
	return (cfg.LoadBalancer.AnnouncesBGP() || cfg.Routes != nil) && cfg.BGP.LocalASN != 0
}

// SetConfig puts a new config in force: its peers and their passwords. A
// config that gives BGP its first pool starts the speaker.
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

// Apply makes paths the speaker's table; with no speaker running, they are
// the table it starts with.
func (a *Announcer) Apply(paths []bgp.Announcement) error {
	a.applyMu.Lock()
	defer a.applyMu.Unlock()
	a.mu.Lock()
	a.paths = paths
	speaker := a.speaker
	a.mu.Unlock()
	if speaker == nil {
		return nil
	}
	change, err := speaker.SetPaths(paths)
	pathUpdates.WithLabelValues("announce").Add(float64(change.Announced))
	pathUpdates.WithLabelValues("withdraw").Add(float64(change.Withdrawn))
	announcedPaths.Set(float64(speaker.Announced()))
	return err
}

// Run runs the speaker until ctx ends, while the API server is reachable
// (reachable) and the config speaks BGP. A replica that has not reached
// the API server for apiLoss (the leader election's renew deadline, after
// which a leader exits) stops its speaker as a leader would, gracefully:
// the routers keep its paths as stale for their restart time, and it
// speaks again with a fresh table when the API server is back. Call it
// once the first table is applied.
func (a *Announcer) Run(ctx context.Context, reachable func(context.Context) error, apiLoss time.Duration) {
	saidOff := false
	for ctx.Err() == nil {
		a.mu.Lock()
		cfg := a.cfg
		a.mu.Unlock()
		if !Speaks(cfg) {
			// A reload may give BGP a pool: the speaker starts then.
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
		speaker := a.start(sctx, cfg.BGP)
		if speaker == nil {
			cancel()
			return
		}
		lost := watchAPI(sctx, reachable, apiLoss)
		speaker.Stop(context.Background(), true)
		cancel()
		a.mu.Lock()
		a.speaker = nil
		a.mu.Unlock()
		a.peers.stopped()
		if !lost {
			return
		}
		klog.ErrorS(nil, "The API server has been unreachable too long to trust this replica's view of the cluster; its BGP sessions end gracefully, and the routers keep its paths for their restart time", "after", apiLoss)
		waitAPI(ctx, reachable)
		klog.InfoS("The API server is back; speaking BGP again")
	}
}

// start starts a speaker with the whole table in it before any session:
// no peers first, the paths, then the peers of the config in force.
func (a *Announcer) start(ctx context.Context, b config.BGP) *bgp.Speaker {
	global := speakerGlobal(b)
	if !global.RouterID.Is4() {
		a.report.Event(report.Problem{Reason: "BGPNotStarted", Object: report.Self,
			Log: "No BGP router ID: bgp.routerID is not set, POD_IP is not an IPv4 address and no IPv4 peer is reachable; VIPs are allocated but not announced", LogValues: []any{EnvPodIP, os.Getenv(EnvPodIP)},
			Message: fmt.Sprintf("bgp.routerID is not set, %s (%q) is not an IPv4 address and no IPv4 peer is reachable: set bgp.routerID and restart the CCM", EnvPodIP, os.Getenv(EnvPodIP))})
		speakerNotStarted.Set(1)
		return nil
	}
	speaker, err := bgp.Start(ctx, global, slog.New(logr.ToSlogHandler(klog.Background().WithName("bgp"))), a.peerStateChanged)
	if err != nil {
		a.report.Event(report.Problem{Reason: "BGPNotStarted", Object: report.Self,
			Log: "Starting the BGP speaker failed; VIPs are allocated but not announced", LogValues: []any{"err", err},
			Message: fmt.Sprintf("the BGP speaker did not start (%v): VIPs are allocated but not announced from this replica until it restarts", err)})
		speakerNotStarted.Set(1)
		return nil
	}
	speakerNotStarted.Set(0)
	a.applyMu.Lock()
	a.mu.Lock()
	a.speaker = speaker
	paths := a.paths
	a.mu.Unlock()
	a.applyMu.Unlock()
	if err := a.Apply(paths); err != nil {
		klog.ErrorS(err, "Setting the first BGP paths")
	}
	a.setPeers(ctx)
	go a.rereadPasswords(ctx)
	return speaker
}

// Status is what readiness is judged on, and the status page shows.
type Status struct {
	Speaking bool
	Peers    []netip.Addr // the peers wanted, sorted
	// Sessions are the peers' sessions as last reported.
	Sessions map[netip.Addr]bgp.PeerState
}

// Status is the speaker's state now.
func (a *Announcer) Status() Status {
	a.mu.Lock()
	speaking := a.speaker != nil
	a.mu.Unlock()
	wanted, sessions := a.peers.snapshot()
	peers := slices.SortedFunc(maps.Keys(wanted), netip.Addr.Compare)
	return Status{Speaking: speaking, Peers: peers, Sessions: sessions}
}

// Sent is what the speaker sends peer now, by prefix (see bgp.Speaker.Sent);
// nil while no speaker runs.
func (a *Announcer) Sent(peer netip.Addr) (map[netip.Prefix][]netip.Addr, error) {
	a.mu.Lock()
	speaker := a.speaker
	a.mu.Unlock()
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
