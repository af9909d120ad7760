package main

import (
	"context"
	"slices"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	coreinformers "k8s.io/client-go/informers/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	cloudprovider "k8s.io/cloud-provider"
	cloudapi "k8s.io/cloud-provider/api"
	"k8s.io/cloud-provider/app"
	"k8s.io/cloud-provider/app/config"
	cloudnodecontroller "k8s.io/cloud-provider/controllers/node"
	genericcontrollermanager "k8s.io/controller-manager/app"
	"k8s.io/controller-manager/controller"
	"k8s.io/klog/v2"
)

// startCloudNodeController starts the upstream cloud node controller, as
// the framework's own constructor does, and re-queues the Nodes it has not
// initialised yet whenever the cloud config is reloaded. The controller
// retries a Node it could not initialise (one whose machine is not in the
// inventory) with exponential back-off: after a minute of failures, its
// next try may be a minute away, and after an hour, far longer. A reload
// that lists the machine is the moment it can succeed, so it is tried
// then, through the controller's own event handler; nothing is written to
// a Node for it.
func startCloudNodeController(initCtx app.ControllerInitContext, completed *config.CompletedConfig, cloud cloudprovider.Interface) app.InitFunc {
	return func(ctx context.Context, controllerCtx genericcontrollermanager.ControllerContext) (controller.Interface, bool, error) {
		nodes := &tappedNodeInformer{NodeInformer: completed.SharedInformers.Core().V1().Nodes()}
		nodes.tap = &handlerTap{SharedIndexInformer: nodes.NodeInformer.Informer()}
		ctrl, err := cloudnodecontroller.NewCloudNodeController(
			nodes,
			completed.ClientBuilder.ClientOrDie(initCtx.ClientName),
			cloud,
			completed.ComponentConfig.NodeStatusUpdateFrequency.Duration,
			completed.ComponentConfig.NodeController.ConcurrentNodeSyncs,
			completed.ComponentConfig.NodeController.ConcurrentNodeStatusUpdates,
		)
		if err != nil {
			klog.ErrorS(err, "Cloud node controller not started")
			return nil, false, nil
		}
		if notifier, ok := cloud.(interface{ OnInventoryChange(func()) }); ok {
			notifier.OnInventoryChange(func() { nodes.tap.replayUninitialised(nodes.Lister()) })
		}
		go ctrl.RunWithContext(ctx, controllerCtx.ControllerManagerMetrics)
		return nil, true, nil
	}
}

// tappedNodeInformer is the shared Node informer, with the event handlers
// registered on it kept in its tap.
type tappedNodeInformer struct {
	coreinformers.NodeInformer
	tap *handlerTap
}

func (i *tappedNodeInformer) Informer() cache.SharedIndexInformer { return i.tap }

// handlerTap is a shared informer that remembers the handlers added to it.
type handlerTap struct {
	cache.SharedIndexInformer
	handlers []cache.ResourceEventHandler
}

func (t *handlerTap) AddEventHandler(h cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error) {
	reg, err := t.SharedIndexInformer.AddEventHandler(h)
	if err == nil {
		t.handlers = append(t.handlers, h)
	}
	return reg, err
}

// replayUninitialised hands every Node that still has the uninitialized
// taint to the handlers as an update without change, as an informer's
// resync would.
func (t *handlerTap) replayUninitialised(lister corelisters.NodeLister) {
	nodes, err := lister.List(labels.Everything())
	if err != nil {
		klog.ErrorS(err, "Listing Nodes to initialise after a reload")
		return
	}
	count := 0
	for _, node := range nodes {
		if !slices.ContainsFunc(node.Spec.Taints, func(t v1.Taint) bool { return t.Key == cloudapi.TaintExternalCloudProvider }) {
			continue
		}
		for _, h := range t.handlers {
			h.OnUpdate(node, node)
		}
		count++
	}
	if count > 0 {
		klog.InfoS("Cloud config reloaded; trying the uninitialised Nodes again", "nodes", count)
	}
}
