package bfd

import (
	"net/netip"

	"k8s.io/component-base/metrics"
)

var (
	sessionUp = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Subsystem:      "baremetal_bfd",
		Name:           "session_up",
		Help:           "1 while the BFD session with the router is Up, else 0.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"peer"})
	sessionDowns = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      "baremetal_bfd",
		Name:           "session_downs_total",
		Help:           "Times the BFD session with the router fell from Up, by diagnostic (detection_time_expired: the router went silent; neighbor_signaled_down: it said so; neighbor_admin_down: it was deconfigured).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"peer", "diagnostic"})
	dropped = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      "baremetal_bfd",
		Name:           "packets_dropped_total",
		Help:           "BFD packets received and dropped, by reason (ttl: not sent by a neighbour; unknown_session, wrong_source: not from a configured router; no_discriminator: naming no session while the session is past Down).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"reason"})
	deferred = metrics.NewCounter(&metrics.CounterOpts{
		Subsystem:      "baremetal_bfd",
		Name:           "verdicts_deferred_total",
		Help:           "Times a session's detection time ran out while this process had the router's packets still to read, or looked late: the process, not the path, was slow (its CPU starved), so the verdict waited, at most one more detection time.",
		StabilityLevel: metrics.ALPHA,
	})
	sendErrors = metrics.NewCounter(&metrics.CounterOpts{
		Subsystem:      "baremetal_bfd",
		Name:           "send_errors_total",
		Help:           "BFD packets that could not be sent.",
		StabilityLevel: metrics.ALPHA,
	})
)

// Metrics are the sessions' metrics, for the caller to register.
func Metrics() []metrics.Registerable {
	return []metrics.Registerable{sessionUp, sessionDowns, dropped, deferred, sendErrors}
}

func sessionChanged(c Change) {
	v := 0.0
	if c.To == Up {
		v = 1
	}
	sessionUp.WithLabelValues(c.Peer.String()).Set(v)
	if c.From == Up {
		why := c.Diag.String()
		if c.AdminDown {
			why = "neighbor_admin_down"
		}
		sessionDowns.WithLabelValues(c.Peer.String(), why).Inc()
	}
}

// forgetSession deletes the series of a router that left the config.
func forgetSession(peer netip.Addr) {
	sessionUp.DeleteLabelValues(peer.String())
	sessionDowns.DeletePartialMatch(map[string]string{"peer": peer.String()})
}
