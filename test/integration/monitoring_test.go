package integration

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/test/framework"
)

// The Grafana dashboard and the alerts cannot rot: a real Prometheus
// (Debian's) scrapes a CCM that announces to a peer and holds addresses,
// and every query of the dashboard and every alert names only metrics the
// CCM exports and returns data; the alerts load, none fires on the healthy
// site, and the session alert goes pending when the peer stops. promtool
// checks the rule file and runs its unit tests (testdata/alerts_test.yaml).
func TestDashboardAndAlerts(t *testing.T) {
	if err := framework.EnsureCommands(map[string]string{"prometheus": "prometheus", "promtool": "prometheus"}); err != nil {
		t.Fatal(err)
	}
	root := framework.RepoRoot()
	alerts := filepath.Join(root, framework.AlertsFile)
	for _, args := range [][]string{
		{"check", "rules", alerts},
		{"test", "rules", filepath.Join(root, "test", "integration", "testdata", "alerts_test.yaml")},
	} {
		if out, err := exec.Command("promtool", args...).CombinedOutput(); err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}

	const ns = "monitoring"
	s := newLBSite(t, ns)
	ccm := s.startCCM("ccm")
	for i, name := range []string{"mon-a", "mon-b"} {
		lbNode(t, name, false, 40+i)
		setNodeStatus(t, name, true, nil)
		waitInitialized(t, name)
	}
	var vips []string
	for _, name := range []string{"web", "api", "db"} {
		createLBService(t, ns, name, nil)
		vips = append(vips, framework.WaitIngress(t, suite.Cluster.Admin, ns, name, 1)...)
	}
	framework.WaitRoute(t, s.peer, vips[0]+"/32", "203.0.113.40", "203.0.113.41")

	prom := framework.StartPrometheus(t, suite.Cluster, []string{fmt.Sprintf("127.0.0.1:%d", ccm.SecurePort)}, alerts)
	exported := framework.ExportedNames(suite.Metrics(t, ccm))
	// A BGP site: the layer 2 row is checked by test/l2, on a segment,
	// and the power row by TestPowerFromBMCs, with BMCs.
	if queries := framework.CheckDashboard(t, prom, exported, func(row string) bool { return row != "Layer 2" && row != powerRow }); queries < 15 {
		t.Errorf("the dashboard has %d queries; did it fail to parse?", queries)
	}

	rules := prom.Rules(t)
	if len(rules) < 7 {
		t.Fatalf("Prometheus loaded %d alerting rules from %s", len(rules), framework.AlertsFile)
	}
	for _, r := range rules {
		if r.Health != "ok" {
			t.Errorf("alert %s: health %q: %s", r.Name, r.Health, r.LastError)
		}
		if strings.HasPrefix(r.Name, "BaremetalL2") || strings.HasPrefix(r.Name, "BaremetalBFD") || powerAlerts[r.Name] {
			continue // test/l2, test/e2e's TestBFD and TestPowerFromBMCs: they need layer 2 pools, a router running BFD, BMCs
		}
		for _, name := range framework.MetricNames(r.Query) {
			if !exported[name] {
				t.Errorf("alert %s: %s is not a metric the CCM exports (%s)", r.Name, name, r.Query)
			}
		}
		if r.State != "inactive" {
			t.Errorf("alert %s is %s on a healthy site", r.Name, r.State)
		}
	}

	s.peer.Stop()
	framework.Eventually(t, 60*time.Second, "BaremetalBGPSessionDown pending for the stopped peer", func() (bool, string) {
		for _, r := range prom.Rules(t) {
			if r.Name == "BaremetalBGPSessionDown" && r.State == "pending" {
				return true, ""
			}
		}
		return false, "not pending"
	})
}

func TestMetricNames(t *testing.T) {
	got := framework.MetricNames(`histogram_quantile(0.99, sum by (le) (rate(workqueue_work_duration_seconds_bucket{job=~"$job", name="service"}[$__rate_interval]))) / max by (pool) (a{x="b"} + ignoring(state) b_c) > 0.9`)
	if want := []string{"workqueue_work_duration_seconds_bucket", "a", "b_c"}; !slices.Equal(got, want) {
		t.Errorf("MetricNames = %q, want %q", got, want)
	}
}
