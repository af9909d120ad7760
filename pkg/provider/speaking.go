package provider

import (
	"context"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"time"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/bgp"
	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/config"
)

// Every replica announces. Its table is derived from the cluster (the
// addresses in the Services' status, Nodes, EndpointSlices), so a standby
// holds sessions of its own with the same table as the leader, which alone
// allocates. A failover then changes no session: the routers have the new
// leader's paths already, and only the dead replica's own session ends.

// envPodIP names the replica's own address (the downward API's
// status.podIP; with host networking, its node's address): the BGP router
// ID when the cloud config sets none, so that replicas differ.
const envPodIP = "POD_IP"

// apiPoll is how often a replica checks that it still reaches the API
// server, whose view its table is derived from.
var apiPoll = 2 * time.Second

// Speak runs this replica's BGP speaker until ctx ends, and records its
// Events; call it on every replica at start, before leader election. factory is the one the
// framework later passes to SetInformers; the caller starts it. A replica
// that has not reached the API server for apiLoss (the leader election's
// renew deadline, after which a leader exits) stops its speaker as a
// leader would, gracefully: the routers keep its paths as stale for their
// restart time, and it speaks again with a fresh table when the API server
// is back.
func (c *Cloud) Speak(ctx context.Context, factory informers.SharedInformerFactory, client kubernetes.Interface, apiLoss time.Duration) {
	c.recordEvents(client)
	c.SetInformers(factory)
	c.net.speakOnce.Do(func() { go c.net.speak(ctx, apiReachable(client), apiLoss) })
}

// apiReachable asks the API server whether it is ready: a watch cannot
// tell a quiet cluster from a lost one.
func apiReachable(client kubernetes.Interface) func(context.Context) error {
	return func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, apiPoll)
		defer cancel()
		return client.Discovery().RESTClient().Get().AbsPath("/readyz").Do(ctx).Error()
	}
}

// speak runs the speaker while the API server is reachable.
func (n *network) speak(ctx context.Context, reachable func(context.Context) error, apiLoss time.Duration) {
	if !n.waitSynced(ctx) {
		return
	}
	n.mu.Lock()
	n.listedCluster = true
	n.mu.Unlock()
	n.startProbing(ctx)
	saidOff := false
	for ctx.Err() == nil {
		n.mu.Lock()
		cfg := n.cfg
		n.mu.Unlock()
		if !speaksBGP(cfg) {
			// A reload may give BGP a pool: the speaker starts then.
			if !saidOff {
				klog.InfoS("BGP announcements are off; a reload that announces a pool over BGP starts them", "announce", cfg.LoadBalancer.Announce, "localASN", cfg.BGP.LocalASN)
				saidOff = true
			}
			select {
			case <-ctx.Done():
				return
			case <-n.reloaded:
			}
			continue
		}
		saidOff = false
		sctx, cancel := context.WithCancel(ctx)
		speaker := n.startSpeaker(sctx, cfg.BGP)
		if speaker == nil {
			cancel()
			return
		}
		lost := n.watchAPI(sctx, reachable, apiLoss)
		speaker.Stop(context.Background(), true)
		cancel()
		n.mu.Lock()
		n.speaker, n.peersInForce = nil, nil
		n.mu.Unlock()
		n.live.forgetSessions()
		if !lost {
			return
		}
		klog.ErrorS(nil, "The API server has been unreachable too long to trust this replica's view of the cluster; its BGP sessions end gracefully, and the routers keep its paths for their restart time", "after", apiLoss)
		n.waitAPI(ctx, reachable)
		klog.InfoS("The API server is back; speaking BGP again")
	}
}

