package provider

import (
	"slices"
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/bfd"
	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/bgpannouncer"
	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/controllers/outofservice"
	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/l2announcer"
	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/report"
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
	removalsHeld = metrics.NewGauge(&metrics.GaugeOpts{
		Name:           "baremetal_inventory_removals_held",
		Help:           "Machines removed from the inventory whose NotReady Nodes are not deleted because more were removed than inventory.maxRemovals allows; 0 when none is held.",
		StabilityLevel: metrics.ALPHA,
	})
	registerMetrics sync.Once
)

// Metrics are every metric of this provider, its announcers' included.
func Metrics() []metrics.Registerable {
	own := []metrics.Registerable{configReloads, configValid, removalsHeld, vipsWithoutNextHops, tableFingerprint, endpointNodesLeftOut, healthProbes, healthNodesOut, healthAllFailing, poolAddresses, bmcPowerState, bmcRequests, bmcRequestSeconds}
	return slices.Concat(own, bgpannouncer.Metrics(), bfd.Metrics(), l2announcer.Metrics(), outofservice.Metrics())
}

func configLoaded(ok bool) {
	registerMetrics.Do(func() { legacyregistry.MustRegister(Metrics()...) })
	if ok {
		configReloads.WithLabelValues("success").Inc()
		configValid.Set(1)
		return
	}
	configReloads.WithLabelValues("failure").Inc()
	configValid.Set(0)
}

var (
	vipsWithoutNextHops = metrics.NewGauge(&metrics.GaugeOpts{
		Subsystem:      "baremetal_load_balancer",
		Name:           "vips_without_next_hops",
		Help:           "VIPs in Service status that are not announced, as no eligible node can carry them (none of their family, or for externalTrafficPolicy Local none with a ready endpoint).",
		StabilityLevel: metrics.ALPHA,
	})
	tableFingerprint = metrics.NewGauge(&metrics.GaugeOpts{
		Subsystem:      "baremetal_load_balancer",
		Name:           "table_fingerprint",
		Help:           "A digest (53 bits) of what this replica announces: every router selection's paths and every layer 2 VIP's candidate nodes. Replicas that see the same cluster have the same value; values that differ for longer than a convergence mean their views differ (alert BaremetalReplicasDisagree).",
		StabilityLevel: metrics.ALPHA,
	})
	endpointNodesLeftOut = metrics.NewGauge(&metrics.GaugeOpts{
		Subsystem:      "baremetal_load_balancer",
		Name:           "endpoint_nodes_left_out",
		Help:           "Nodes with a ready endpoint of an externalTrafficPolicy Local VIP that some routers are not sent, as the VIP has more such nodes than their maximumPaths: those endpoints get none of the VIP's traffic through those routers (summed over VIPs).",
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
		Help:           "Addresses of each load-balancer pool and family, by state: used (held by Services; a shared address counts once), elsewhere (held by Services another implementation serves, beside this CCM: never handed out) or free (left to hand out; addresses avoidBuggyIPs skips are not counted).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"pool", "family", "state"})
	// poolSeries are poolAddresses' series: a pool that went takes its
	// series with it.
	poolSeries = &report.Gauges{Vec: poolAddresses}
)
