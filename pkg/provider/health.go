package provider

import (
	"net/netip"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/config"
	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/health"
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

func healthSettings(h config.HealthCheck) health.Settings {
	return health.Settings{Port: h.Port, Path: h.Path, Interval: h.Interval.Duration, Timeout: h.Timeout.Duration,
		Unhealthy: h.UnhealthyThreshold, Healthy: h.HealthyThreshold}
}

// healthy is the ready nodes that pass their health checks. The ready
// nodes become the checker's targets: only while there is a VIP to
// announce with health checks on; otherwise nothing is probed. Callers
// hold n.mu.
func (n *network) healthy(ready []eligibleNode) []eligibleNode {
	if !n.cfg.LoadBalancer.HealthCheck.On() || len(n.services) == 0 {
		n.health.SetTargets(nil)
		return ready
	}
	targets := make([]health.Target, 0, len(ready))
	for _, node := range ready {
		if len(node.ips) > 0 {
			targets = append(targets, health.Target{Name: node.name, Addr: probeAddress(node.ips)})
		}
	}
	n.health.SetTargets(targets)
	out := ready[:0:0]
	for _, node := range ready {
		if n.health.Serving(node.name) {
			out = append(out, node)
		}
	}
	return out
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

// healthRound reports what a round of probes changed and converges.
func (n *network) healthRound(r health.Round) {
	healthProbes.WithLabelValues("success").Add(float64(r.Probes - r.Failed))
	healthProbes.WithLabelValues("failure").Add(float64(r.Failed))
	for _, ch := range r.Changes {
		if ch.Serving {
			klog.InfoS("Node passes its health checks; it is a load-balancer next hop again", "node", ch.Name)
			n.eventf(nodeRef(ch.Name), v1.EventTypeNormal, "HealthCheckPassing", "kube-proxy's health check passes again; the node carries load-balancer traffic")
			continue
		}
		klog.ErrorS(ch.Err, "Node fails its health checks; its load-balancer next hops are withdrawn", "node", ch.Name)
		n.eventf(nodeRef(ch.Name), v1.EventTypeWarning, "HealthCheckFailing", "kube-proxy's health check fails (%v); the node's load-balancer next hops are withdrawn until it passes again", ch.Err)
	}
	held := len(r.Held) > 0
	n.mu.Lock()
	wasHeld := n.held
	n.held = held
	n.mu.Unlock()
	switch {
	case held && !wasHeld:
		healthAllFailing.Set(1)
		klog.ErrorS(nil, "Every node fails its health checks at once; keeping the last good next hops, as the prober is more likely cut off than every node dead", "nodes", r.Held, "errors", r.Errs)
		n.podEventf(v1.EventTypeWarning, "HealthChecksAllFailing",
			"every load-balancer next hop fails its health check at once (%s); they are kept: check that this replica reaches the nodes' kube-proxy health port", strings.Join(r.Held, ", "))
	case !held && wasHeld:
		healthAllFailing.Set(0)
		klog.InfoS("Health checks pass again on some node; the held next hops are judged again")
	}
	healthNodesOut.Set(float64(n.health.NotServing()))
	if len(r.Changes) > 0 {
		n.announce()
	}
}

func nodeRef(name string) *v1.ObjectReference {
	return &v1.ObjectReference{Kind: "Node", APIVersion: "v1", Name: name}
}
