package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/test/framework"
)

var (
	cluster   *framework.Cluster
	ccmBinary string
	net1      *site
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	var suite *framework.Suite
	return framework.RunSuiteWith(m, &suite, func(s *framework.Suite) (func(), error) {
		cluster, ccmBinary = s.Cluster, s.Binary
		var err error
		if net1, err = buildSite(cluster.AdminConfig.Host); err != nil {
			return nil, fmt.Errorf("e2e: %w", err)
		}
		for _, h := range net1.hosts {
			h.kubeconfig, err = cluster.ServiceAccountKubeconfigVia(context.Background(), "kube-system", "baremetal-cloud-controller-manager",
				fmt.Sprintf("https://127.0.0.1:%d", h.apiPort))
			if err != nil {
				net1.teardown()
				return nil, fmt.Errorf("e2e: %w", err)
			}
		}
		return net1.teardown, nil
	})
}

// startCCM starts a replica on the first control-plane host.
func startCCM(t *testing.T, name string) *framework.Process {
	return startCCMOn(t, name, net1.hosts[0])
}

// startCCMOn starts a replica on h, with the cloud config every replica
// shares, listing the site's nodes and machines.
func startCCMOn(t *testing.T, name string, h *host, machines ...*node) *framework.Process {
	t.Helper()
	cfg, err := net1.writeConfig(machines...)
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"--configure-cloud-routes=true", "--cluster-cidr=10.244.0.0/15", "--route-reconciliation-period=2s"}
	if len(machines) > 0 {
		// Many Services and Nodes at once: the client limits of a large site.
		args = append(args, "--kube-api-qps=200", "--kube-api-burst=300", "--concurrent-service-syncs=4")
	}
	return framework.StartReplica(t, framework.CCM{
		Binary: ccmBinary, Name: name, Kubeconfig: h.kubeconfig, CloudConfig: cfg, Netns: h.ns.Name,
		Env:  []string{"POD_IP=" + h.ip},
		Args: args,
	})
}

// serve answers every TCP connection to addr inside ns with the node's name.
func serve(t *testing.T, n *node, addr string) {
	t.Helper()
	l, err := n.ns.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listening on %s in %s: %v", addr, n.name, err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Write([]byte(n.name))
			c.Close()
		}
	}()
}

// ask connects from ns (from the given local address, if any) and returns
// the name of the node that answered.
func ask(ns *framework.Netns, local, addr string) (string, error) {
	var conn net.Conn
	err := ns.Do(func() error {
		d := net.Dialer{Timeout: 500 * time.Millisecond}
		if local != "" {
			d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(local)}
		}
		var err error
		conn, err = d.Dial("tcp", addr)
		return err
	})
	if err != nil {
		return "", err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(time.Second))
	b, err := io.ReadAll(conn)
	return string(b), err
}

func spread(t *testing.T, vip string, connections int) map[string]int {
	t.Helper()
	hits := map[string]int{}
	for i := 0; i < connections; i++ {
		name, err := ask(net1.client, "", vip+":80")
		if err != nil {
			hits["error: "+err.Error()]++
			continue
		}
		hits[name]++
	}
	return hits
}

func setReady(t *testing.T, name string, ready bool) {
	t.Helper()
	ip := ""
	for _, n := range net1.nodes {
		if n.name == name {
			ip = n.ip
		}
	}
	if err := framework.SetNodeStatus(context.Background(), cluster.Admin, name, ready, []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: ip}}); err != nil {
		t.Fatal(err)
	}
}

