package e2e

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/test/framework"
)

// TestNextHopsPerRouter runs the FRR recipe of docs/network/routers.md with
// a router that installs 4 paths per prefix (`maximum-paths 4`) and the
// CCM's peer set to match, on 12 nodes with 60 Services of
// externalTrafficPolicy Cluster. A router offered more paths than it
// installs picks the same few for every VIP (the first it received, then
// the lowest addresses); sent 4 chosen per VIP, it installs those.
//
// What a user sees is the router's kernel table: each VIP via 4 nodes,
// every node carrying VIPs, and a node's death changing only the routes of
// the VIPs it carried.
func TestNextHopsPerRouter(t *testing.T) {
	const (
		nodeCount, serviceCount, width = 12, 60, 4
		namespace                      = "paths"
	)
	site := newWideSite(t, "mp", namespace, nodeCount, serviceCount, width, "")
	router, frr, nodes, vips, cfg, cfgFile, replica, ccm := site.router, site.frr, site.nodes, site.vips, site.config, site.configFile, site.replica, site.ccm

	// carried waits until the router's kernel has every VIP via width of
	// the nodes, none of them dead, and returns each VIP's next hops.
	carried := func(what string, dead string) map[string][]string {
		t.Helper()
		var table map[string][]string
		framework.Eventually(t, 90*time.Second, what, func() (bool, string) {
			out, _ := router.IP("-4", "route")
			table = map[string][]string{}
			for _, vip := range vips {
				hops := vias(routeLines(out, vip))
				if len(hops) != width || slices.Contains(hops, dead) {
					rib, _ := frr.Vtysh("show bgp ipv4 unicast " + vip)
					return false, fmt.Sprintf("the router routes %s via %v, want %d next hops (none %q)\n%s", vip, hops, width, dead, framework.Tail(rib, 30))
				}
				table[vip] = hops
			}
			return true, ""
		})
		return table
	}
	spread := func(what string, table map[string][]string, among []*node) {
		t.Helper()
		perNode := map[string]int{}
		for _, hops := range table {
			for _, h := range hops {
				perNode[h]++
			}
		}
		least, most := len(vips), 0
		var line strings.Builder
		for _, n := range among {
			c := perNode[n.ip]
			least, most = min(least, c), max(most, c)
			fmt.Fprintf(&line, " %s:%d", n.name, c)
		}
		t.Logf("%s: VIPs per node in the router's kernel table:%s; max/min %d/%d", what, line.String(), most, least)
		if least == 0 {
			t.Errorf("%s: a node carries no VIP while others carry up to %d:%s", what, most, line.String())
		}
	}

	monitor := framework.MonitorRoutes(t, router)
	before := carried("every VIP via 4 nodes", "")
	spread("12 nodes", before, nodes)

	// Every node's health check fails at once (as when the replica is
	// starved or cut off): the last good next hops are held. Then one node
	// answers again, and at once the others: nothing is withdrawn, as the
	// others' failures were counted while all were held. (They were
	// withdrawn on them, every VIP left via the one node, until the others
	// passed twice.)
	from := monitor.LogSize()
	for _, n := range nodes {
		n.stopHealthz()
	}
	framework.Eventually(t, 30*time.Second, "the replica holds the next hops as every node fails", func() (bool, string) {
		return ccm.LogContains("Every node fails its health checks at once"), "no hold logged"
	})
	time.Sleep(time.Second) // more failures counted during the hold
	if err := nodes[0].startHealthz(); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 30*time.Second, "the hold let go as a node passes", func() (bool, string) {
		return ccm.LogContains("Health checks pass again on some node"), "no release logged"
	})
	for _, n := range nodes[1:] {
		if err := n.startHealthz(); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(3 * time.Second) // rounds enough to see the others pass twice
	for _, ch := range vipRouteChanges(monitor.Logs()[from:], vips) {
		t.Errorf("a VIP's route changed while the health checks' hold was let go: %q", ch.line)
	}
	if held := carried("every VIP still via its 4 nodes", ""); !maps.EqualFunc(held, before, slices.Equal) {
		t.Errorf("after the hold the router routes the VIPs %v, want %v", held, before)
	}

	// A node dies (its health checks fail): the VIPs it carried each swap it
	// for one other node; no other VIP's route changes at all.
	dead := nodes[4]
	from = monitor.LogSize()
	dead.stopHealthz()
	after := carried(dead.name+" dead: every VIP via 4 live nodes", dead.ip)
	spread(dead.name+" dead", after, slices.DeleteFunc(slices.Clone(nodes), func(n *node) bool { return n == dead }))
	moved := 0
	for _, vip := range vips {
		was, is := before[vip], after[vip]
		if !slices.Contains(was, dead.ip) {
			if !slices.Equal(was, is) {
				t.Errorf("%s did not carry %s, yet its route changed from %v to %v", dead.name, vip, was, is)
			}
			continue
		}
		moved++
		kept := slices.DeleteFunc(slices.Clone(was), func(h string) bool { return h == dead.ip })
		for _, h := range kept {
			if !slices.Contains(is, h) {
				t.Errorf("%s: %s carried it with %v, yet %s left its route: now %v", vip, dead.name, was, h, is)
			}
		}
	}
	// Nor did any such route change on the way.
	for _, ch := range vipRouteChanges(monitor.Logs()[from:], vips) {
		if !slices.Contains(before[ch.vip], dead.ip) {
			t.Errorf("the route of %s, which %s did not carry, changed: %q", ch.vip, dead.name, ch.line)
		}
	}
	t.Logf("%s carried %d of %d VIPs; only their routes changed", dead.name, moved, len(vips))

	// The peer's maximumPaths lowered at a reload: the new selection takes
	// over the old one's speaker, so the session stays and each VIP loses
	// one of its 4 next hops by a withdrawal; no VIP's route is deleted on
	// the way. (A new speaker for it, with a new session, left FRR with a
	// stale fourth path per VIP in use long after the End-of-RIB.)
	from = monitor.LogSize()
	lowered := strings.Replace(cfg, fmt.Sprintf("maximumPaths: %d", width), "maximumPaths: 3", 1)
	if lowered == cfg {
		t.Fatal("the page's config sets no maximumPaths")
	}
	if err := os.WriteFile(cfgFile, []byte(lowered), 0o644); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 90*time.Second, "every VIP via 3 of the nodes it had", func() (bool, string) {
		out, _ := router.IP("-4", "route")
		for _, vip := range vips {
			hops := vias(routeLines(out, vip))
			if len(hops) != 3 {
				rib, _ := frr.Vtysh("show bgp ipv4 unicast " + vip)
				return false, fmt.Sprintf("%s via %v, want 3 next hops\n%s", vip, hops, rib)
			}
			for _, h := range hops {
				if !slices.Contains(after[vip], h) {
					return false, fmt.Sprintf("%s via %v, want 3 of %v", vip, hops, after[vip])
				}
			}
		}
		return true, ""
	})
	for _, line := range strings.Split(monitor.Logs()[from:], "\n") {
		if f := strings.Fields(line); len(f) > 1 && f[0] == "Deleted" && slices.Contains(vips, f[1]) {
			t.Errorf("the router deleted a VIP's route while the peer moved to another speaker: %q", line)
		}
	}
	// One session all along: the new table replaced the old path by path.
	if n := strings.Count(ccm.Logs(), `state="established"`); n != 1 {
		t.Errorf("the CCM's session was established %d times, want once: a reload of maximumPaths restarted it", n)
	}

	// Two more nodes die, one after the other, and then the replica
	// restarts (kill -9) on its host. Each VIP a dead node carried took
	// another node in its place under the same ADD-PATH identifier, so the
	// restarted speaker sends every path the router kept as stale again,
	// and the router ends with each VIP's 3 paths, none stale. (A dead
	// node's path withdrawn and another added under a new identifier left
	// FRR 8.4, which sweeps at most one stale path per prefix at the
	// End-of-RIB, paths via nodes no longer chosen, in use.)
	live := slices.DeleteFunc(slices.Clone(nodes), func(n *node) bool { return n == dead })
	for _, d := range []*node{nodes[7], nodes[9]} {
		d.stopHealthz()
		live = slices.DeleteFunc(live, func(n *node) bool { return n == d })
		framework.Eventually(t, 90*time.Second, d.name+" dead: every VIP via 3 live nodes", func() (bool, string) {
			out, _ := router.IP("-4", "route")
			for _, vip := range vips {
				hops := vias(routeLines(out, vip))
				if len(hops) != 3 || slices.Contains(hops, d.ip) {
					return false, fmt.Sprintf("%s via %v, want 3 next hops, none %s", vip, hops, d.ip)
				}
			}
			return true, ""
		})
	}
	ccm.Kill()
	replica.Name = "ccm-paths-restarted"
	restarted := framework.StartReplica(t, replica)
	framework.WaitLeader(t, restarted)
	framework.Eventually(t, 90*time.Second, "after the restart each VIP's 3 paths at the router, none stale", func() (bool, string) {
		if !restarted.LogContains("BGP session state changed", "established") {
			return false, "the restarted replica has no session yet"
		}
		for _, vip := range vips {
			paths, out, err := frr.Paths(vip + "/32")
			if err != nil {
				return false, err.Error()
			}
			stale := 0
			for _, p := range paths {
				if p.Stale {
					stale++
				}
				if !slices.ContainsFunc(live, func(n *node) bool { return n.ip == p.NextHop() }) {
					return false, fmt.Sprintf("%s has a path via a dead node:\n%s", vip, out)
				}
			}
			if len(paths) != 3 || stale > 0 {
				return false, fmt.Sprintf("%s: %d paths, %d stale, want 3 and none stale:\n%s", vip, len(paths), stale, out)
			}
		}
		return true, ""
	})
}

