package provider

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"

	"k8s.io/klog/v2"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/config"
	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/desired"
	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/health"
	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/report"
)

// Node health checks, as a cloud load balancer does them: kube-proxy's
// /healthz on every node that may carry a VIP. A node failing them is no
// next hop, long before its Node turns NotReady (--node-monitor-grace-period,
// 50 s by default).
//
// Every replica probes, not only the leader: every replica announces the
// table (a router keeps the union of what its sessions carry), so a standby
// that did not probe would keep a dead node a next hop.
//
// For externalTrafficPolicy Local the Service's healthCheckNodePort is not
// probed: kube-proxy answers it with 200 exactly when its /healthz is
// healthy and it knows a ready local endpoint, from the same
// EndpointSlices this provider reads. Node health and the EndpointSlices
// give the same answer, at a cost of one probe per node instead of one per
// node and Service.

// nodeHealth runs the checker and reports what its rounds change.
type nodeHealth struct {
	checker *health.Checker
	report  *report.Reporter
	changed func() // a verdict changed: converge
	held    atomic.Bool
	running sync.Once
}

func newNodeHealth(h config.HealthCheck, r *report.Reporter, changed func()) *nodeHealth {
	nh := &nodeHealth{checker: health.New(healthSettings(h), nil), report: r, changed: changed}
	nh.checker.OnRound = nh.round
	return nh
}

func healthSettings(h config.HealthCheck) health.Settings {
	return health.Settings{Port: h.Port, Path: h.Path, Interval: h.Interval.Duration, Timeout: h.Timeout.Duration,
		Unhealthy: h.UnhealthyThreshold, Healthy: h.HealthyThreshold}
}

func (nh *nodeHealth) setSettings(h config.HealthCheck) { nh.checker.SetSettings(healthSettings(h)) }

// start runs the checks for the rest of the process, once: the BGP
// speaker and the layer 2 answers both read them.
func (nh *nodeHealth) start(ctx context.Context) {
	nh.running.Do(func() { go nh.checker.Run(ctx) })
}

// verdicts makes the nodes that may carry traffic the checker's targets
// and returns its verdicts; when nothing is checked (checks off, or no VIP
// to announce) nothing is probed and every node serves (nil).
func (nh *nodeHealth) verdicts(checked bool, carriers []*desired.Node) func(string) bool {
	if !checked {
		nh.checker.SetTargets(nil)
		return nil
	}
	targets := make([]health.Target, 0, len(carriers))
	for _, node := range carriers {
		if len(node.IPs) > 0 {
			targets = append(targets, health.Target{Name: node.Name, Addr: probeAddress(node.IPs)})
		}
	}
	nh.checker.SetTargets(targets)
	return nh.checker.Serving
}

// probeAddress is where a node is probed: its IPv4 next hop if it has one.
func probeAddress(ips []netip.Addr) netip.Addr {
	for _, ip := range ips {
		if ip.Is4() {
			return ip
		}
	}
	return ips[0]
}

// round reports what a round of probes changed and asks for a
// convergence.
func (nh *nodeHealth) round(r health.Round) {
	healthProbes.WithLabelValues("success").Add(float64(r.Probes - r.Failed))
	healthProbes.WithLabelValues("failure").Add(float64(r.Failed))
	for _, ch := range r.Changes {
		if ch.Serving && ch.First {
			// A node new to the checker, never out: no news.
			klog.V(2).InfoS("Node passes its first health checks; it is a load-balancer next hop", "node", ch.Name)
			continue
		}
		if ch.Serving {
			nh.report.Event(report.Problem{Reason: "HealthCheckPassing", Object: report.Node(ch.Name), Normal: true,
				Log:     "Node passes its health checks; it is a load-balancer next hop again",
				Message: "kube-proxy's health check passes again; the node carries load-balancer traffic"})
			continue
		}
		nh.report.Event(report.Problem{Reason: "HealthCheckFailing", Object: report.Node(ch.Name),
			Log: "Node fails its health checks; its load-balancer next hops are withdrawn", LogValues: []any{"err", ch.Err},
			Message: fmt.Sprintf("kube-proxy's health check fails (%v); the node's load-balancer next hops are withdrawn until it passes again", ch.Err)})
	}
	held := len(r.Held) > 0
	switch wasHeld := nh.held.Swap(held); {
	case held && !wasHeld:
		healthAllFailing.Set(1)
		nh.report.Event(report.Problem{Reason: "HealthChecksAllFailing", Object: report.Self,
			Log: "Every node fails its health checks at once; keeping the last good next hops, as the prober is more likely cut off than every node dead", LogValues: []any{"nodes", r.Held, "errors", r.Errs},
			Message: "every load-balancer next hop fails its health check at once (" + strings.Join(r.Held, ", ") + "); they are kept: check that this replica reaches the nodes' kube-proxy health port"})
	case !held && wasHeld:
		healthAllFailing.Set(0)
		klog.InfoS("Health checks pass again on some node; the held next hops are judged on new probes")
	}
	healthNodesOut.Set(float64(nh.checker.NotServing()))
	if len(r.Changes) > 0 {
		nh.changed()
	}
}