func TestDataPath(t *testing.T) {
	ctx := context.Background()
	top := t // what the later steps still need lives as long as the whole test
	a, b := net1.nodes[0], net1.nodes[1]
	for _, n := range net1.nodes {
		serve(t, n, n.podIP+":8080")
		if err := framework.RegisterNode(ctx, cluster.Admin, n.name, "", true, []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: n.ip}}); err != nil {
			t.Fatal(err)
		}
		patch, _ := json.Marshal(map[string]any{"spec": map[string]any{"podCIDR": n.podNet, "podCIDRs": []string{n.podNet}}})
		if _, err := cluster.Admin.CoreV1().Nodes().Patch(ctx, n.name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	podToPod := func() (bool, string) {
		got, err := ask(a.ns, a.podIP, b.podIP+":8080")
		return err == nil && got == b.name, fmt.Sprintf("%s -> %s: %q %v", a.podIP, b.podIP, got, err)
	}
	if ok, _ := podToPod(); ok {
		t.Fatal("pods on different nodes reach each other before any route is announced: the test proves nothing")
	}

	leader := startCCM(t, "ccm-a")
	framework.WaitLeader(t, leader)
	// The subtests share default/web; it goes with the test, not with the
	// suite (a later test's controllers would find it).
	t.Cleanup(func() { framework.ForgetService(cluster.Admin, "default", "web") })
	leading, leadingHost := leader, net1.hosts[0] // the replica that leads now, and where
	framework.Eventually(t, 60*time.Second, "pod on n1 reaches pod on n2 through the router", podToPod)
	routes, _ := net1.frr.Routes("-4")
	t.Logf("router's kernel routes:\n%s", routes)

	t.Run("VIP is load-balanced over the nodes", func(t *testing.T) {
		svc := &v1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"},
			Spec:       v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer, Ports: []v1.ServicePort{{Protocol: v1.ProtocolTCP, Port: 80}}},
		}
		if _, err := cluster.Admin.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		vip := waitIngress(t, "default", "web")
		// kube-proxy's part: each node takes the VIP.
		for _, n := range net1.nodes {
			if _, err := n.ns.IP("addr", "add", vip+"/32", "dev", "lo"); err != nil {
				t.Fatal(err)
			}
			serve(top, n, vip+":80")
		}
		framework.Eventually(t, 60*time.Second, "the router has the VIP via all three nodes", func() (bool, string) {
			out, _ := net1.frr.Routes("-4")
			return strings.Count(routeLines(out, vip), "nexthop via") == 3, out
		})
		hits := spread(t, vip, 60)
		t.Logf("60 connections to %s: %v", vip, hits)
		if len(hits) < 2 || hasErrors(hits) {
			t.Errorf("connections to the VIP: %v; want answers from more than one node and no errors", hits)
		}

		// externalTrafficPolicy: Local with the only endpoint on n2.
		framework.WriteEndpointSlice(t, cluster.Admin, "default", "web", b.name)
		if _, err := cluster.Admin.CoreV1().Services("default").Patch(ctx, "web", types.MergePatchType,
			[]byte(`{"spec":{"externalTrafficPolicy":"Local"}}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		framework.Eventually(t, 60*time.Second, "every connection reaches n2", func() (bool, string) {
			hits := spread(t, vip, 20)
			return hits[b.name] == 20, fmt.Sprint(hits)
		})
		if _, err := cluster.Admin.CoreV1().Services("default").Patch(ctx, "web", types.MergePatchType,
			[]byte(`{"spec":{"externalTrafficPolicy":"Cluster"}}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}

		// A node whose kube-proxy stops answering its health check is no
		// next hop within seconds, long before its Node would turn
		// NotReady; it is one again once it answers.
		c := net1.nodes[2]
		c.stopHealthz()
		stopped := time.Now()
		framework.Eventually(t, 60*time.Second, "the router has the VIP via n1 and n2 only", func() (bool, string) {
			out, _ := net1.frr.Routes("-4")
			r := routeLines(out, vip)
			return strings.Count(r, "nexthop via") == 2 && !strings.Contains(r, c.ip), out
		})
		withdrawn := time.Since(stopped)
		t.Logf("n3's health check stopped answering: the router's route to the VIP left it after %v", withdrawn.Round(10*time.Millisecond))
		if withdrawn > 3*time.Second {
			t.Errorf("n3 left the router's route %v after its health check stopped answering, want within 3 s", withdrawn)
		}
		if err := c.startHealthz(); err != nil {
			t.Fatal(err)
		}
		framework.Eventually(t, 30*time.Second, "the router has the VIP via all three nodes again", func() (bool, string) {
			out, _ := net1.frr.Routes("-4")
			return strings.Count(routeLines(out, vip), "nexthop via") == 3, out
		})

		// A NotReady node and a deleted one stop being next hops; the VIP
		// keeps answering.
		setReady(t, "n1", false)
		if err := cluster.Admin.CoreV1().Nodes().Delete(ctx, "n3", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		framework.Eventually(t, 60*time.Second, "only n2 is left as next hop", func() (bool, string) {
			hits := spread(t, vip, 20)
			return hits[b.name] == 20, fmt.Sprint(hits)
		})
		out, _ := net1.frr.Routes("-4")
		t.Logf("router's kernel routes after n1 went NotReady and n3 was deleted:\n%s", out)
	})

	t.Run("gobgpd accepts the same announcements", func(t *testing.T) {
		framework.Eventually(t, 30*time.Second, "gobgpd has the pod routes", func() (bool, string) {
			rib, err := net1.gobgpd.RIB("ipv4")
			return err == nil && len(rib[a.podNet]) == 1 && rib[a.podNet][0] == a.ip, fmt.Sprint(rib, err)
		})
	})

	t.Run("failover to a replica on another host", func(t *testing.T) {
		// Replicas run on different control-plane hosts, so the router
		// sees the next leader as another neighbour. Every replica
		// announces, so it has the standby's paths before anything fails;
		// when the leader dies, the changes made meanwhile (a deleted
		// Service, a node gone NotReady) must reach the router's table
		// within the restart time it keeps the dead replica's paths, and
		// no route that stays may be deleted on the way.
		c := net1.nodes[2]
		setReady(t, a.name, true)
		if err := framework.RegisterNode(ctx, cluster.Admin, c.name, "", true, []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: c.ip}}); err != nil {
			t.Fatal(err)
		}
		patch, _ := json.Marshal(map[string]any{"spec": map[string]any{"podCIDR": c.podNet, "podCIDRs": []string{c.podNet}}})
		if _, err := cluster.Admin.CoreV1().Nodes().Patch(ctx, c.name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		vip := waitIngress(t, "default", "web")
		framework.CreateLBService(t, cluster.Admin, "default", "doomed", nil)
		doomedVIP := waitIngress(t, "default", "doomed")
		standbyHost := net1.hosts[1]
		standby := startCCMOn(t, "ccm-b", standbyHost)
		for _, p := range []string{vip, doomedVIP} {
			framework.Eventually(t, 60*time.Second, "the router has "+p+" from both replicas, via the three nodes", func() (bool, string) {
				out, _ := net1.frr.Vtysh("show bgp ipv4 unicast " + p + "/32")
				routes, _ := net1.frr.Routes("-4")
				return strings.Contains(out, "from "+ccmIP) && strings.Contains(out, "from "+standbyHost.ip) &&
					strings.Count(routeLines(routes, p), "nexthop via") == 3, out + routes
			})
		}
		monitor := monitorRoutes(t)
		defer monitor.Stop()

		probe := startProbes(a, b, vip)
		time.Sleep(time.Second)
		leader.Kill()
		killed := time.Now()
		if err := cluster.Admin.CoreV1().Services("default").Delete(ctx, "doomed", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		setReady(t, c.name, false)
		// The desired table: the VIP via n1 and n2, no doomed VIP, every
		// pod route.
		var converged time.Duration
		framework.Eventually(t, restartTime+45*time.Second, "the router's table is the desired state", func() (bool, string) {
			out, _ := net1.frr.Routes("-4")
			web := routeLines(out, vip)
			ok := strings.Count(web, "nexthop via") == 2 && !strings.Contains(web, c.ip+" ") && routeLines(out, doomedVIP) == ""
			for _, n := range net1.nodes {
				ok = ok && routeLines(out, n.podNet) != ""
			}
			if ok {
				converged = time.Since(killed)
			}
			return ok, out
		})
		// FRR 8.4 removes only one stale path per prefix when the restart
		// time ends (FRR issue #17372); the others stay in its BGP table,
		// though not in its kernel here. Said, not asserted: the router's.
		if stale, err := stalePaths(ccmIP); err == nil && len(stale) > 0 {
			t.Logf("stale paths of the dead leader left in FRR's BGP table after its restart time: %v", stale)
		}
		framework.WaitLeader(t, standby)
		leading, leadingHost = standby, standbyHost
		time.Sleep(2 * time.Second)
		probes, failures, longest, firstErr := probe.end()
		monitor.Stop()
		deleted := deletions(monitor.Logs(), "", []string{vip + "/32", a.podNet, b.podNet, c.podNet})
		fmt.Printf("failover to another host: the router's table was the desired state %s after the leader was killed (restart time %s); %d probes, %d failed\n",
			converged.Round(100*time.Millisecond), restartTime, probes, failures)
		t.Logf("failover: desired state at the router after %s; %d probes, %d failed, longest gap %s; route changes:\n%s",
			converged.Round(100*time.Millisecond), probes, failures, longest, monitor.Logs())
		if converged > restartTime+5*time.Second {
			t.Errorf("the router reached the desired state %s after the leader died; the bound is its restart time, %s", converged, restartTime)
		}
		if failures > 0 {
			t.Errorf("forwarding stopped during the failover: %d of %d probes failed, longest gap %s; first: %v", failures, probes, longest, firstErr)
		}
		if len(deleted) > 0 {
			t.Errorf("the router deleted routes that should have stayed:\n%s", strings.Join(deleted, "\n"))
		}
	})

	t.Run("restarts withdraw nothing at the router", func(t *testing.T) {
		// The router is a strict graceful-restart helper (FRR): it keeps a
		// restarting speaker's paths only if the new session says it kept
		// forwarding (RFC 4724's F bit), and otherwise deletes them the
		// moment the session is back. Every route change in its kernel is
		// recorded while the leader is killed, replaced, and later stopped
		// cleanly and replaced again.
		vip := waitIngress(t, "default", "web")
		watched := []string{vip, a.podNet, b.podNet}
		for _, p := range watched {
			framework.Eventually(t, 60*time.Second, "the router has "+p, func() (bool, string) {
				out, _ := net1.frr.Routes("-4")
				return routeLines(out, p) != "", out
			})
		}
		monitor := monitorRoutes(t)
		defer monitor.Stop()
		bgpdFrom := logZebraUpdates(t)
		established := func(p *framework.Process) {
			t.Helper()
			framework.WaitLeader(t, p)
			framework.Eventually(t, 60*time.Second, p.Name+" has its session", func() (bool, string) {
				return p.LogContains("BGP session state changed", "peer=\""+routerIP+"\"", "established"), "no session yet"
			})
			time.Sleep(5 * time.Second) // past its End-of-RIB and the router's route selection
		}
		// The only replica restarts on its host: nothing else announces.
		leading.Kill()
		restarted := startCCMOn(top, "ccm-c", leadingHost)
		established(restarted)
		// What a strict helper decides by: the restarted speaker's OPEN says
		// Restart State and, for IPv4 unicast, Forwarding State.
		out, err := net1.frr.Vtysh("show bgp ipv4 neighbors " + leadingHost.ip + " graceful-restart json")
		if err != nil {
			if out, err = net1.frr.Vtysh("show bgp neighbors " + leadingHost.ip + " json"); err != nil {
				t.Fatal(err)
			}
		}
		if bits := grBits(out); bits["rBit"] != "true" || bits["fBit"] != "true" {
			t.Errorf("the router saw R bit %q and F bit %q from the restarted speaker, want both true:\n%s", bits["rBit"], bits["fBit"], out)
		}
		restarted.Stop()
		again := startCCMOn(top, "ccm-d", leadingHost)
		established(again)
		monitor.Stop()

		deleted := deletions(monitor.Logs(), net1.frr.BgpdLogs()[bgpdFrom:], []string{vip + "/32", a.podNet, b.podNet})
		t.Logf("route changes at the router over a kill -9 and a clean stop:\n%s", monitor.Logs())
		if len(deleted) > 0 {
			t.Errorf("the router deleted routes that should have stayed:\n%s", strings.Join(deleted, "\n"))
		}
		for _, p := range watched {
			if out, _ := net1.frr.Routes("-4"); routeLines(out, p) == "" {
				t.Errorf("the router has no route for %s at the end:\n%s", p, out)
			}
		}
	})
}