// routeChange is a line of `ip monitor route` output that adds, changes or
// deletes the route of a VIP.
type routeChange struct{ vip, line string }

// vipRouteChanges are the lines of monitorLog about the routes of vips.
func vipRouteChanges(monitorLog string, vips []string) []routeChange {
	var out []routeChange
	for _, line := range strings.Split(monitorLog, "\n") {
		if f := strings.Fields(strings.TrimPrefix(line, "Deleted ")); len(f) > 0 && slices.Contains(vips, f[0]) {
			out = append(out, routeChange{vip: f[0], line: line})
		}
	}
	return out
}

// TestMaximumLoadAtTheRouter is TestNextHopsPerRouter's site (the FRR
// recipe at 4 paths, 12 nodes, 60 Services) with the peer's maximumLoad
// 1: in the router's kernel table the busiest node carries at most 1.5
// times the VIPs of the least busy one (rendezvous alone: about 2×).
func TestMaximumLoadAtTheRouter(t *testing.T) {
	const nodeCount, serviceCount, width, namespace = 12, 60, 4, "load"
	site := newWideSite(t, "ml", namespace, nodeCount, serviceCount, width, "    maximumLoad: 1\n")
	router, nodes, vips := site.router, site.nodes, site.vips
	perNode := map[string]int{}
	framework.Eventually(t, 90*time.Second, "every VIP via 4 nodes", func() (bool, string) {
		out, _ := router.IP("-4", "route")
		clear(perNode)
		for _, vip := range vips {
			hops := vias(routeLines(out, vip))
			if len(hops) != width {
				return false, fmt.Sprintf("the router routes %s via %v, want %d next hops", vip, hops, width)
			}
			for _, h := range hops {
				perNode[h]++
			}
		}
		return true, ""
	})
	most, least := 0, len(vips)
	for _, n := range nodes {
		most, least = max(most, perNode[n.ip]), min(least, perNode[n.ip])
	}
	t.Logf("VIPs per node in the router's kernel table with maximumLoad 1: %v; max/min %d/%d", perNode, most, least)
	if least == 0 || float64(most) > 1.5*float64(least) {
		t.Errorf("the busiest node carries %d VIPs, the least busy %d: want at most 1.5×", most, least)
	}
}

