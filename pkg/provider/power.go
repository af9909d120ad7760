package provider

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/component-base/metrics"
	"k8s.io/klog/v2"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/bmc"
	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/config"
	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/desired"
	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/report"
)

// Machines' power from their BMCs. Only the leader asks: the node
// lifecycle controller, which asks InstanceShutdown, and the out-of-service
// taint run there alone, and a BMC is asked once, not once per replica.
// Watched are the machines of NotReady Nodes; the others are asked in the
// background, so that a first NotReady has an answer at hand.

// watchEvery is how often the NotReady Nodes are read for the machines to
// watch.
const watchEvery = 2 * time.Second

type power struct {
	poller *bmc.Poller
	report *report.Reporter
	cloud  *Cloud

	mu      sync.Mutex
	targets map[string]bmc.Target     // by machine
	said    map[string]bmc.PowerState // the state last reported, by machine
	oos     config.OutOfService
	started bool
}

func newPower(c *Cloud, inv config.Inventory, r *report.Reporter) *power {
	p := &power{report: r, cloud: c, said: map[string]bmc.PowerState{}, poller: bmc.NewPoller(powerSettings(inv.PowerChecks), nil)}
	p.poller.OnChange = p.changed
	p.poller.OnAsked = asked
	p.configure(inv)
	return p
}

func powerSettings(pc config.PowerChecks) bmc.Settings {
	return bmc.Settings{Interval: pc.Interval.Duration, Background: pc.BackgroundInterval.Duration, Timeout: pc.Timeout.Duration, Concurrency: pc.Concurrency}
}

// configure takes a config's BMCs and settings; machines that lost their
// BMC are forgotten, their metric series deleted.
func (p *power) configure(inv config.Inventory) {
	targets := map[string]bmc.Target{}
	var list []bmc.Target
	for i := range inv.Machines {
		m := &inv.Machines[i]
		if m.BMC == nil {
			continue
		}
		t := target(m)
		targets[m.Name] = t
		list = append(list, t)
	}
	p.mu.Lock()
	for name, t := range p.targets {
		if nt, ok := targets[name]; !ok || nt.Address != t.Address || nt.Protocol != t.Protocol {
			forgetPowerSeries(name)
			delete(p.said, name)
		}
	}
	p.targets, p.oos = targets, inv.OutOfService
	p.mu.Unlock()
	p.poller.SetSettings(powerSettings(inv.PowerChecks))
	p.poller.SetTargets(list)
}

func target(m *config.Machine) bmc.Target {
	b := *m.BMC
	t := bmc.Target{Machine: m.Name, Protocol: bmc.Protocol(b.Protocol), SystemID: b.SystemID, CAFile: b.TLS.CAFile,
		InsecureSkipVerify: b.TLS.InsecureSkipVerify, Credentials: b.Credentials}
	switch b.Protocol {
	case config.BMCIPMI:
		host, port, _ := b.IPMIHostPort()
		t.Address = fmt.Sprintf("%s:%d", host, port)
		if strings.Contains(host, ":") {
			t.Address = fmt.Sprintf("[%s]:%d", host, port)
		}
	case config.BMCRedfish:
		u, _ := b.RedfishURL()
		t.Address = u.String()
	}
	return t
}

