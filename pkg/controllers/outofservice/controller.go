// Package outofservice adds node.kubernetes.io/out-of-service to a
// NotReady Node whose machine's BMC has said "off" for a grace period, so
// that the control plane deletes its pods and detaches their volumes at
// once (non-graceful node shutdown), and removes it once the BMC says "on"
// and the Node is Ready again. A BMC that does not answer never adds it.
package outofservice

import (
	"cmp"
	"context"
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/component-base/metrics"
	"k8s.io/klog/v2"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/bmc"
	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/config"
	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/desired"
)

const (
	// TaintValue is the value the Kubernetes docs give the taint.
	TaintValue = "nodeshutdown"
	// Annotation marks a taint this controller added, with when: only
	// such a taint is removed (one a person added stays).
	Annotation = "baremetal.cloudprovider.io/out-of-service"
)

// checkEvery is how often every Node is looked at: the BMC's answers and
// the grace period move without a Node changing.
const checkEvery = 2 * time.Second

// Power is what the cloud knows of machines' power.
type Power interface {
	// OutOfService is inventory.outOfService in force.
	OutOfService() config.OutOfService
	// NodePower is what the Node's machine's BMC last said; ok is false
	// when it has no BMC.
	NodePower(node *v1.Node) (r bmc.Reading, ok bool)
}

// Action is what Decide says to do with a Node's taint.
type Action string

const (
	Keep   Action = ""
	Add    Action = "add"
	Remove Action = "remove"
)

// NodeView is what the rule reads of a Node.
type NodeView struct {
	Ready bool
	// Tainted: the Node has the out-of-service taint; Ours: we added it.
	Tainted, Ours bool
	// Transition is when the Node's readiness last changed.
	Transition time.Time
	// HasBMC: its machine has one; Power is what it said last, at
	// Answered, and has said since Since.
	HasBMC          bool
	Power           bmc.PowerState
	Since, Answered time.Time
}

// Decide is the rule. Add only when turned on, to a NotReady Node whose
// BMC has said Off for the grace period since the Node went NotReady;
// remove only a taint we added, once the BMC says On and the Node is
// Ready. Only what the BMC said since the Node's readiness last changed
// counts: an older "off" may come from before the machine was powered on
// again. Unknown changes nothing.
func Decide(oos config.OutOfService, n NodeView, now time.Time) Action {
	fresh := n.HasBMC && !n.Answered.Before(n.Transition)
	switch {
	case n.Tainted && n.Ours:
		if n.Ready && fresh && n.Power == bmc.On {
			return Remove
		}
	case !n.Tainted:
		offSince := n.Since
		if n.Transition.After(offSince) {
			offSince = n.Transition
		}
		if oos.Enabled && !n.Ready && fresh && n.Power == bmc.Off && now.Sub(offSince) >= oos.GracePeriod.Duration {
			return Add
		}
	}
	return Keep
}

// Controller applies Decide to every Node.
type Controller struct {
	client   kubernetes.Interface
	lister   corelisters.NodeLister
	synced   cache.InformerSynced
	power    Power
	recorder record.EventRecorder
	now      func() time.Time
}

// New returns a controller on the shared Node informer.
func New(informer coreinformers.NodeInformer, client kubernetes.Interface, power Power, recorder record.EventRecorder) *Controller {
	return &Controller{client: client, lister: informer.Lister(), synced: informer.Informer().HasSynced, power: power, recorder: recorder, now: time.Now}
}