// wideSite is the FRR recipe of docs/network/routers.md at width paths
// (the router's maximum-paths and the peer's maximumPaths), nodeCount
// nodes on one host (each with a health check of its own, so the router
// sees that many next hops), serviceCount Services in namespace, and one
// CCM replica.
type wideSite struct {
	router     *framework.Netns
	frr        *framework.FRR
	nodes      []*node
	vips       []string
	config     string // the CCM's cloud config, written to configFile
	configFile string
	replica    framework.CCM
	ccm        *framework.Process
}

// newWideSite builds it; peerExtra is more lines of the peer's config.
func newWideSite(t *testing.T, short, namespace string, nodeCount, serviceCount, width int, peerExtra string) *wideSite {
	t.Helper()
	l := newLab(t, short)
	s := &wideSite{router: l.router("router", recipeRouter4+"/24")}
	cp := l.host(s.router, "cp1", "", recipeCP4+"/24")
	s.nodes = l.nodesOnOneHost(s.router, short, nodeCount)
	framework.CreateNamespace(t, cluster.Admin, namespace)
	for i := 1; i <= serviceCount; i++ {
		framework.CreateLBService(t, cluster.Admin, namespace, fmt.Sprintf("%s-%02d", short, i), nil)
	}
	recipe, err := framework.MarkdownBlock(recipesPage, "FRR", "frr")
	if err != nil {
		t.Fatal(err)
	}
	s.frr = l.frr(s.router, strings.ReplaceAll(recipe.Text, "maximum-paths 16", fmt.Sprintf("maximum-paths %d", width)))
	bgp, err := framework.MarkdownBlock(recipesPage, "Routers", "yaml")
	if err != nil {
		t.Fatal(err)
	}
	const peerLine = "maximumPaths: 16   # the router's maximum-paths\n"
	if !strings.Contains(bgp.Text, peerLine) {
		t.Fatalf("the page's config has no %q", peerLine)
	}
	var cfg strings.Builder
	cfg.WriteString(strings.Replace(bgp.Text, peerLine, fmt.Sprintf("maximumPaths: %d\n%s", width, peerExtra), 1))
	cfg.WriteString("inventory:\n  machines:\n")
	for _, n := range s.nodes {
		fmt.Fprintf(&cfg, "  - name: %s\n    addresses: [{type: InternalIP, address: %s}]\n", n.name, n.ip)
	}
	s.config = cfg.String()
	s.configFile = filepath.Join(t.TempDir(), "cloud.yaml")
	if err := os.WriteFile(s.configFile, []byte(s.config), 0o644); err != nil {
		t.Fatal(err)
	}
	s.replica = framework.CCM{
		Binary: ccmBinary, Name: "ccm-" + short, Kubeconfig: l.kubeconfig(cp), CloudConfig: s.configFile, Netns: cp.Name,
		Env: []string{"POD_IP=" + recipeCP4},
	}
	s.ccm = framework.StartReplica(t, s.replica)
	framework.WaitLeader(t, s.ccm)
	for i := 1; i <= serviceCount; i++ {
		s.vips = append(s.vips, framework.WaitIngress(t, cluster.Admin, namespace, fmt.Sprintf("%s-%02d", short, i), 1)[0])
	}
	return s
}
