package l2announcer

import "k8s.io/component-base/metrics"

var (
	vipsPerNode = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Subsystem:      "baremetal_l2",
		Name:           "vips",
		Help:           "Layer 2 VIPs this replica answers for, by interface and the node it names.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"interface", "node"})
	vipsUnanswered = metrics.NewGauge(&metrics.GaugeOpts{
		Subsystem:      "baremetal_l2",
		Name:           "vips_unanswered",
		Help:           "Layer 2 VIPs in Service status this replica does not answer for: no node can carry them, their interface is not open, or they are outside its subnets.",
		StabilityLevel: metrics.ALPHA,
	})
	replies = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      "baremetal_l2",
		Name:           "replies_total",
		Help:           "ARP replies and Neighbor Advertisements sent in answer for VIPs, by protocol (arp, ndp).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"protocol"})
	announcements = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      "baremetal_l2",
		Name:           "announcements_total",
		Help:           "Gratuitous ARPs and unsolicited Neighbor Advertisements sent when a VIP's node changed or a segment opened, by protocol.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"protocol"})
	socketErrors = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      "baremetal_l2",
		Name:           "socket_errors_total",
		Help:           "Reads from an interface's ARP or NDP socket that failed (an interface bounced, a driver reset); the socket is opened again.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"interface", "protocol"})
	socketDown = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Subsystem:      "baremetal_l2",
		Name:           "socket_down",
		Help:           "1 while an interface's ARP or NDP socket failed and is not open again (its layer 2 VIPs of that family are not answered), else 0.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"interface", "protocol"})
	interfaceNotOpen = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Subsystem:      "baremetal_l2",
		Name:           "interface_not_open",
		Help:           "For each interface a layer 2 pool names: 1 while this replica could not open it (missing, no CAP_NET_RAW; tried again every 10s), else 0.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"interface"})
	learningConflicts = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      "baremetal_l2",
		Name:           "learning_conflicts_total",
		Help:           "Questions for a node's hardware address answered with disagreeing addresses, or with a change within the hold-down; what is known is kept.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"interface"})
)

// Metrics are the announcer's metrics, for the caller to register.
func Metrics() []metrics.Registerable {
	return []metrics.Registerable{vipsPerNode, vipsUnanswered, replies, announcements, socketErrors, socketDown, interfaceNotOpen, learningConflicts}
}
