package provider

import (
	"net/netip"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/bgp"
)

const metricsSubsystem = "baremetal_cloud_config"

var (
	configReloads = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      metricsSubsystem,
		Name:           "loads_total",
		Help:           "Cloud config loads and reloads, by result (success or failure).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"result"})
	configValid = metrics.NewGauge(&metrics.GaugeOpts{
		Subsystem:      metricsSubsystem,
		Name:           "last_load_successful",
		Help:           "1 if the last attempt to load the cloud config succeeded, 0 if the last good config is still in force after a failure.",
		StabilityLevel: metrics.ALPHA,
	})
	registerMetrics sync.Once
)

func configLoaded(ok bool) {
	registerMetrics.Do(func() {
		legacyregistry.MustRegister(configReloads, configValid, peerEstablished, peerAddPath, speakerNotStarted, poolsWithoutPeers, peerTransitions, pathUpdates, announcedPaths, vipsWithoutNextHops, healthProbes, healthNodesOut, healthAllFailing,
			l2VIPs, l2VIPsUnanswered, l2Replies, l2Announcements, l2SocketErrors, l2SocketDown, l2LearningConflicts, poolAddresses)
	})
	if ok {
		configReloads.WithLabelValues("success").Inc()
		configValid.Set(1)
		return
	}
	configReloads.WithLabelValues("failure").Inc()
	configValid.Set(0)
}

var (
	peerEstablished = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Subsystem:      "baremetal_bgp",
		Name:           "peer_established",
		Help:           "1 while the BGP session with the peer is established, else 0.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"peer"})
	peerTransitions = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      "baremetal_bgp",
		Name:           "peer_state_changes_total",
		Help:           "BGP session state changes, by peer and new state.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"peer", "state"})
	pathUpdates = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      "baremetal_bgp",
		Name:           "path_updates_total",
		Help:           "Paths the BGP speaker announced or withdrew, by operation.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"operation"})
	vipsWithoutNextHops = metrics.NewGauge(&metrics.GaugeOpts{
		Subsystem:      "baremetal_load_balancer",
		Name:           "vips_without_next_hops",
		Help:           "VIPs in Service status that are not announced, as no eligible node can carry them (none of their family, or for externalTrafficPolicy Local none with a ready endpoint).",
		StabilityLevel: metrics.ALPHA,
	})
	healthProbes = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      "baremetal_health_check",
		Name:           "probes_total",
		Help:           "Probes of the nodes' kube-proxy health check, by result (success or failure).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"result"})
	healthNodesOut = metrics.NewGauge(&metrics.GaugeOpts{
		Subsystem:      "baremetal_health_check",
		Name:           "nodes_out",
		Help:           "Ready nodes that are no load-balancer next hop because they fail their health checks (or a new node that has not passed them yet).",
		StabilityLevel: metrics.ALPHA,
	})
	healthAllFailing = metrics.NewGauge(&metrics.GaugeOpts{
		Subsystem:      "baremetal_health_check",
		Name:           "all_failing",
		Help:           "1 while every serving node fails its health checks at once and the last good next hops are kept (the prober is likely cut off), else 0.",
		StabilityLevel: metrics.ALPHA,
	})
	poolAddresses = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Subsystem:      "baremetal_pool",
		Name:           "addresses",
		Help:           "Addresses of each load-balancer pool and family, by state: used (held by Services; a shared address counts once) or free (left to hand out; addresses avoidBuggyIPs skips are not counted).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"pool", "family", "state"})
	peerAddPath = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Subsystem:      "baremetal_bgp",
		Name:           "peer_add_path",
		Help:           "For an established session: 1 if the peer takes ADD-PATH (every next hop of a VIP), 0 if not (one next hop per VIP).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"peer"})
	speakerNotStarted = metrics.NewGauge(&metrics.GaugeOpts{
		Subsystem:      "baremetal_bgp",
		Name:           "speaker_not_started",
		Help:           "1 while the config announces over BGP but this replica's speaker could not start (no router ID, a listen address in use), else 0.",
		StabilityLevel: metrics.ALPHA,
	})
	poolsWithoutPeers = metrics.NewGauge(&metrics.GaugeOpts{
		Subsystem:      "baremetal_bgp",
		Name:           "pools_without_peers",
		Help:           "Pools announced over BGP while the speaker has no peer to announce to (bgp.peers is empty, or no peer's password file can be read), else 0.",
		StabilityLevel: metrics.ALPHA,
	})
	announcedPaths = metrics.NewGauge(&metrics.GaugeOpts{
		Subsystem:      "baremetal_bgp",
		Name:           "announced_paths",
		Help:           "Paths (prefix and next hop) the BGP speaker announces.",
		StabilityLevel: metrics.ALPHA,
	})
)

