package provider

import (
	"context"
	"time"

	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/bgpannouncer"
)

// Speak starts this replica's load balancer, which follows the cluster and
// announces until ctx ends, and records its Events; call it on every
// replica at start, before leader election. factory is the one the
// framework later passes to SetInformers; the caller starts it. apiLoss is
// how long the API server may be away before the replica's BGP sessions
// end gracefully (see bgpannouncer.Announcer.Run).
func (c *Cloud) Speak(ctx context.Context, factory informers.SharedInformerFactory, client kubernetes.Interface, apiLoss time.Duration) {
	c.recordEvents(client)
	c.SetInformers(factory)
	c.runOnce.Do(func() { go c.run(ctx, apiReachable(client), apiLoss) })
}

// apiReachable asks the API server whether it is ready: a watch cannot
// tell a quiet cluster from a lost one.
func apiReachable(client kubernetes.Interface) func(context.Context) error {
	return func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, bgpannouncer.APIPoll)
		defer cancel()
		return client.Discovery().RESTClient().Get().AbsPath("/readyz").Do(ctx).Error()
	}
}
