package integration

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/test/framework"
)

var (
	dashboardFile = filepath.Join("deploy", "chart", "baremetal-cloud-controller-manager", "files", "grafana-dashboard.json")
	alertsFile    = filepath.Join("deploy", "chart", "baremetal-cloud-controller-manager", "files", "alerts.yaml")
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
	alerts := filepath.Join(root, alertsFile)
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

	prom := startPrometheus(t, ccm.SecurePort, alerts)
	exported := exportedNames(suite.Metrics(t, ccm))

	var dash struct {
		Panels []struct {
			Title   string
			Type    string
			Targets []struct{ Expr string }
		}
	}
	b, err := os.ReadFile(filepath.Join(root, dashboardFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	readme, err := os.ReadFile(filepath.Join(root, "docs", "operations", "monitoring.md"))
	if err != nil {
		t.Fatal(err)
	}
	queries := 0
	for _, p := range dash.Panels {
		if p.Type == "row" {
			continue
		}
		if !strings.Contains(string(readme), "**"+p.Title+"**") {
			t.Errorf("panel %q is not described in docs/operations/monitoring.md", p.Title)
		}
		for _, target := range p.Targets {
			queries++
			for _, name := range metricNames(target.Expr) {
				if !exported[name] {
					t.Errorf("panel %q: %s is not a metric the CCM exports (query %s)", p.Title, name, target.Expr)
				}
			}
			// Grafana's variables, as the dashboard's "All" sets them.
			q := strings.NewReplacer("$__rate_interval", "15s", "$job", ".+", "$instance", ".+").Replace(target.Expr)
			framework.Eventually(t, 30*time.Second, fmt.Sprintf("panel %q's query %s returning data", p.Title, q), func() (bool, string) {
				n, err := prom.samples(q)
				if err != nil {
					return false, err.Error()
				}
				return n > 0, "no series"
			})
		}
	}
	if queries < 15 {
		t.Errorf("the dashboard has %d queries; did it fail to parse?", queries)
	}

	rules := prom.rules(t)
	if len(rules) < 7 {
		t.Fatalf("Prometheus loaded %d alerting rules from %s", len(rules), alertsFile)
	}
	for _, r := range rules {
		if r.Health != "ok" {
			t.Errorf("alert %s: health %q: %s", r.Name, r.Health, r.LastError)
		}
		for _, name := range metricNames(r.Query) {
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
		for _, r := range prom.rules(t) {
			if r.Name == "BaremetalBGPSessionDown" && r.State == "pending" {
				return true, ""
			}
		}
		return false, "not pending"
	})
}

// exportedNames are the sample names of a /metrics text.
func exportedNames(text string) map[string]bool {
	names := map[string]bool{}
	for _, line := range strings.Split(text, "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if i := strings.IndexAny(line, "{ "); i > 0 {
			names[line[:i]] = true
		}
	}
	return names
}

var (
	quoted     = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
	matchers   = regexp.MustCompile(`\{[^}]*\}|\[[^\]]*\]`)
	grouping   = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	identifier = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*(\s*\()?`)
	keywords   = []string{"by", "without", "on", "ignoring", "group_left", "group_right", "and", "or", "unless", "bool", "offset", "inf", "nan"}
)

// metricNames are the metrics a PromQL expression selects: identifiers
// that are not functions, keywords, label names or strings.
func metricNames(expr string) []string {
	e := quoted.ReplaceAllString(expr, `""`)
	e = matchers.ReplaceAllString(e, " ")
	e = grouping.ReplaceAllString(e, " ")
	var names []string
	for _, m := range identifier.FindAllStringSubmatch(e, -1) {
		if m[1] != "" || slices.Contains(keywords, strings.ToLower(m[0])) || strings.Contains(m[0], "$") {
			continue
		}
		names = append(names, m[0])
	}
	return names
}

func TestMetricNames(t *testing.T) {
	got := metricNames(`histogram_quantile(0.99, sum by (le) (rate(workqueue_work_duration_seconds_bucket{job=~"$job", name="service"}[$__rate_interval]))) / max by (pool) (a{x="b"} + ignoring(state) b_c) > 0.9`)
	if want := []string{"workqueue_work_duration_seconds_bucket", "a", "b_c"}; !slices.Equal(got, want) {
		t.Errorf("metricNames = %q, want %q", got, want)
	}
}

type prometheus struct{ base string }

// startPrometheus runs Prometheus on loopback, scraping the CCM's secure
// port every second as the cluster admin, with the alert rules loaded.
func startPrometheus(t *testing.T, ccmPort int, rules string) *prometheus {
	t.Helper()
	dir := t.TempDir()
	cert, key := filepath.Join(dir, "admin.crt"), filepath.Join(dir, "admin.key")
	if err := os.WriteFile(cert, suite.Cluster.AdminConfig.CertData, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(key, suite.Cluster.AdminConfig.KeyData, 0o600); err != nil {
		t.Fatal(err)
	}
	config := fmt.Sprintf(`global: {scrape_interval: 1s, evaluation_interval: 1s}
rule_files: [%q]
scrape_configs:
- job_name: baremetal-cloud-controller-manager
  scheme: https
  tls_config: {insecure_skip_verify: true, cert_file: %q, key_file: %q}
  static_configs: [{targets: ["127.0.0.1:%d"]}]
`, rules, cert, key, ccmPort)
	conf := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(conf, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	port, err := framework.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	p, err := framework.StartProcess("prometheus", dir, "prometheus", 0, nil, "--config.file="+conf,
		"--storage.tsdb.path="+filepath.Join(dir, "data"), fmt.Sprintf("--web.listen-address=127.0.0.1:%d", port))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.Stop()
		if t.Failed() {
			t.Logf("Prometheus:\n%s", framework.Tail(p.Logs(), 40))
		}
	})
	prom := &prometheus{base: fmt.Sprintf("http://127.0.0.1:%d", port)}
	framework.Eventually(t, 30*time.Second, "Prometheus scraping the CCM", func() (bool, string) {
		n, err := prom.samples(`up{job="baremetal-cloud-controller-manager"} == 1`)
		if err != nil {
			return false, err.Error()
		}
		return n > 0, "target not up"
	})
	return prom
}

func (p *prometheus) get(path string, params url.Values, into any) error {
	resp, err := http.Get(p.base + path + "?" + params.Encode())
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s: %s", path, resp.Status, body)
	}
	return json.Unmarshal(body, into)
}

// samples is how many series an instant query returns.
func (p *prometheus) samples(query string) (int, error) {
	var r struct {
		Data struct{ Result []json.RawMessage }
	}
	err := p.get("/api/v1/query", url.Values{"query": {query}}, &r)
	return len(r.Data.Result), err
}

type alertRule struct {
	Name, Query, Health, LastError, State string
}

func (p *prometheus) rules(t *testing.T) []alertRule {
	t.Helper()
	var r struct {
		Data struct {
			Groups []struct{ Rules []alertRule }
		}
	}
	if err := p.get("/api/v1/rules", url.Values{"type": {"alert"}}, &r); err != nil {
		t.Fatal(err)
	}
	var out []alertRule
	for _, g := range r.Data.Groups {
		out = append(out, g.Rules...)
	}
	return out
}
