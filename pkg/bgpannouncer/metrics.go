package bgpannouncer

import (
	"net/netip"

	"k8s.io/component-base/metrics"
)

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
	peerPaths = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Subsystem:      "baremetal_bgp",
		Name:           "peer_paths",
		Help:           "Paths (prefix and next hop) this replica sends the peer, by address family of those the peer takes: the table of its maximumPaths, nodeSelector and advertisements. A router without ADD-PATH installs one path of each prefix.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"peer", "family"})
	announcedPaths = metrics.NewGauge(&metrics.GaugeOpts{
		Subsystem:      "baremetal_bgp",
		Name:           "announced_paths",
		Help:           "Paths (prefix and next hop) the BGP speaker announces.",
		StabilityLevel: metrics.ALPHA,
	})
)

// Metrics are the announcer's metrics, for the caller to register.
func Metrics() []metrics.Registerable {
	return []metrics.Registerable{peerEstablished, peerTransitions, pathUpdates, peerAddPath, peerPaths, speakerNotStarted, poolsWithoutPeers, announcedPaths}
}

// forgetPeer deletes the series of a peer that left the config: a stale
// 0 would fire BaremetalBGPPeerUnreachable for ever.
func forgetPeer(addr netip.Addr) {
	peerEstablished.DeleteLabelValues(addr.String())
	peerAddPath.DeleteLabelValues(addr.String())
	peerPaths.DeletePartialMatch(map[string]string{"peer": addr.String()})
	peerTransitions.DeletePartialMatch(map[string]string{"peer": addr.String()})
}
