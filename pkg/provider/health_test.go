package provider

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/health"
)

const healthConfig = `
inventory:
  machines:
  - name: a
    addresses: [{type: InternalIP, address: 10.0.0.1}]
  - name: b
    addresses: [{type: InternalIP, address: 10.0.0.2}]
  - name: new
    addresses: [{type: InternalIP, address: 10.0.0.3}]
loadBalancer:
  pools:
  - {name: site, addresses: [10.1.0.0/24]}
  healthCheck: %s
bgp: {localASN: 64512, routerID: 10.0.0.254}
`

// healthCloud is a standby announcing one VIP via nodes a and b, whose
// probes fail for the nodes in the returned set.
func healthCloud(t *testing.T, healthCheck string) (*Cloud, func(nodes ...string), *events) {
	t.Helper()
	c := newCloud(t, fmt.Sprintf(healthConfig, healthCheck))
	withNodes(t, c, kubeletNode("a", "10.0.0.1", true, true), kubeletNode("b", "10.0.0.2", true, true))
	withServices(t, c, lbWithStatus("web", time.Now(), "10.1.0.1"))
	c.lb.mu.Lock()
	c.lb.derive(false)
	c.lb.mu.Unlock()
	var mu sync.Mutex
	failing := map[string]bool{}
	setFailing := func(nodes ...string) {
		mu.Lock()
		defer mu.Unlock()
		clear(failing)
		for _, n := range nodes {
			failing[n] = true
		}
	}
	c.lb.health.checker = health.New(healthSettings(c.lb.cfg.LoadBalancer.HealthCheck), func(_ context.Context, tg health.Target) error {
		mu.Lock()
		defer mu.Unlock()
		if failing[tg.Name] {
			return errors.New("connection refused")
		}
		return nil
	})
	c.lb.health.checker.OnRound = c.lb.health.round
	ev := recordEvents(c)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	announcedVIPs(c) // the targets, before the first round
	c.lb.health.start(ctx)
	return c, setFailing, ev
}

// eventually waits for the VIP to be announced via want.
func announcedVia(t *testing.T, c *Cloud, want string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		got := announcedVIPs(c)
		if len(got) == 1 && got[0] == "10.1.0.1 via "+want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("announced %q, want 10.1.0.1 via %s", got, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestNodeFailingHealthChecksIsNoNextHop(t *testing.T) {
	c, fail, ev := healthCloud(t, "{interval: 100ms}")
	announcedVia(t, c, "[10.0.0.1 10.0.0.2]")

	fail("b")
	announcedVia(t, c, "[10.0.0.1]")
	if !ev.has("Node b HealthCheckFailing: kube-proxy's health check fails (connection refused)") {
		t.Errorf("no HealthCheckFailing Event on Node b: %q", ev.all)
	}
	fail()
	announcedVia(t, c, "[10.0.0.1 10.0.0.2]")
	if !ev.has("Node b HealthCheckPassing") {
		t.Errorf("no HealthCheckPassing Event on Node b: %q", ev.all)
	}
}

// A prober cut off from every node sees them all fail at once: the last
// good next hops stay, and the CCM's Pod says why.
func TestAllNodesFailingKeepsTheLastGoodSet(t *testing.T) {
	c, fail, ev := healthCloud(t, "{interval: 100ms}")
	fail("a")
	announcedVia(t, c, "[10.0.0.2]")
	fail("a", "b")
	deadline := time.Now().Add(5 * time.Second)
	for !ev.has("Pod HealthChecksAllFailing") {
		if time.Now().After(deadline) {
			t.Fatalf("no HealthChecksAllFailing Event: %q", ev.all)
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond) // rounds go on failing
	announcedVia(t, c, "[10.0.0.2]")
	fail("b")
	announcedVia(t, c, "[10.0.0.1]")
}

// Off, nothing is probed and Ready nodes are next hops as before.
func TestHealthChecksOff(t *testing.T) {
	c, fail, _ := healthCloud(t, "{enabled: false, interval: 100ms}")
	fail("b")
	time.Sleep(300 * time.Millisecond)
	announcedVia(t, c, "[10.0.0.1 10.0.0.2]")
	if n := c.lb.health.checker.NotServing(); n != 0 {
		t.Errorf("%d nodes out with health checks off", n)
	}
}

// A node that turns Ready after the checker has looked carries traffic only
// once it passes, as an instance added to a cloud load balancer.
//
// Its first passes are no news: no HealthCheckPassing Event ("passes
// again") for a node never out. A thousand nodes initialised at once would
// otherwise write a thousand Events, spending the CCM's API rate that the
// Services' status writes need.
func TestNewNodeServesOnlyOncePassing(t *testing.T) {
	c, fail, ev := healthCloud(t, "{interval: 100ms}")
	announcedVia(t, c, "[10.0.0.1 10.0.0.2]")
	fail("new")
	c.lb.mu.Lock()
	c.lb.cluster.nodes = nodeLister(t, kubeletNode("a", "10.0.0.1", true, true), kubeletNode("b", "10.0.0.2", true, true), kubeletNode("new", "10.0.0.3", true, true))
	c.lb.mu.Unlock()
	time.Sleep(500 * time.Millisecond)
	announcedVia(t, c, "[10.0.0.1 10.0.0.2]")
	fail()
	announcedVia(t, c, "[10.0.0.1 10.0.0.2 10.0.0.3]")
	if ev.has("Node new HealthCheckPassing") {
		t.Errorf("a HealthCheckPassing Event for a node that never failed out: %q", ev.all)
	}
}