// startSpeaker starts a speaker with the whole table in it before any
// session: no peers first, the paths, then the peers of the config in
// force (a reload that came meanwhile found no speaker to give them to).
func (n *network) startSpeaker(ctx context.Context, b config.BGP) *bgp.Speaker {
	global := speakerGlobal(b)
	if !global.RouterID.Is4() {
		klog.ErrorS(nil, "No BGP router ID: bgp.routerID is not set, POD_IP is not an IPv4 address and no IPv4 peer is reachable; VIPs are allocated but not announced", envPodIP, os.Getenv(envPodIP))
		n.podEventf(v1.EventTypeWarning, "BGPNotStarted", "bgp.routerID is not set, %s (%q) is not an IPv4 address and no IPv4 peer is reachable: set bgp.routerID and restart the CCM", envPodIP, os.Getenv(envPodIP))
		speakerNotStarted.Set(1)
		return nil
	}
	speaker, err := bgp.Start(ctx, global, slog.New(logr.ToSlogHandler(klog.Background().WithName("bgp"))), n.peerStateChanged)
	if err != nil {
		klog.ErrorS(err, "Starting the BGP speaker failed; VIPs are allocated but not announced")
		n.podEventf(v1.EventTypeWarning, "BGPNotStarted", "the BGP speaker did not start (%v): VIPs are allocated but not announced from this replica until it restarts", err)
		speakerNotStarted.Set(1)
		return nil
	}
	speakerNotStarted.Set(0)
	n.mu.Lock()
	n.speaker = speaker
	n.mu.Unlock()
	if err := n.converge(); err != nil {
		klog.ErrorS(err, "Setting the first BGP paths")
	}
	n.setPeers(ctx)
	go n.convergeLoop(ctx)
	go n.rereadPasswords(ctx)
	return speaker
}

// startProbing runs the health checks for the rest of the process, once:
// the BGP speaker and the layer 2 answers both read them.
func (n *network) startProbing(ctx context.Context) {
	n.probeOnce.Do(func() { go n.health.Run(ctx) })
}

// watchAPI returns false when ctx ends, true once the API server has not
// answered for apiLoss.
func (n *network) watchAPI(ctx context.Context, reachable func(context.Context) error, apiLoss time.Duration) bool {
	last := time.Now()
	t := time.NewTicker(apiPoll)
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
func (n *network) waitAPI(ctx context.Context, reachable func(context.Context) error) {
	t := time.NewTicker(apiPoll)
	defer t.Stop()
	for reachable(ctx) != nil {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// speakerGlobal is the speaker's own identity and listener, without peers.
func speakerGlobal(b config.BGP) bgp.Config {
	cfg := bgp.Config{ASN: b.LocalASN, ListenPort: b.ListenPort, ListenAddresses: b.ListenAddresses}
	id := b.RouterID
	if id == "" {
		id = os.Getenv(envPodIP)
	}
	cfg.RouterID, _ = netip.ParseAddr(id)
	if !cfg.RouterID.Is4() && b.RouterID == "" {
		cfg.RouterID = addressTowards(b.Peers)
	}
	return cfg
}

// addressTowards is the IPv4 address this host speaks to its first IPv4
// peer from: a replica's own, when the kubelet has not given it POD_IP.
// That happens on a Node the CCM has yet to initialise (the kubelet knows
// no address for it), as on the first start of a kubeadm cluster, where
// the CCM initialises its own Node. Connecting a UDP socket sends nothing;
// the kernel only picks the route and the source.
func addressTowards(peers []config.Peer) netip.Addr {
	for _, p := range peers {
		if p.SourceAddress != "" {
			if a, err := netip.ParseAddr(p.SourceAddress); err == nil && a.Is4() {
				return a
			}
		}
		a, err := netip.ParseAddr(p.Address)
		if err != nil || !a.Is4() {
			continue
		}
		c, err := net.DialUDP("udp4", nil, net.UDPAddrFromAddrPort(netip.AddrPortFrom(a, 179)))
		if err != nil {
			continue
		}
		local := c.LocalAddr().(*net.UDPAddr).AddrPort().Addr().Unmap()
		c.Close()
		if local.Is4() {
			return local
		}
	}
	return netip.Addr{}
}
