package e2e

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/test/framework"
)

// The full size is the README's: make e2e E2EFLAGS="-restart-services=1000 -restart-nodes=100".
var (
	restartServices = flag.Int("restart-services", 200, "LoadBalancer Services in the restart-at-scale test")
	restartNodes    = flag.Int("restart-nodes", 50, "Nodes (each a next hop of every VIP, with a pod route) in the restart-at-scale test")
)

// TestRestartAtScaleDeletesNoRoute restarts the only replica, by kill -9
// and by a clean stop, with every VIP announced via every node, and counts
// the routes the router (FRR, a strict graceful-restart helper) deletes:
// none may go. The nodes are API objects whose addresses are on the
// router's fabric subnet; the router installs routes via them without
// their being there, and no packet is sent to them.
func TestRestartAtScaleDeletesNoRoute(t *testing.T) {
	ctx := context.Background()
	if *restartNodes > 200 || *restartServices > 4000 {
		t.Fatalf("at most 200 nodes (the fabric's /24) and 4,000 Services (the bulk pool)")
	}
	var machines []*node
	for i := range *restartNodes {
		machines = append(machines, &node{name: fmt.Sprintf("s%d", i), ip: fmt.Sprintf("10.250.0.%d", 50+i),
			podNet: fmt.Sprintf("10.245.%d.0/24", i)})
	}
	// Health checks are on, as shipped: every machine answers them.
	rack, err := net1.answerFor(machines)
	if err != nil {
		t.Fatal(err)
	}
	defer rack.Close()
	host := net1.hosts[0]
	ccm := startCCMOn(t, "scale-a", host, machines...)
	framework.WaitLeader(t, ccm)

	start := time.Now()
	err = framework.Parallel(len(machines), 8, func(i int) error {
		m := machines[i]
		if err := framework.RegisterNode(ctx, cluster.Admin, m.name, "", true, []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: m.ip}}); err != nil {
			return err
		}
		patch, _ := json.Marshal(map[string]any{"spec": map[string]any{"podCIDR": m.podNet, "podCIDRs": []string{m.podNet}}})
		_, err := cluster.Admin.CoreV1().Nodes().Patch(ctx, m.name, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, m := range machines {
			cluster.Admin.CoreV1().Nodes().Delete(context.Background(), m.name, metav1.DeleteOptions{})
		}
	})
	const ns = "scale"
	framework.CreateNamespace(t, cluster.Admin, ns)
	err = framework.Parallel(*restartServices, 8, func(i int) error {
		svc := framework.LBService(ns, fmt.Sprintf("svc-%d", i))
		svc.Annotations = map[string]string{"baremetal.cloudprovider.io/address-pool": "bulk"}
		_, err := cluster.Admin.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { forgetServices(ns) })

	// Every VIP via min(nodes, maximum-paths) next hops, every pod route.
	var want []string
	framework.Eventually(t, 10*time.Minute, "the router's kernel has every VIP and pod route", func() (bool, string) {
		list, err := cluster.Admin.CoreV1().Services(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		want = want[:0]
		for _, svc := range list.Items {
			for _, ip := range framework.IngressIPs(&svc) {
				want = append(want, ip+"/32")
			}
		}
		if len(want) != *restartServices {
			return false, fmt.Sprintf("%d of %d Services have an address", len(want), *restartServices)
		}
		for _, m := range machines {
			want = append(want, m.podNet)
		}
		return routerHas(want, min(len(machines), 8))
	})
	t.Logf("%d VIPs via %d nodes and %d pod routes at the router after %s", *restartServices, len(machines), len(machines), time.Since(start).Round(time.Second))
	// Every node answers its health checks: no VIP was ever without next
	// hops, not even the first ones, created while the checker had probed
	// nothing yet.
	if line := ccm.LogLine("VIP is not announced"); line != "" {
		t.Errorf("a VIP was reported without next hops while every node was healthy: %s", line)
	}

	monitor := monitorRoutes(t)
	defer monitor.Stop()
	bgpdFrom := logZebraUpdates(t)
	restart := func(stop func(), name string) *framework.Process {
		stop()
		stopped := time.Now()
		// The router keeps the paths as stale: the helper is at work.
		// (Only this host's: a replica of an earlier test that never came
		// back may have left one for good, see README "Failover and
		// restarts".)
		framework.Eventually(t, 30*time.Second, "the router holds the stopped replica's paths as stale", func() (bool, string) {
			stale, err := stalePaths(host.ip)
			return len(stale) > 0, fmt.Sprint(len(stale), " stale ", err)
		})
		next := startCCMOn(t, name, host, machines...)
		framework.WaitLeader(t, next)
		framework.Eventually(t, 60*time.Second, name+" has its session", func() (bool, string) {
			return next.LogContains("BGP session state changed", "peer=\""+routerIP+"\"", "established"), "no session yet"
		})
		// After the End-of-RIB the router sweeps what stayed stale.
		framework.Eventually(t, 5*time.Minute, "no stale path is left at the router", func() (bool, string) {
			stale, err := stalePaths(host.ip)
			return err == nil && len(stale) == 0, fmt.Sprint(len(stale), " stale, e.g. ", stale[:min(len(stale), 5)], " ", err)
		})
		if ok, detail := routerHas(want, min(len(machines), 8)); !ok {
			t.Errorf("after %s: %s", name, detail)
		}
		t.Logf("%s: no stale path left at the router %s after the stop", name, time.Since(stopped).Round(100*time.Millisecond))
		return next
	}
	replicas := []*framework.Process{ccm}
	ccm = restart(ccm.Kill, "scale-b")
	replicas = append(replicas, ccm)
	ccm = restart(ccm.Stop, "scale-c")
	replicas = append(replicas, ccm)
	monitor.Stop()
	// The rack answered every probe: the health checks were at work, not
	// held or off.
	for _, r := range replicas {
		if line := r.LogLine("VIP is not announced"); line != "" {
			t.Errorf("%s had a VIP without next hops while every node was healthy: %s", r.Name, line)
		}
		if line := r.LogLine("fails its health checks"); line != "" {
			t.Errorf("a replica saw a health check fail, so this run did not test healthy nodes: %s", line)
		}
	}
	deleted := deletions(monitor.Logs(), net1.frr.BgpdLogs()[bgpdFrom:], want)
	fmt.Printf("restart at scale: %d VIPs via %d nodes (%d paths) and %d pod routes, a kill -9 and a clean stop: %d route deletions at the router\n",
		*restartServices, len(machines), *restartServices*len(machines), len(machines), len(deleted))
	if len(deleted) > 0 {
		t.Errorf("the router deleted %d routes that should have stayed, e.g.:\n%s", len(deleted), strings.Join(deleted[:min(len(deleted), 10)], "\n"))
	}
}

// forgetServices deletes the Services of ns, with no CCM left to remove
// their finalizers.
func forgetServices(ns string) {
	ctx := context.Background()
	svcs := cluster.Admin.CoreV1().Services(ns)
	list, err := svcs.List(ctx, metav1.ListOptions{})
	if err != nil {
		return
	}
	framework.Parallel(len(list.Items), 8, func(i int) error {
		svc := &list.Items[i]
		svcs.Delete(ctx, svc.Name, metav1.DeleteOptions{})
		if len(svc.Finalizers) > 0 {
			patch := []byte(`{"metadata":{"finalizers":null}}`)
			svcs.Patch(ctx, svc.Name, types.MergePatchType, patch, metav1.PatchOptions{})
		}
		return nil
	})
}

// stalePaths lists the paths the router holds as stale from neighbour, as
// "prefix via next hop".
func stalePaths(neighbour string) ([]string, error) {
	out, err := net1.frr.Vtysh("show bgp ipv4 unicast json")
	if err != nil {
		return nil, err
	}
	var table struct {
		Routes map[string][]struct {
			Stale    bool   `json:"stale"`
			PeerID   string `json:"peerId"`
			Nexthops []struct {
				IP string `json:"ip"`
			} `json:"nexthops"`
		} `json:"routes"`
	}
	if err := json.Unmarshal([]byte(out), &table); err != nil {
		return nil, fmt.Errorf("reading the router's table: %w", err)
	}
	var stale []string
	for prefix, paths := range table.Routes {
		for _, p := range paths {
			if p.Stale && p.PeerID == neighbour && len(p.Nexthops) > 0 {
				stale = append(stale, prefix+" via "+p.Nexthops[0].IP)
			}
		}
	}
	slices.Sort(stale)
	return stale, nil
}

// routerHas reports whether the router's kernel has a route to each of
// prefixes, the /32s with at least hops next hops.
func routerHas(prefixes []string, hops int) (bool, string) {
	out, err := net1.frr.Routes("-4")
	if err != nil {
		return false, err.Error()
	}
	nexthops := map[string]int{}
	current := ""
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) > 0 && !strings.HasPrefix(line, " ") && !strings.HasPrefix(line, "\t") {
			current = f[0]
			if !strings.Contains(current, "/") {
				current += "/32"
			}
			nexthops[current] = 0
			if strings.Contains(line, " via ") {
				nexthops[current] = 1
			}
		} else if strings.Contains(line, "nexthop via") {
			nexthops[current]++
		}
	}
	missing := 0
	example := ""
	for _, p := range prefixes {
		n, ok := nexthops[p]
		if !ok || (strings.HasSuffix(p, "/32") && n < hops) {
			missing++
			example = fmt.Sprintf("%s: %d next hops", p, n)
		}
	}
	return missing == 0, fmt.Sprintf("%d of %d routes missing or short, e.g. %s", missing, len(prefixes), example)
}
