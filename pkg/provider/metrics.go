package provider

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
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
		legacyregistry.MustRegister(configReloads, configValid)
	})
	if ok {
		configReloads.WithLabelValues("success").Inc()
		configValid.Set(1)
		return
	}
	configReloads.WithLabelValues("failure").Inc()
	configValid.Set(0)
}
