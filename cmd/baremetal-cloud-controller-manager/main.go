// Command baremetal-cloud-controller-manager is the Kubernetes cloud
// controller manager for machines their owners run themselves.
package main

import (
	"context"
	"net/netip"
	"os"

	"k8s.io/apimachinery/pkg/util/wait"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/app"
	"k8s.io/cloud-provider/app/config"
	"k8s.io/cloud-provider/names"
	"k8s.io/cloud-provider/options"
	"k8s.io/component-base/cli"
	cliflag "k8s.io/component-base/cli/flag"
	_ "k8s.io/component-base/logs/json/register"          // optional JSON log format
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // client-go metrics
	_ "k8s.io/component-base/metrics/prometheus/version"  // version metric
	"k8s.io/klog/v2"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/provider"
)

const commandName = "baremetal-cloud-controller-manager"

// readiness is set from the command line before initCloud runs.
var readiness readinessOptions

func main() {
	opts, err := options.NewCloudControllerManagerOptions()
	if err != nil {
		klog.Fatalf("unable to initialize command options: %v", err)
	}
	// The provider is built in, so --cloud-provider may be left out.
	opts.KubeCloudShared.CloudProvider.Name = provider.ProviderName

	fss := cliflag.NamedFlagSets{}
	pvLabel := &pvLabelOptions{Workers: 2}
	pvLabel.AddFlags(fss.FlagSet("pv-label controller"))
	readiness.AddFlags(fss.FlagSet("readiness"))

	command := app.NewCloudControllerManagerCommand(opts, initCloud, controllerInitializers(pvLabel), names.CCMControllerAliases(), fss, wait.NeverStop)
	command.Use = commandName
	command.AddCommand(validateCommand(), convertMetalLBCommand())
	os.Exit(cli.Run(command))
}

// controllerInitializers is the framework's default set, each with a client
// name of its own (so the API server's audit log and metrics tell them
// apart), plus the PersistentVolume label controller.
func controllerInitializers(pvLabel *pvLabelOptions) map[string]app.ControllerInitFuncConstructor {
	clientNames := map[string]string{
		names.CloudNodeController:          "baremetal-cloud-node-controller",
		names.CloudNodeLifecycleController: "baremetal-cloud-node-lifecycle-controller",
		names.ServiceLBController:          "baremetal-service-lb-controller",
		names.NodeRouteController:          "baremetal-node-route-controller",
	}
	constructors := map[string]app.ControllerInitFuncConstructor{}
	for name, c := range app.DefaultInitFuncConstructors {
		if clientName, ok := clientNames[name]; ok {
			c.InitContext.ClientName = clientName
		}
		switch name {
		case names.ServiceLBController:
			c.Constructor = eventsApart(c.Constructor)
		case names.CloudNodeController:
			c.Constructor = startCloudNodeController
		}
		constructors[name] = c
	}
	constructors[pvLabelControllerName] = app.ControllerInitFuncConstructor{
		InitContext: app.ControllerInitContext{ClientName: "baremetal-pv-label-controller"},
		Constructor: pvLabel.startFunc,
	}
	return constructors
}

func initCloud(c *config.CompletedConfig) cloudprovider.Interface {
	shared := c.ComponentConfig.KubeCloudShared.CloudProvider
	cloud, err := cloudprovider.InitCloudProvider(shared.Name, shared.CloudConfigFile)
	if err != nil {
		klog.Fatalf("Cloud provider could not be initialized: %v", err)
	}
	if cloud == nil {
		klog.Fatalf("Cloud provider %q is not built into %s", shared.Name, commandName)
	}
	// Every replica announces, the standbys too (see provider.Speak); the
	// framework starts its informers only on the leader.
	if bm, ok := cloud.(*provider.Cloud); ok {
		bm.Speak(context.Background(), c.SharedInformers, c.VersionedClient, c.ComponentConfig.Generic.LeaderElection.RenewDeadline.Duration)
		c.SharedInformers.Start(wait.NeverStop)
		if err := serveReadiness(readiness.Address, bm.Ready, func(vip netip.Addr) any { return bm.Status(vip) }); err != nil {
			klog.Fatal(err)
		}
	}
	return cloud
}
