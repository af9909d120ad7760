package main

import (
	"context"
	"fmt"

	"github.com/spf13/pflag"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/app"
	"k8s.io/cloud-provider/app/config"
	genericcontrollermanager "k8s.io/controller-manager/app"
	"k8s.io/controller-manager/controller"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/controllers/pvlabel"
)

const pvLabelControllerName = "pv-label-controller"

type pvLabelOptions struct {
	Workers int
}

func (o *pvLabelOptions) AddFlags(fs *pflag.FlagSet) {
	fs.IntVar(&o.Workers, "concurrent-pv-label-syncs", o.Workers, "The number of PersistentVolumes the pv-label-controller labels at once.")
}

// startFunc is the pv-label-controller's constructor for the framework's
// controller map: it runs on the shared informers, under the leader lock.
func (o *pvLabelOptions) startFunc(initCtx app.ControllerInitContext, completed *config.CompletedConfig, cloud cloudprovider.Interface) app.InitFunc {
	return func(ctx context.Context, _ genericcontrollermanager.ControllerContext) (controller.Interface, bool, error) {
		labeler, ok := cloud.(cloudprovider.PVLabeler)
		if !ok {
			return nil, false, nil
		}
		if o.Workers < 1 {
			return nil, false, fmt.Errorf("--concurrent-pv-label-syncs must be at least 1, not %d", o.Workers)
		}
		ctrl, err := pvlabel.New(completed.SharedInformers.Core().V1().PersistentVolumes(), completed.ClientBuilder.ClientOrDie(initCtx.ClientName), labeler)
		if err != nil {
			return nil, false, err
		}
		// A new cloud config may name storage that backs volumes left
		// unlabelled so far.
		if notifier, ok := cloud.(interface{ OnInventoryChange(func()) }); ok {
			notifier.OnInventoryChange(ctrl.EnqueueAll)
		}
		go ctrl.Run(ctx, o.Workers)
		return nil, true, nil
	}
}
