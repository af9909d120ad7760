package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/annotations"
	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/test/framework"
)

// TestAdvertisementsPerRouter runs the routing-policy example of
// docs/network/routers.md against two FRR routers of the page's recipe:
// each router holds the pools the advertisements give it, with their
// attributes as FRR shows them (MED, AS path, communities), and nothing
// of a pool it is not given. A reload that gives the second pool to the
// other router moves its VIP there without restarting any session.
func TestAdvertisementsPerRouter(t *testing.T) {
	const namespace = "advertisements"
	site := newTwoRouters(t, "ad", 3)
	block, err := framework.MarkdownBlock(recipesPage, "Routing policy per router", "yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfgFile := filepath.Join(t.TempDir(), "cloud.yaml")
	write := func(cfg string) {
		t.Helper()
		if err := os.WriteFile(cfgFile, []byte(cfg+site.inventory()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(block.Text)
	framework.CreateNamespace(t, cluster.Admin, namespace)
	framework.CreateLBService(t, cluster.Admin, namespace, "public", nil)
	framework.CreateLBService(t, cluster.Admin, namespace, "internal", func(s *v1.Service) {
		s.Annotations = map[string]string{annotations.AddressPool: "internal"}
	})
	ccm := framework.StartReplica(t, framework.CCM{
		Binary: ccmBinary, Name: "ccm-advertisements", Kubeconfig: site.l.kubeconfig(site.cp), CloudConfig: cfgFile, Netns: site.cp.Name,
		Env: []string{"POD_IP=" + recipeCP4},
	})
	framework.WaitLeader(t, ccm)
	public := framework.WaitIngress(t, cluster.Admin, namespace, "public", 1)[0]
	internal := framework.WaitIngress(t, cluster.Admin, namespace, "internal", 1)[0]

	holds := func(router *framework.Netns, vip string) ([]framework.FRRPath, string) {
		paths, out, _ := site.frr[router].Paths(vip + "/32")
		return paths, out
	}
	type want struct {
		router    *framework.Netns
		vip       string
		absent    bool
		metric    int // -1: none
		asPath    string
		community string
	}
	check := func(what string, wants []want) {
		t.Helper()
		framework.Eventually(t, 60*time.Second, what, func() (bool, string) {
			for _, w := range wants {
				paths, out := holds(w.router, w.vip)
				if w.absent {
					if len(paths) > 0 {
						return false, fmt.Sprintf("%s holds %s, which it is not given:\n%s", w.router.Name, w.vip, out)
					}
					continue
				}
				if len(paths) != len(site.nodes) {
					return false, fmt.Sprintf("%s holds %d paths of %s, want one per node (%d):\n%s", w.router.Name, len(paths), w.vip, len(site.nodes), out)
				}
				for _, p := range paths {
					metric := -1
					if p.Metric != nil {
						metric = *p.Metric
					}
					if metric != w.metric || p.ASPath.String != w.asPath || p.Community.String != w.community {
						return false, fmt.Sprintf("%s holds %s with MED %d, AS path %q, communities %q; want %d, %q, %q:\n%s",
							w.router.Name, w.vip, metric, p.ASPath.String, p.Community.String, w.metric, w.asPath, w.community, out)
					}
				}
			}
			return true, ""
		})
	}
	check("each router holds its pools with its attributes", []want{
		{router: site.r1, vip: public, metric: 10, asPath: "64512", community: "64512:1"},
		{router: site.r1, vip: internal, absent: true},
		{router: site.r2, vip: public, metric: -1, asPath: "64512 64512 64512", community: "64512:2"},
		{router: site.r2, vip: internal, metric: -1, asPath: "64512"},
	})
	sessions := strings.Count(ccm.Logs(), `state="established"`)
	moved := strings.Replace(block.Text, "  - pools: [internal]\n    peers: [10.0.0.2]", "  - pools: [internal]\n    peers: [10.0.0.1]", 1)
	if moved == block.Text {
		t.Fatal("the page's example gives the internal pool to no router of 10.0.0.2")
	}
	write(moved)
	check("the internal pool moved to the first router", []want{
		{router: site.r1, vip: public, metric: 10, asPath: "64512", community: "64512:1"},
		{router: site.r1, vip: internal, metric: -1, asPath: "64512"},
		{router: site.r2, vip: public, metric: -1, asPath: "64512 64512 64512", community: "64512:2"},
		{router: site.r2, vip: internal, absent: true},
	})
	if n := strings.Count(ccm.Logs(), `state="established"`) - sessions; n != 0 {
		t.Errorf("sessions established %d times after the reload, want none: each router's speaker takes its new table", n)
	}
}
