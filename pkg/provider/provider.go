// Package provider implements cloudprovider.Interface for machines their
// owners run themselves. It is the only package where Kubernetes objects
// meet the inventory: each file adapts one part of the interface.
package provider

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	v1core "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/klog/v2"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/config"
	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/inventory"
	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/report"
)

// ProviderName is the value of --cloud-provider that selects this provider.
const ProviderName = "baremetal"

// Environment variables (set through the downward API in deploy/) that name
// the Pod the CCM runs in, so that config errors become Events on it.
const (
	envPodName      = "POD_NAME"
	envPodNamespace = "POD_NAMESPACE"
)

func init() {
	cloudprovider.RegisterCloudProvider(ProviderName, newFromReader)
}

// newFromReader is the factory the framework calls with the opened
// --cloud-config file. The file is also watched by its path for changes.
func newFromReader(r io.Reader) (cloudprovider.Interface, error) {
	if r == nil {
		return nil, errors.New("--cloud-config is required: the baremetal provider reads its inventory from it")
	}
	named, ok := r.(interface{ Name() string })
	if !ok {
		return nil, errors.New("the cloud config must be a file")
	}
	c, err := New(named.Name())
	if err != nil {
		return nil, err
	}
	go c.watcher.Run(context.Background())
	return c, nil
}

// Cloud is the baremetal cloud provider.
type Cloud struct {
	configPath string
	inv        atomic.Pointer[inventory.Inventory]
	departed   departures
	watcher    *config.Watcher
	lb         *balancer
	power      *power

	// recorder is set by Speak on every replica (or by Initialize, for a
	// provider not started by this project's main), once.
	recorder     atomic.Pointer[record.EventRecorderLogger]
	recorderOnce sync.Once
	runOnce      sync.Once
	// stopped is closed once the load balancer has stopped: its BGP
	// sessions ended gracefully and BFD told AdminDown.
	stopped chan struct{}
	// minEstablished is the readiness rule's (see Ready).
	minEstablished intstr.IntOrString

	mu        sync.Mutex
	onReloads []func()
}

var _ cloudprovider.Interface = &Cloud{}

// New loads the cloud config at path; it does not start watching it.
func New(path string) (*Cloud, error) {
	cfg, data, err := config.LoadWithContent(path)
	if err != nil {
		return nil, err
	}
	inv := inventory.New(cfg.Inventory)
	c := &Cloud{configPath: path, stopped: make(chan struct{}), minEstablished: DefaultMinEstablished}
	c.lb = newBalancer(cfg, inv, &report.Reporter{Events: c.reportEvent, Quiet: c.quiet})
	c.inv.Store(inv)
	c.power = newPower(c, cfg.Inventory, c.lb.report)
	configLoaded(true)
	klog.InfoS("Loaded cloud config", "path", path, "machines", len(cfg.Inventory.Machines), "storageSystems", len(cfg.Inventory.Storage))
	c.watcher = config.NewWatcher(path, data)
	c.watcher.OnReload = c.apply
	c.watcher.OnError = c.reloadFailed
	c.watcher.OnRecovered = c.recovered
	return c, nil
}

func (c *Cloud) inventory() *inventory.Inventory { return c.inv.Load() }

// apply puts a new, valid config in force.
func (c *Cloud) apply(cfg *config.Config) {
	cfg = c.keepStartSettings(cfg)
	inv := inventory.New(cfg.Inventory)
	c.departed.update(c.inventory(), inv, time.Now())
	// Said at the reload too: a shrink undone is no longer asked about.
	c.holdRemovals(cfg.Inventory, inv)
	c.inv.Store(inv)
	c.lb.reload(context.Background(), cfg, inv)
	c.power.configure(cfg.Inventory)
	configLoaded(true)
	klog.InfoS("Reloaded cloud config", "path", c.configPath, "machines", len(cfg.Inventory.Machines), "storageSystems", len(cfg.Inventory.Storage))
	c.mu.Lock()
	subscribers := append([]func(){}, c.onReloads...)
	c.mu.Unlock()
	for _, f := range subscribers {
		f()
	}
}

// reloadFailed reports a config that cannot be used; the last good one
// stays in force, so nothing the cluster relies on changes.
func (c *Cloud) reloadFailed(err error) {
	configLoaded(false)
	klog.ErrorS(err, "Cloud config not reloaded; the last good config stays in force", "path", c.configPath)
	c.podEvent(v1.EventTypeWarning, "InvalidCloudConfig", "cloud config %s not reloaded, the last good one stays in force: %v", c.configPath, err)
}

// recovered reports a file that holds the config in force again.
func (c *Cloud) recovered() {
	configValid.Set(1)
	klog.InfoS("Cloud config is back to the config in force", "path", c.configPath)
}