// start asks BMCs until ctx ends, once; the NotReady Nodes' machines are
// watched.
func (p *power) start(ctx context.Context) {
	p.mu.Lock()
	started := p.started
	p.started = true
	p.mu.Unlock()
	if started {
		return
	}
	go p.poller.Run(ctx)
	go func() {
		tick := time.NewTicker(watchEvery)
		defer tick.Stop()
		for {
			p.poller.Watch(p.notReadyMachines())
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
}

// notReadyMachines names the machines of the Nodes that are not Ready.
func (p *power) notReadyMachines() []string {
	nodes, _ := p.cloud.lb.cluster.listedNodes()
	inv := p.cloud.inventory()
	var names []string
	for _, node := range nodes {
		if desired.Ready(node) {
			continue
		}
		if m, ok := inv.FindMachine(desired.NodeKeys(node)); ok {
			names = append(names, m.Name)
		}
	}
	return names
}

// Power is what a Node's machine's BMC says: its reading and whether the
// machine has a BMC.
func (p *power) Power(node *v1.Node) (bmc.Reading, bool) {
	m, ok := p.cloud.inventory().FindMachine(desired.NodeKeys(node))
	if !ok || m.BMC == nil {
		return bmc.Reading{}, false
	}
	return p.poller.Reading(m.Name)
}

// nodeOf names the Node of a machine, or "" if it has none.
func (p *power) nodeOf(machine string) string {
	nodes, _ := p.cloud.lb.cluster.listedNodes()
	inv := p.cloud.inventory()
	var names []string
	for _, node := range nodes {
		if m, ok := inv.FindMachine(desired.NodeKeys(node)); ok && m.Name == machine {
			names = append(names, node.Name)
		}
	}
	slices.Sort(names)
	if len(names) == 0 {
		return ""
	}
	return names[0]
}

// changed reports a machine's new power state: an Event on its Node and
// the metric.
func (p *power) changed(machine string, r bmc.Reading) {
	p.mu.Lock()
	t, ok := p.targets[machine]
	_, hadState := p.said[machine]
	if ok {
		p.said[machine] = r.State
	}
	p.mu.Unlock()
	if !ok {
		return
	}
	setPowerSeries(machine, r.State)
	node := p.nodeOf(machine)
	bmcName := fmt.Sprintf("%s BMC %s", t.Protocol, t.Address)
	switch r.State {
	case bmc.Unknown:
		klog.ErrorS(r.Err, "BMC did not answer; the machine's power state is unknown", "machine", machine, "node", node, "bmc", t.Address, "protocol", t.Protocol)
		if node != "" {
			p.report.Event(report.Problem{Reason: "PowerStateUnknown", Object: report.Node(node),
				Message: fmt.Sprintf("the %s of machine %s did not answer (%v): its power state is unknown, so the Node is treated as unresponsive, not as shut down", bmcName, machine, r.Err)})
		}
	case bmc.Off:
		klog.InfoS("BMC says the machine is off", "machine", machine, "node", node, "bmc", t.Address)
		if node != "" {
			p.report.Event(report.Problem{Reason: "PowerOff", Object: report.Node(node), Normal: true,
				Message: fmt.Sprintf("the %s of machine %s says it is powered off", bmcName, machine)})
		}
	case bmc.On:
		klog.V(2).InfoS("BMC says the machine is on", "machine", machine, "node", node, "bmc", t.Address)
		// A first answer On is no news; On after Off or Unknown is.
		if node != "" && hadState {
			p.report.Event(report.Problem{Reason: "PowerOn", Object: report.Node(node), Normal: true,
				Message: fmt.Sprintf("the %s of machine %s answers: it is powered on", bmcName, machine)})
		}
	}
}

// InstanceShutdown reports whether the Node's machine is off: as its BMC
// says when it answers, as recorded (powerState) when it has no BMC or
// its BMC does not. A BMC that does not answer never makes a machine off.
func (c *Cloud) InstanceShutdown(_ context.Context, node *v1.Node) (bool, error) {
	m, ok := c.inventory().FindMachine(desired.NodeKeys(node))
	if !ok {
		return false, nil
	}
	// An answer from before the Node's readiness last changed may describe
	// a machine since powered on again (or off): it is not taken for now.
	_, changed := desired.Readiness(node)
	if r, has := c.power.Power(node); has && r.State != bmc.Unknown && !r.Answered.Before(changed) {
		return r.State == bmc.Off, nil
	}
	return m.PowerState == config.PowerOff, nil
}

// OutOfService is inventory.outOfService in force.
func (c *Cloud) OutOfService() config.OutOfService {
	c.power.mu.Lock()
	defer c.power.mu.Unlock()
	return c.power.oos
}

// NodePower is what the Node's machine's BMC last said; ok is false when
// the machine has no BMC.
func (c *Cloud) NodePower(node *v1.Node) (bmc.Reading, bool) { return c.power.Power(node) }

var (
	bmcPowerState = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Subsystem:      "baremetal_bmc",
		Name:           "power_state",
		Help:           "1 for the power state a machine's BMC last said (on, off) or unknown (not answered, refused the login, answered what cannot be read), 0 for the others; leader only.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"machine", "state"})
	bmcRequests = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      "baremetal_bmc",
		Name:           "requests_total",
		Help:           "Questions to BMCs about power, login included, by protocol and result (success or failure).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"protocol", "result"})
	bmcRequestSeconds = metrics.NewHistogramVec(&metrics.HistogramOpts{
		Subsystem:      "baremetal_bmc",
		Name:           "request_duration_seconds",
		Help:           "Time of one question to a BMC, login included, by protocol.",
		Buckets:        []float64{0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10},
		StabilityLevel: metrics.ALPHA,
	}, []string{"protocol"})
)

func asked(t bmc.Target, err error, took time.Duration) {
	result := "success"
	if err != nil {
		result = "failure"
	}
	bmcRequests.WithLabelValues(string(t.Protocol), result).Inc()
	bmcRequestSeconds.WithLabelValues(string(t.Protocol)).Observe(took.Seconds())
}

var powerStates = []bmc.PowerState{bmc.On, bmc.Off, bmc.Unknown}

func setPowerSeries(machine string, s bmc.PowerState) {
	for _, st := range powerStates {
		v := 0.0
		if st == s {
			v = 1
		}
		bmcPowerState.WithLabelValues(machine, string(st)).Set(v)
	}
}

func forgetPowerSeries(machine string) {
	for _, st := range powerStates {
		bmcPowerState.DeleteLabelValues(machine, string(st))
	}
}
