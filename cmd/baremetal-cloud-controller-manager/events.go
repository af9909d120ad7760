package main

import (
	clientset "k8s.io/client-go/kubernetes"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/app"
	"k8s.io/cloud-provider/app/config"
	"k8s.io/klog/v2"
)

// eventsApart wraps a controller constructor so that the controller's
// Events go through a client, and so a rate limiter, of their own. The
// upstream service controller records two Events for every Service it
// provisions besides its two Service writes; on one limiter they halve
// how fast a burst of Services gets its addresses. Events are best effort
// and the recorder already spam-filters them per object; the same
// --kube-api-qps and --kube-api-burst apply to them.
func eventsApart(start app.InitFuncConstructor) app.InitFuncConstructor {
	return func(initContext app.ControllerInitContext, completed *config.CompletedConfig, cloud cloudprovider.Interface) app.InitFunc {
		cfg := *completed.Config
		cfg.ClientBuilder = eventClientBuilder{completed.ClientBuilder}
		return start(initContext, cfg.Complete(), cloud)
	}
}

type eventClientBuilder struct {
	cloudprovider.ControllerClientBuilder
}

func (b eventClientBuilder) Client(name string) (clientset.Interface, error) {
	client, err := b.ControllerClientBuilder.Client(name)
	if err != nil {
		return nil, err
	}
	cfg, err := b.Config(name)
	if err != nil {
		return nil, err
	}
	// A client from a config without a RateLimiter gets a limiter of its own.
	events, err := clientset.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return clientWithEvents{Interface: client, events: events.CoreV1()}, nil
}

func (b eventClientBuilder) ClientOrDie(name string) clientset.Interface {
	client, err := b.Client(name)
	if err != nil {
		klog.Fatal(err)
	}
	return client
}

type clientWithEvents struct {
	clientset.Interface
	events corev1client.CoreV1Interface
}

func (c clientWithEvents) CoreV1() corev1client.CoreV1Interface {
	return coreWithEvents{CoreV1Interface: c.Interface.CoreV1(), events: c.events}
}

type coreWithEvents struct {
	corev1client.CoreV1Interface
	events corev1client.CoreV1Interface
}

func (c coreWithEvents) Events(namespace string) corev1client.EventInterface {
	return c.events.Events(namespace)
}