// logZebraUpdates makes bgpd log what it tells zebra, and returns where
// its log is now. The kernel may not see a route that bgpd deletes and
// installs again a few milliseconds later (zebra batches its work), so
// bgpd's own record counts too.
func logZebraUpdates(t *testing.T) int {
	t.Helper()
	if out, err := net1.frr.Vtysh("configure terminal", "log stdout debugging", "end", "debug bgp zebra"); err != nil {
		t.Fatal(err, out)
	}
	if out, _ := net1.frr.Vtysh("show debugging"); !strings.Contains(out, "BGP zebra debugging is on") {
		t.Fatalf("bgpd does not log what it gives zebra:\n%s", out)
	}
	return len(net1.frr.BgpdLogs())
}

// monitorRoutes records every change of the router's kernel routes.
func monitorRoutes(t *testing.T) *framework.Process { return framework.MonitorRoutes(t, net1.router) }

// deletions are the router's kernel route deletions of prefixes and the
// lines of bgpd's zebra debug log that tell zebra to delete one.
func deletions(monitorLog, bgpdLog string, prefixes []string) []string {
	return framework.RouteDeletions(monitorLog, bgpdLog, prefixes)
}

// probes connects pod to pod (a to b) and to the VIP every 100 ms.
type probes struct {
	stop     chan struct{}
	done     chan struct{}
	probes   int
	failures int
	longest  time.Duration
	firstErr string
}