// forgetPeer deletes the series of a peer that left the config: a stale
// 0 would fire BaremetalBGPPeerUnreachable for ever.
func forgetPeer(addr netip.Addr) {
	peerEstablished.DeleteLabelValues(addr.String())
	peerAddPath.DeleteLabelValues(addr.String())
	peerTransitions.DeletePartialMatch(map[string]string{"peer": addr.String()})
}

// peerStateChanged counts a session's state and says, on the Pod, when an
// established peer takes no ADD-PATH: it gets one next hop per VIP, so all
// of a VIP's traffic goes to one node.
func (n *network) peerStateChanged(st bgp.PeerState) {
	n.mu.Lock()
	wanted := n.peersWanted[st.Address]
	n.mu.Unlock()
	if !wanted {
		return
	}
	n.live.session(st.Address, st.Established)
	v := 0.0
	if st.Established {
		v = 1
	}
	peer := st.Address.String()
	peerEstablished.WithLabelValues(peer).Set(v)
	peerTransitions.WithLabelValues(peer, st.State).Inc()
	if !st.Established {
		return
	}
	if st.AddPath {
		peerAddPath.WithLabelValues(peer).Set(1)
		return
	}
	peerAddPath.WithLabelValues(peer).Set(0)
	klog.ErrorS(nil, "BGP peer did not negotiate ADD-PATH receive: it gets one next hop per VIP, not all of them, so no ECMP", "peer", peer)
	n.podEventf(v1.EventTypeWarning, "BGPPeerWithoutAddPath",
		"BGP peer %s did not negotiate ADD-PATH receive (RFC 7911): it gets one next hop per VIP, so each VIP's traffic goes to one node; enable receiving additional paths on the router", peer)
}

var (
	l2VIPs = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Subsystem:      "baremetal_l2",
		Name:           "vips",
		Help:           "Layer 2 VIPs the leader answers for, by interface and the node it names.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"interface", "node"})
	l2VIPsUnanswered = metrics.NewGauge(&metrics.GaugeOpts{
		Subsystem:      "baremetal_l2",
		Name:           "vips_unanswered",
		Help:           "Layer 2 VIPs in Service status the leader does not answer for: no node can carry them, their interface is not open, or they are outside its subnets.",
		StabilityLevel: metrics.ALPHA,
	})
	l2Replies = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      "baremetal_l2",
		Name:           "replies_total",
		Help:           "ARP replies and Neighbor Advertisements sent in answer for VIPs, by protocol (arp, ndp).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"protocol"})
	l2Announcements = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      "baremetal_l2",
		Name:           "announcements_total",
		Help:           "Gratuitous ARPs and unsolicited Neighbor Advertisements sent when a VIP's node changed or a leader started, by protocol.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"protocol"})
	l2SocketErrors = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      "baremetal_l2",
		Name:           "socket_errors_total",
		Help:           "Reads from an interface's ARP or NDP socket that failed (an interface bounced, a driver reset); the socket is opened again.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"interface", "protocol"})
	l2SocketDown = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Subsystem:      "baremetal_l2",
		Name:           "socket_down",
		Help:           "1 while an interface's ARP or NDP socket failed and is not open again (its layer 2 VIPs of that family are not answered), else 0.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"interface", "protocol"})
	l2LearningConflicts = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      "baremetal_l2",
		Name:           "learning_conflicts_total",
		Help:           "Questions for a node's hardware address answered with disagreeing addresses, or with a change within the hold-down; what is known is kept.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"interface"})
)
