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

// TestReloadsNeverWithdrawARoutersPaths runs two routers of the FRR recipe
// of docs/network/routers.md on one subnet, each set to 4 paths, with one
// CCM replica peering with both: they share a selection, so one speaker
// sends both the same table. Three reloads follow, each of which a router
// must live through without its routes being deleted:
//
//   - the second router gets maximumPaths 2, a selection of its own: it is
//     handed over to a new speaker (its old one stops without a
//     NOTIFICATION, both routers restart gracefully with the paths they
//     have), which then withdraws two paths per VIP (sent the new table at
//     once, FRR 8.4 would keep one of them as stale, in use);
//   - its hold time changes: a new session, handed over the same way;
//   - it goes back to maximumPaths 4: its speaker takes the selection's
//     table, on the same session.
//
// What a user sees is each router's kernel table: every VIP's route there
// all along, the first router's never changing, the second's going to 2
// of its 4 next hops and back to 4, with no stale path left in its BGP
// table.
func TestReloadsNeverWithdrawARoutersPaths(t *testing.T) {
	const (
		nodeCount, serviceCount, width = 6, 10, 4
		namespace                      = "handover"
		second                         = secondRouter
	)
	site := newTwoRouters(t, "ho", nodeCount)
	r1, r2, cp, routers, frrs := site.r1, site.r2, site.cp, site.routers, site.frr
	framework.CreateNamespace(t, cluster.Admin, namespace)
	for i := 1; i <= serviceCount; i++ {
		framework.CreateLBService(t, cluster.Admin, namespace, fmt.Sprintf("ho-%02d", i), nil)
	}

	// The page's CCM config with both routers, each at 4 paths.
	bgp, err := framework.MarkdownBlock(recipesPage, "Routers", "yaml")
	if err != nil {
		t.Fatal(err)
	}
	const peerLine = "maximumPaths: 16   # the router's maximum-paths"
	if !strings.Contains(bgp.Text, peerLine) {
		t.Fatalf("the page's config has no %q", peerLine)
	}
	config := func(secondPeer string) string {
		var cfg strings.Builder
		cfg.WriteString(strings.Replace(bgp.Text, peerLine, fmt.Sprintf("maximumPaths: %d\n  - address: %s\n    asn: 64500\n%s", width, second, secondPeer), 1))
		cfg.WriteString(site.inventory())
		return cfg.String()
	}
	cfgFile := filepath.Join(t.TempDir(), "cloud.yaml")
	reload := func(secondPeer string) {
		t.Helper()
		if err := os.WriteFile(cfgFile, []byte(config(secondPeer)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	reload(fmt.Sprintf("    maximumPaths: %d\n", width))
	ccm := framework.StartReplica(t, framework.CCM{
		Binary: ccmBinary, Name: "ccm-handover", Kubeconfig: site.l.kubeconfig(cp), CloudConfig: cfgFile, Netns: cp.Name,
		Env: []string{"POD_IP=" + recipeCP4},
	})
	framework.WaitLeader(t, ccm)
	var vips []string
	for i := 1; i <= serviceCount; i++ {
		vips = append(vips, framework.WaitIngress(t, cluster.Admin, namespace, fmt.Sprintf("ho-%02d", i), 1)[0])
	}

	// table waits until the router's kernel has every VIP via n next hops
	// (each of within[vip], if given) and its BGP table n paths per VIP,
	// none stale; it returns the kernel's next hops.
	table := func(what string, router *framework.Netns, n int, within map[string][]string) map[string][]string {
		t.Helper()
		var got map[string][]string
		framework.Eventually(t, 90*time.Second, what, func() (bool, string) {
			out, _ := router.IP("-4", "route")
			got = map[string][]string{}
			for _, vip := range vips {
				hops := vias(routeLines(out, vip))
				if len(hops) != n {
					return false, fmt.Sprintf("%s routes %s via %v, want %d next hops", router.Name, vip, hops, n)
				}
				for _, h := range hops {
					if within != nil && !slices.Contains(within[vip], h) {
						return false, fmt.Sprintf("%s routes %s via %v, want %d of %v", router.Name, vip, hops, n, within[vip])
					}
				}
				got[vip] = hops
				paths, rib, err := frrs[router].Paths(vip + "/32")
				if err != nil {
					return false, err.Error()
				}
				stale := slices.ContainsFunc(paths, func(p framework.FRRPath) bool { return p.Stale })
				if len(paths) != n || stale {
					return false, fmt.Sprintf("%s has %d paths of %s (stale among them: %v), want %d and none stale:\n%s", router.Name, len(paths), vip, stale, n, rib)
				}
			}
			return true, ""
		})
		return got
	}
	established := func() int { return strings.Count(ccm.Logs(), `state="established"`) }

	before := map[*framework.Netns]map[string][]string{}
	for _, r := range routers {
		before[r] = table(r.Name+": every VIP via 4 nodes", r, width, nil)
	}
	if !maps.EqualFunc(before[r1], before[r2], slices.Equal) {
		t.Fatalf("the routers of one selection route the VIPs differently: %v and %v", before[r1], before[r2])
	}
	monitors := map[*framework.Netns]*framework.Process{}
	for _, r := range routers {
		monitors[r] = framework.MonitorRoutes(t, r)
	}
	// untouched checks that the reload deleted no VIP's route at either
	// router and changed none at the first.
	untouched := func(what string, from map[*framework.Netns]int) {
		t.Helper()
		for _, r := range routers {
			for _, ch := range vipRouteChanges(monitors[r].Logs()[from[r]:], vips) {
				if strings.HasPrefix(ch.line, "Deleted") || r == r1 {
					t.Errorf("%s: %s changed a VIP's route: %q", what, r.Name, ch.line)
				}
			}
		}
		if now := table(r1.Name+" after "+what, r1, width, nil); !maps.EqualFunc(now, before[r1], slices.Equal) {
			t.Errorf("%s: %s routes the VIPs %v, want as before: %v", what, r1.Name, now, before[r1])
		}
	}
	mark := func() map[*framework.Netns]int {
		return map[*framework.Netns]int{r1: monitors[r1].LogSize(), r2: monitors[r2].LogSize()}
	}

	// The second router gets a selection of its own.
	from, sessions := mark(), established()
	reload("    maximumPaths: 2\n")
	split := table(r2.Name+": every VIP via 2 of its 4 nodes", r2, 2, before[r2])
	untouched("the second router's selection of its own", from)
	if !ccm.LogContains("BGP routers handed over to a new speaker", second) {
		t.Errorf("no hand-over of %s logged", second)
	}
	t.Logf("maximumPaths 2 at the second router: sessions established %d times since", established()-sessions)

	// Its hold time changes: a new session.
	from, sessions = mark(), established()
	reload("    maximumPaths: 2\n    holdTime: 60s\n")
	framework.Eventually(t, 60*time.Second, "the second router's new session", func() (bool, string) {
		return established() > sessions, "no session established since the reload"
	})
	if now := table(r2.Name+": every VIP via the same 2 nodes", r2, 2, nil); !maps.EqualFunc(now, split, slices.Equal) {
		t.Errorf("a new hold time changed the second router's routes from %v to %v", split, now)
	}
	untouched("a new hold time", from)

	// Back to 4 paths: the same session, the fourth path back.
	from, sessions = mark(), established()
	reload("    maximumPaths: 4\n    holdTime: 60s\n")
	if now := table(r2.Name+": every VIP via 4 nodes again", r2, width, nil); !maps.EqualFunc(now, before[r2], slices.Equal) {
		t.Errorf("back at 4 paths the second router routes the VIPs %v, want as at first: %v", now, before[r2])
	}
	untouched("the second router back in the first's selection", from)
	if n := established() - sessions; n != 0 {
		t.Errorf("sessions established %d times after the second router went back to 4 paths, want none: its speaker takes the selection's table", n)
	}
}