// Run looks at every Node every checkEvery until ctx ends.
func (c *Controller) Run(ctx context.Context) {
	if !cache.WaitForNamedCacheSync("out-of-service", ctx.Done(), c.synced) {
		return
	}
	tick := time.NewTicker(checkEvery)
	defer tick.Stop()
	for {
		c.Sync(ctx)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// Sync decides for every Node, in name order, and counts ours.
func (c *Controller) Sync(ctx context.Context) {
	nodes, err := c.lister.List(labels.Everything())
	if err != nil {
		return
	}
	slices.SortFunc(nodes, func(a, b *v1.Node) int { return cmp.Compare(a.Name, b.Name) })
	oos := c.power.OutOfService()
	now := c.now()
	ours := 0
	for _, node := range nodes {
		view := c.view(node)
		switch Decide(oos, view, now) {
		case Add:
			if err := c.taint(ctx, node, view, oos, now); err != nil {
				klog.ErrorS(err, "Adding the out-of-service taint", "node", klog.KObj(node))
				continue
			}
			ours++
		case Remove:
			if err := c.untaint(ctx, node); err != nil {
				klog.ErrorS(err, "Removing the out-of-service taint", "node", klog.KObj(node))
				ours++
			}
		default:
			if view.Tainted && view.Ours {
				ours++
			}
		}
	}
	nodesOutOfService.Set(float64(ours))
}

func (c *Controller) view(node *v1.Node) NodeView {
	v := NodeView{Tainted: tainted(node)}
	v.Ready, v.Transition = desired.Readiness(node)
	_, v.Ours = node.Annotations[Annotation]
	r, ok := c.power.NodePower(node)
	v.HasBMC, v.Power, v.Since, v.Answered = ok, r.State, r.Since, r.Answered
	return v
}

func tainted(node *v1.Node) bool {
	return slices.ContainsFunc(node.Spec.Taints, func(t v1.Taint) bool { return t.Key == v1.TaintNodeOutOfService })
}

func (c *Controller) taint(ctx context.Context, node *v1.Node, view NodeView, oos config.OutOfService, now time.Time) error {
	n := node.DeepCopy()
	added := metav1.NewTime(now)
	n.Spec.Taints = append(n.Spec.Taints, v1.Taint{Key: v1.TaintNodeOutOfService, Value: TaintValue, Effect: v1.TaintEffectNoExecute, TimeAdded: &added})
	if n.Annotations == nil {
		n.Annotations = map[string]string{}
	}
	n.Annotations[Annotation] = now.UTC().Format(time.RFC3339)
	if _, err := c.client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
		return err
	}
	klog.InfoS("Added the out-of-service taint: the BMC says the machine is off and the Node is NotReady", "node", klog.KObj(node), "offSince", view.Since)
	taintChanges.WithLabelValues(string(Add)).Inc()
	c.recorder.Eventf(node, v1.EventTypeWarning, "OutOfServiceTaintAdded",
		"the BMC has said the machine is powered off since %s (more than inventory.outOfService.gracePeriod, %s) and the Node is NotReady: added %s=%s:NoExecute, so its pods are deleted and their volumes detached now",
		view.Since.UTC().Format(time.RFC3339), oos.GracePeriod.Duration, v1.TaintNodeOutOfService, TaintValue)
	return nil
}

func (c *Controller) untaint(ctx context.Context, node *v1.Node) error {
	n := node.DeepCopy()
	n.Spec.Taints = slices.DeleteFunc(n.Spec.Taints, func(t v1.Taint) bool { return t.Key == v1.TaintNodeOutOfService })
	delete(n.Annotations, Annotation)
	if _, err := c.client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	}
	klog.InfoS("Removed the out-of-service taint: the BMC says the machine is on and the Node is Ready", "node", klog.KObj(node))
	taintChanges.WithLabelValues(string(Remove)).Inc()
	c.recorder.Eventf(node, v1.EventTypeNormal, "OutOfServiceTaintRemoved",
		"the BMC says the machine is powered on and the Node is Ready: removed %s", v1.TaintNodeOutOfService)
	return nil
}

var (
	nodesOutOfService = metrics.NewGauge(&metrics.GaugeOpts{
		Subsystem:      "baremetal_out_of_service",
		Name:           "nodes",
		Help:           "Nodes that carry the node.kubernetes.io/out-of-service taint the CCM added (their BMC said off); leader only.",
		StabilityLevel: metrics.ALPHA,
	})
	taintChanges = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      "baremetal_out_of_service",
		Name:           "taint_changes_total",
		Help:           "Out-of-service taints the CCM added and removed, by action (add, remove).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"action"})
)

// Metrics are this controller's.
func Metrics() []metrics.Registerable { return []metrics.Registerable{nodesOutOfService, taintChanges} }