func startProbes(a, b *node, vip string) *probes {
	p := &probes{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		var downSince time.Time
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-p.stop:
				return
			case <-tick.C:
			}
			p.probes++
			_, errPod := ask(a.ns, a.podIP, b.podIP+":8080")
			_, errVIP := ask(net1.client, "", vip+":80")
			if errPod == nil && errVIP == nil {
				downSince = time.Time{}
				continue
			}
			if p.firstErr == "" {
				p.firstErr = fmt.Sprintf("pod: %v; VIP: %v", errPod, errVIP)
			}
			p.failures++
			if downSince.IsZero() {
				downSince = time.Now()
			}
			p.longest = max(p.longest, time.Since(downSince))
		}
	}()
	return p
}

// end stops the probes and returns what they saw.
func (p *probes) end() (probes, failures int, longest time.Duration, firstErr string) {
	close(p.stop)
	<-p.done
	return p.probes, p.failures, p.longest, p.firstErr
}

// grBits finds FRR's "rBit" and "fBit" (the first, IPv4 unicast's) in the
// JSON of `show bgp neighbors X graceful-restart json`.
func grBits(out string) map[string]string {
	var doc any
	bits := map[string]string{}
	if json.Unmarshal([]byte(out), &doc) != nil {
		return bits
	}
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for _, k := range slices.Sorted(maps.Keys(v)) {
				if (k == "rBit" || k == "fBit") && bits[k] == "" {
					bits[k] = fmt.Sprint(v[k])
				}
				walk(v[k])
			}
		case []any:
			for _, e := range v {
				walk(e)
			}
		}
	}
	walk(doc)
	return bits
}

func hasErrors(hits map[string]int) bool {
	for k := range hits {
		if strings.HasPrefix(k, "error") {
			return true
		}
	}
	return false
}

// routeLines returns the lines of `ip route` output about prefix.
func routeLines(out, prefix string) string {
	var b strings.Builder
	in := false
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, prefix+" ") {
			in = true
		} else if !strings.HasPrefix(line, "\t") && !strings.HasPrefix(line, " ") {
			in = false
		}
		if in {
			b.WriteString(line + "\n")
		}
	}
	return b.String()
}

func waitIngress(t *testing.T, ns, name string) string {
	t.Helper()
	return framework.WaitIngress(t, cluster.Admin, ns, name, 1)[0]
}
