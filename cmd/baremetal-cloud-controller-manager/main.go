// Command baremetal-cloud-controller-manager is the Kubernetes cloud
// controller manager for machines their owners run themselves.
package main

import (
	"context"
	"net/netip"
	"os"
	"os/signal"
	"syscall"
	"time"

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

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/provider"
)

const commandName = "baremetal-cloud-controller-manager"

// readiness is set from the command line before initCloud runs.
var readiness readinessOptions

// classes are the Services served, set from the command line before
// initCloud runs.
var classes provider.Classes

func addClassFlags(fs *pflag.FlagSet) {
	fs.StringVar(&classes.Class, "load-balancer-class", "",
		"also serve LoadBalancer Services of this spec.loadBalancerClass (a label-style key with a domain, e.g. example.com/baremetal), as MetalLB's --lb-class does, so that this CCM can run beside another implementation. Empty: only Services without a class, as upstream.")
	fs.BoolVar(&classes.IgnoreClassLess, "ignore-class-less-services", false,
		"leave LoadBalancer Services without a loadBalancerClass to another implementation (MetalLB running beside this CCM): serve only those of --load-balancer-class. This CCM writes to no Service it does not serve, but takes the service controller's cleanup finalizer off one that is deleted.")
}

// stopping ends at the first SIGTERM or SIGINT (a rolling upgrade, a
// drain, Ctrl-C): the framework's controllers stop and this replica ends
// its BGP sessions with graceful restart and tells BFD AdminDown, so that
// the routers keep its paths rather than drop them as failed. A second
// signal ends the process at once.
var stopping context.Context

// cloud is the provider initCloud started, if it did.
var cloud *provider.Cloud

// stopGrace bounds the wait for the routers to be told; the Pod's
// terminationGracePeriodSeconds (30 s) is the outer bound.
const stopGrace = 10 * time.Second

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	context.AfterFunc(ctx, stop) // the next signal has its default effect
	stopping = ctx
	command := newCommand(ctx.Done())
	code := cli.Run(command)
	if cloud != nil && ctx.Err() != nil {
		klog.InfoS("Stopping: ending BGP sessions with graceful restart and telling BFD AdminDown")
		select {
		case <-cloud.Stopped():
			klog.InfoS("Stopped")
		case <-time.After(stopGrace):
			klog.ErrorS(nil, "The routers were not all told of this replica's stop in time; exiting anyway", "after", stopGrace)
		}
		klog.Flush()
	}
	os.Exit(code)
}

// newCommand is the command line: the framework's controller manager,
// running until stop is closed, and the subcommands.
func newCommand(stop <-chan struct{}) *cobra.Command {
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
	addClassFlags(fss.FlagSet("load balancer"))

	command := app.NewCloudControllerManagerCommand(opts, initCloud, controllerInitializers(pvLabel), names.CCMControllerAliases(), fss, stop)
	command.Use = commandName
	run := command.RunE
	command.RunE = func(cmd *cobra.Command, args []string) error {
		if f := cmd.Flags().Lookup("version"); f == nil || f.Value.String() == "false" {
			waitForAPIServer(context.Background(), opts.Master, opts.Generic.ClientConnection.Kubeconfig, apiServerWait)
		}
		return run(cmd, args)
	}
	subcommands := []*cobra.Command{validateCommand(), convertMetalLBCommand()}
	for _, sub := range subcommands {
		ownHelp(sub)
	}
	command.AddCommand(subcommands...)
	// cobra's completion command would inherit the framework's help,
	// which lists flags it does not take.
	command.CompletionOptions.DisableDefaultCmd = true
	listCommands(command)
	// Upstream's text says the route controller ignores it without
	// --allocate-node-cidrs; the route controller needs it regardless.
	if f := command.Flags().Lookup("cluster-cidr"); f != nil {
		f.Usage = "CIDR range of the cluster's pods, both families for dual stack, comma-separated. The route controller needs it whenever the cloud config has a routes: section (it exits without it); the node IPAM uses it with --allocate-node-cidrs."
	}
	return command
}

// controllerInitializers is the framework's default set, each with a client
// name of its own (so the API server's audit log and metrics tell them
// apart), plus the PersistentVolume label and out-of-service controllers.
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
	constructors[outOfServiceControllerName] = app.ControllerInitFuncConstructor{
		InitContext: app.ControllerInitContext{ClientName: "baremetal-out-of-service-controller"},
		Constructor: startOutOfService,
	}
	return constructors
}

func initCloud(c *config.CompletedConfig) cloudprovider.Interface {
	shared := c.ComponentConfig.KubeCloudShared.CloudProvider
	iface, err := cloudprovider.InitCloudProvider(shared.Name, shared.CloudConfigFile)
	if err != nil {
		klog.Fatalf("Cloud provider could not be initialized: %v", err)
	}
	if iface == nil {
		klog.Fatalf("Cloud provider %q is not built into %s", shared.Name, commandName)
	}
	// Every replica announces, the standbys too (see provider.Speak); the
	// framework starts its informers only on the leader.
	if bm, ok := iface.(*provider.Cloud); ok {
		cloud = bm
		if err := classes.Validate(); err != nil {
			klog.Fatal(err)
		}
		classes.Serve(c.SharedInformers)
		bm.Speak(stopping, c.SharedInformers, c.VersionedClient, c.ComponentConfig.Generic.LeaderElection.RenewDeadline.Duration)
		c.SharedInformers.Start(stopping.Done())
		minEstablished, err := readiness.minEstablished()
		if err != nil {
			klog.Fatal(err)
		}
		bm.SetMinEstablished(minEstablished)
		if err := serveReadiness(readiness.Address, bm.Ready, func(vip netip.Addr) any { return bm.Status(vip) }); err != nil {
			klog.Fatal(err)
		}
	}
	return iface
}
