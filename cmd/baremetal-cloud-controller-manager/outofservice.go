package main

import (
	"context"

	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/app"
	"k8s.io/cloud-provider/app/config"
	genericcontrollermanager "k8s.io/controller-manager/app"
	"k8s.io/controller-manager/controller"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/controllers/outofservice"
)

const outOfServiceControllerName = "out-of-service-controller"

// startOutOfService is the out-of-service taint controller's constructor
// for the framework's controller map: it runs on the shared Node informer,
// under the leader lock, and does nothing until the cloud config turns
// inventory.outOfService on.
func startOutOfService(initCtx app.ControllerInitContext, completed *config.CompletedConfig, cloud cloudprovider.Interface) app.InitFunc {
	return func(ctx context.Context, _ genericcontrollermanager.ControllerContext) (controller.Interface, bool, error) {
		power, ok := cloud.(outofservice.Power)
		if !ok {
			return nil, false, nil
		}
		ctrl := outofservice.New(completed.SharedInformers.Core().V1().Nodes(), completed.ClientBuilder.ClientOrDie(initCtx.ClientName), power, completed.EventRecorder)
		go ctrl.Run(ctx)
		return nil, true, nil
	}
}