// podEvent records an Event on the CCM's own Pod, where a user looks for
// what the CCM says of its config.
func (c *Cloud) podEvent(eventType, reason, format string, args ...any) {
	name, ns := os.Getenv(envPodName), os.Getenv(envPodNamespace)
	if name == "" || ns == "" {
		return
	}
	pod := &v1.ObjectReference{Kind: "Pod", APIVersion: "v1", Name: name, Namespace: ns}
	c.eventf(pod, eventType, reason, format, args...)
}

// OnInventoryChange registers f to be called after every successful reload.
func (c *Cloud) OnInventoryChange(f func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.onReloads = append(c.onReloads, f)
}

// reportEvent records what the load balancer reports, on the object it
// names (report.Self: this replica's Pod).
func (c *Cloud) reportEvent(obj report.Object, eventType, reason, message string) {
	if obj == report.Self {
		c.podEvent(eventType, reason, "%s", message)
		return
	}
	c.eventf(&v1.ObjectReference{Kind: obj.Kind, APIVersion: "v1", Namespace: obj.Namespace, Name: obj.Name}, eventType, reason, "%s", message)
}

// quiet keeps a standby's Events off Services: every replica derives the
// same problems, and a Service should hear each thing once, from the
// leader.
func (c *Cloud) quiet(obj report.Object) bool {
	if obj.Kind != "Service" {
		return false
	}
	return !c.lb.leading.Load()
}

func (c *Cloud) eventf(obj runtime.Object, eventType, reason, format string, args ...any) {
	if r := c.recorder.Load(); r != nil {
		(*r).Eventf(obj, eventType, reason, format, args...)
	}
}

// Initialize is called once this replica leads, before the controllers run.
func (c *Cloud) Initialize(clientBuilder cloudprovider.ControllerClientBuilder, stop <-chan struct{}) {
	client := clientBuilder.ClientOrDie("baremetal-cloud-provider")
	c.recordEvents(client)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-stop
		cancel()
	}()
	// A provider not started by this project's main speaks from here.
	c.runOnce.Do(func() { go c.run(ctx, apiReachable(client), defaultAPILoss) })
	go c.lb.lead(ctx)
	c.power.start(ctx)
}

// run runs the load balancer until ctx ends, then says it stopped.
func (c *Cloud) run(ctx context.Context, reachable func(context.Context) error, apiLoss time.Duration) {
	defer close(c.stopped)
	c.lb.run(ctx, reachable, apiLoss)
}

// Stopped is closed once the load balancer, started by Speak or
// Initialize, has stopped after its context ended: the routers were told
// (BGP ended with graceful restart, BFD AdminDown) and keep this
// replica's paths for their restart time.
func (c *Cloud) Stopped() <-chan struct{} { return c.stopped }

// recordEvents starts recording Events through client, once per process:
// a standby reports what it finds (its config, its BGP sessions, its
// probes) as the leader does, on its own Pod.
func (c *Cloud) recordEvents(client kubernetes.Interface) {
	c.recorderOnce.Do(func() {
		broadcaster := record.NewBroadcaster()
		broadcaster.StartStructuredLogging(0)
		broadcaster.StartRecordingToSink(&v1core.EventSinkImpl{Interface: client.CoreV1().Events("")})
		recorder := broadcaster.NewRecorder(scheme.Scheme, v1.EventSource{Component: "baremetal-cloud-provider"})
		c.recorder.Store(&recorder)
	})
}

// defaultAPILoss is the leader election's default renew deadline.
const defaultAPILoss = 10 * time.Second

// ProviderName implements cloudprovider.Interface.
func (c *Cloud) ProviderName() string { return ProviderName }

// HasClusterID implements cloudprovider.Interface. Nothing here is shared
// between clusters by tags, so no cluster ID is needed.
func (c *Cloud) HasClusterID() bool { return true }

// InstancesV2 implements cloudprovider.Interface.
func (c *Cloud) InstancesV2() (cloudprovider.InstancesV2, bool) { return c, true }

// Instances is not implemented: InstancesV2 replaces it.
func (c *Cloud) Instances() (cloudprovider.Instances, bool) { return nil, false }

// Zones is not implemented: InstancesV2 reports zones.
func (c *Cloud) Zones() (cloudprovider.Zones, bool) { return nil, false }

// Clusters is not implemented.
func (c *Cloud) Clusters() (cloudprovider.Clusters, bool) { return nil, false }

// LoadBalancer implements cloudprovider.Interface: VIPs from the pools of
// the cloud config, announced over BGP.
func (c *Cloud) LoadBalancer() (cloudprovider.LoadBalancer, bool) { return c, true }

// String names the provider and its config in logs.
func (c *Cloud) String() string { return fmt.Sprintf("%s(%s)", ProviderName, c.configPath) }
