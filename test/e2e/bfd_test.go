package e2e

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/ipv4"
	v1 "k8s.io/api/core/v1"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/test/framework"
)

// TestBFD runs the FRR recipe of docs/network/routers.md with the page's
// BFD lines, and two CCM replicas on two control-plane hosts, each with
// its own address. One host's link is cut (its port goes dark; the
// router's own interface stays up) and, while its session would still be
// held, a node dies.
//
// Without BFD the router keeps the silent replica's last table until the
// hold time: the dead node stays a next hop although the live replica
// withdrew it. With BFD the router ends the silent replica's session
// within its detection time, the dead node leaves every route once the
// live replica's health checks fail it, and no VIP's route is ever deleted:
// the live replica carries every VIP.
func TestBFD(t *testing.T) {
	const namespace, serviceCount = "bfd", 4
	l := newLab(t, "bf")
	router := l.router("router", recipeRouter4+"/24")
	cps := []*host{{ip: "10.0.0.10"}, {ip: "10.0.0.11"}}
	for i, h := range cps {
		h.ns = l.host(router, fmt.Sprintf("cp%d", i+1), "", h.ip+"/24")
	}
	nodesNS := l.host(router, "nodes", "")
	var nodes []*node
	for i := 1; i <= 4; i++ {
		n := &node{name: fmt.Sprintf("bf-n%d", i), ip: fmt.Sprintf("10.0.0.%d", 40+i), ns: nodesNS}
		l.addrs(nodesNS, "eth0", n.ip+"/24")
		if err := n.startHealthz(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(n.stopHealthz)
		framework.CreateNode(t, cluster.Admin, n.name, "", true, []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: n.ip}})
		nodes = append(nodes, n)
	}
	framework.CreateNamespace(t, cluster.Admin, namespace)
	for i := 1; i <= serviceCount; i++ {
		framework.CreateLBService(t, cluster.Admin, namespace, fmt.Sprintf("bf-%d", i), nil)
	}

	// The page's router with its BFD line, under `router bgp`.
	recipe, err := framework.MarkdownBlock(recipesPage, "FRR", "frr")
	if err != nil {
		t.Fatal(err)
	}
	bfdLines, err := framework.MarkdownBlock(recipesPage, "BFD", "frr")
	if err != nil {
		t.Fatal(err)
	}
	const after = " neighbor CCM remote-as 64512\n"
	if !strings.Contains(recipe.Text, after) {
		t.Fatalf("the FRR recipe has no line %q to add BFD after", after)
	}
	frr := l.frr(router, strings.Replace(recipe.Text, after, after+bfdLines.Text, 1))

	// The replicas first run the page's config without BFD, then with it.
	routers, err := framework.MarkdownBlock(recipesPage, "Routers", "yaml")
	if err != nil {
		t.Fatal(err)
	}
	withBFD, err := framework.MarkdownBlock(recipesPage, "BFD", "yaml")
	if err != nil {
		t.Fatal(err)
	}
	var inventory strings.Builder
	inventory.WriteString("inventory:\n  machines:\n")
	for _, n := range nodes {
		fmt.Fprintf(&inventory, "  - name: %s\n    addresses: [{type: InternalIP, address: %s}]\n", n.name, n.ip)
	}
	plain := routers.Text + inventory.String()
	bgpAt := strings.Index(routers.Text, "bgp:\n")
	if bgpAt < 0 {
		t.Fatal("the Routers config has no bgp section")
	}
	bfdConfig := routers.Text[:bgpAt] + withBFD.Text + inventory.String()
	cfgFile := filepath.Join(t.TempDir(), "cloud.yaml")
	write := func(text string) {
		t.Helper()
		tmp := cfgFile + ".new"
		if err := os.WriteFile(tmp, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, cfgFile); err != nil {
			t.Fatal(err)
		}
	}
	write(plain)
	var replicas []*framework.Process
	for i, h := range cps {
		replicas = append(replicas, framework.StartReplica(t, framework.CCM{
			Binary: ccmBinary, Name: fmt.Sprintf("ccm-cp%d", i+1), Kubeconfig: l.kubeconfig(h.ns), CloudConfig: cfgFile, Netns: h.ns.Name,
			Env: []string{"POD_IP=" + h.ip},
		}))
	}
	var vips []string
	for i := 1; i <= serviceCount; i++ {
		vips = append(vips, framework.WaitIngress(t, cluster.Admin, namespace, fmt.Sprintf("bf-%d", i), 1)[0])
	}

	// via is each VIP's next hops in the router's kernel table.
	via := func() map[string][]string {
		out, _ := router.IP("-4", "route")
		table := map[string][]string{}
		for _, vip := range vips {
			table[vip] = vias(routeLines(out, vip))
		}
		return table
	}
	everyVIPVia := func(what string, within time.Duration, want []*node) {
		t.Helper()
		var ips []string
		for _, n := range want {
			ips = append(ips, n.ip)
		}
		slices.Sort(ips)
		framework.Eventually(t, within, what, func() (bool, string) {
			for vip, hops := range via() {
				if !slices.Equal(sorted(hops), ips) {
					return false, fmt.Sprintf("the router routes %s via %v, want %v", vip, hops, ips)
				}
			}
			return true, ""
		})
	}
	established := func(peer string) bool {
		out, _ := frr.Vtysh("show bgp neighbors " + peer + " json")
		var n map[string]struct {
			BGPState string `json:"bgpState"`
		}
		json.Unmarshal([]byte(out), &n)
		return n[peer].BGPState == "Established"
	}
	bothEstablished := func(what string) {
		t.Helper()
		framework.Eventually(t, 90*time.Second, what, func() (bool, string) {
			for _, h := range cps {
				if !established(h.ip) {
					s, _ := frr.Vtysh("show bgp summary")
					return false, fmt.Sprintf("no session with %s\n%s", h.ip, s)
				}
			}
			return true, ""
		})
	}
	cut := func(h *host, down bool) {
		t.Helper()
		state := map[bool]string{true: "down", false: "up"}[down]
		l.ip(h.ns, "link", "set", "eth0", state)
	}
	bothEstablished("both replicas' sessions")
	everyVIPVia("every VIP via every node", 90*time.Second, nodes)

	// Without BFD: cp1 goes silent, then n1 dies. cp2 withdraws n1; cp1's
	// session is held and so is its path via n1.
	cut(cps[0], true)
	nodes[0].stopHealthz()
	time.Sleep(8 * time.Second)
	stale := 0
	for vip, hops := range via() {
		if slices.Contains(hops, nodes[0].ip) {
			stale++
		} else {
			t.Logf("without BFD: %s is already routed around the dead node: %v", vip, hops)
		}
	}
	t.Logf("without BFD, 8 s after cp1 went silent and n1 died: %d of %d VIPs still routed via n1 (cp1's session held: %v)", stale, len(vips), established(cps[0].ip))
	if stale == 0 {
		t.Errorf("without BFD the router dropped the silent replica's paths within 8 s: the case BFD is for did not happen, so the test below proves nothing")
	}
	cut(cps[0], false)
	if err := nodes[0].startHealthz(); err != nil {
		t.Fatal(err)
	}
	bothEstablished("cp1's session back")
	everyVIPVia("every VIP via every node again", 90*time.Second, nodes)

	// With BFD, as the page gives it.
	write(bfdConfig)
	framework.Eventually(t, 60*time.Second, "the router's BFD sessions with both replicas up", func() (bool, string) {
		up, out := frr.BFDUp()
		return up == len(cps), out
	})
	bothEstablished("both sessions after the reload to BFD")

	// A host on the router's link forges the router's Down naming no
	// session (Your Discriminator 0, TTL 255, the router's address), to
	// every replica every 10 ms for 5 s: no session may end, and no VIP
	// route may change.
	spoofMonitor := framework.MonitorRoutes(t, router)
	var logFrom []int
	for _, r := range replicas {
		logFrom = append(logFrom, r.LogSize())
	}
	forged := []byte{0x20, 1 << 6, 3, 24, 0, 0, 0x5e, 0xed, 0, 0, 0, 0, 0, 0, 0x27, 0x10, 0, 0, 0x27, 0x10, 0, 0, 0, 0}
	var spoofers []*net.UDPConn
	if err := router.Do(func() error {
		for _, h := range cps {
			c, err := net.DialUDP("udp4", &net.UDPAddr{IP: net.ParseIP(recipeRouter4)}, &net.UDPAddr{IP: net.ParseIP(h.ip), Port: 3784})
			if err != nil {
				return err
			}
			if err := ipv4.NewConn(c).SetTTL(255); err != nil {
				return err
			}
			spoofers = append(spoofers, c)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		for _, c := range spoofers {
			c.Write(forged)
		}
	}
	for _, c := range spoofers {
		c.Close()
	}
	time.Sleep(time.Second)
	if gone := deletions(spoofMonitor.Logs(), "", vips); len(gone) > 0 {
		t.Errorf("forged BFD packets naming no session deleted VIP routes at the router:\n%s", strings.Join(gone, "\n"))
	}
	for i, r := range replicas {
		for _, line := range strings.Split(r.Logs()[logFrom[i]:], "\n") {
			if strings.Contains(line, "BFD session changed") {
				t.Errorf("forged BFD packets changed replica cp%d's session: %s", i+1, line)
			}
		}
		if !established(cps[i].ip) {
			t.Errorf("the router's session with cp%d ended under forged BFD packets", i+1)
		}
	}

	monitor := framework.MonitorRoutes(t, router)
	cut(cps[0], true)
	silent := time.Now()
	nodes[1].stopHealthz()
	var dropped time.Duration
	for time.Since(silent) < 30*time.Second {
		if !established(cps[0].ip) {
			dropped = time.Since(silent)
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	live := slices.DeleteFunc(slices.Clone(nodes), func(n *node) bool { return n == nodes[1] })
	everyVIPVia("every VIP via the live nodes only", 30*time.Second, live)
	routedAround := time.Since(silent)
	t.Logf("with BFD: the router ended the silent replica's session %s after its link was cut; every VIP was routed around the dead node %s after it died",
		dropped.Round(10*time.Millisecond), routedAround.Round(100*time.Millisecond))
	if dropped == 0 || dropped > 2*time.Second {
		t.Errorf("the router ended the silent replica's session after %s, want within about a second (BFD, 300ms × 3)", dropped)
	}
	if gone := deletions(monitor.Logs(), "", vips); len(gone) > 0 {
		t.Errorf("VIP routes were deleted at the router while one replica was silent:\n%s", strings.Join(gone, "\n"))
	}
	if !replicas[1].LogContains("BFD session changed", "Up") {
		t.Errorf("the live replica logged no BFD session Up")
	}

	// cp1's link back: its BFD and BGP sessions come up again.
	cut(cps[0], false)
	if err := nodes[1].startHealthz(); err != nil {
		t.Fatal(err)
	}
	bothEstablished("cp1's session back after BFD ended it")
	everyVIPVia("every VIP via every node, cp1 back", 90*time.Second, nodes)

	// The alert on BFD: Prometheus scrapes both replicas with the shipped
	// rules; inactive while BFD is up. The router then drops BFD for the
	// neighbours (AdminDown): that is configuration, not a failure, so no
	// BGP session is reset, and the alert goes pending (BFD down under an
	// established session: a host failure would wait for the hold time).
	var targets []string
	for i, r := range replicas {
		addr, err := cps[i].ns.ForwardOutOf(r.SecurePort)
		if err != nil {
			t.Fatal(err)
		}
		targets = append(targets, addr)
	}
	prom := framework.StartPrometheus(t, cluster, targets, filepath.Join(framework.RepoRoot(), framework.AlertsFile))
	port, _ := strconv.Atoi(targets[0][strings.LastIndex(targets[0], ":")+1:])
	metrics, err := cluster.AdminGet(&framework.Process{Name: replicas[0].Name, SecurePort: port}, "/metrics", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	exported := framework.ExportedNames(string(metrics))
	bfdAlert := func() framework.AlertRule {
		for _, r := range prom.Rules(t) {
			if r.Name == "BaremetalBFDSessionDown" {
				return r
			}
		}
		t.Fatal("Prometheus has no alert BaremetalBFDSessionDown")
		return framework.AlertRule{}
	}
	rule := bfdAlert()
	for _, name := range framework.MetricNames(rule.Query) {
		if !exported[name] {
			t.Errorf("alert %s: %s is not a metric the CCM exports (%s)", rule.Name, name, rule.Query)
		}
	}
	if rule.Health != "ok" || rule.State != "inactive" {
		t.Errorf("alert %s: %s, %s %s; want ok and inactive while BFD is up", rule.Name, rule.State, rule.Health, rule.LastError)
	}
	resets := func() int { return strings.Count(replicas[0].Logs()+replicas[1].Logs(), "BFD session down:") }
	before := resets()
	if out, err := frr.Vtysh("configure terminal", "router bgp 64500", "no"+strings.TrimRight(bfdLines.Text, "\n"), "end"); err != nil {
		t.Fatal(err, out)
	}
	framework.Eventually(t, 60*time.Second, "BaremetalBFDSessionDown pending once the router dropped BFD", func() (bool, string) {
		r := bfdAlert()
		return r.State == "pending", r.State
	})
	if n := resets() - before; n > 0 {
		t.Errorf("the replicas reset %d BGP sessions when the router deconfigured BFD", n)
	}
	for _, h := range cps {
		if !established(h.ip) {
			t.Errorf("the session with %s ended when the router deconfigured BFD", h.ip)
		}
	}
	if out, err := frr.Vtysh("configure terminal", "router bgp 64500", strings.TrimRight(bfdLines.Text, "\n"), "end"); err != nil {
		t.Fatal(err, out)
	}
	framework.Eventually(t, 60*time.Second, "BFD up again and the alert inactive", func() (bool, string) {
		r := bfdAlert()
		return r.State == "inactive", r.State
	})

	// pathsFrom counts the paths the router holds from a replica, and the
	// stale ones among them.
	pathsFrom := func(peer string) (paths, stale int) {
		for _, vip := range vips {
			held, _, _ := frr.Paths(vip)
			for _, p := range held {
				if p.Peer.PeerID == peer {
					paths++
					if p.Stale {
						stale++
					}
				}
			}
		}
		return paths, stale
	}

	// A replica stopped (a rolling update) is not a failure: it ends its
	// session gracefully and tells BFD AdminDown, and the router keeps its
	// paths as stale for the restart time, as it would without BFD.
	replicas[1].Stop()
	if !replicas[1].LogContains("Stopped") {
		t.Errorf("cp2 did not say it stopped gracefully on SIGTERM")
	}
	out, _ := frr.Vtysh("show bfd peer " + cps[1].ip + " json")
	var peer struct {
		Status     string `json:"status"`
		RemoteDiag string `json:"remote-diagnostic"`
	}
	json.Unmarshal([]byte(out), &peer)
	if peer.Status != "down" || !strings.Contains(peer.RemoteDiag, "administratively") {
		t.Errorf("the router's BFD session with cp2 after its SIGTERM: %s, told %q; want down, told administratively down (AdminDown)", peer.Status, peer.RemoteDiag)
	}
	time.Sleep(3 * time.Second)
	paths, stale := pathsFrom(cps[1].ip)
	t.Logf("3 s after cp2 was stopped: the router holds %d of its paths, %d stale", paths, stale)
	if paths == 0 || stale != paths {
		t.Errorf("3 s after cp2 was stopped the router holds %d of its paths (%d stale), want every one kept as stale (graceful restart)", paths, stale)
	}

	// A replica killed (kill -9) on a live host is a restart to the
	// router: its kernel closes the session's connection before BFD's
	// detection time, and the router keeps its paths as stale for the
	// restart time, BFD or not (docs/concepts.md, failover and restarts).
	replicas[0].Kill()
	time.Sleep(3 * time.Second)
	paths, stale = pathsFrom(cps[0].ip)
	t.Logf("3 s after cp1 was killed: the router holds %d of its paths, %d stale", paths, stale)
	if paths == 0 || stale != paths {
		t.Errorf("3 s after cp1 was killed the router holds %d of its paths (%d stale), want every one kept as stale", paths, stale)
	}
}
