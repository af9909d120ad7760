package framework

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// Dashboard and alert files the chart ships.
var (
	DashboardFile = filepath.Join("deploy", "chart", "baremetal-cloud-controller-manager", "files", "grafana-dashboard.json")
	AlertsFile    = filepath.Join("deploy", "chart", "baremetal-cloud-controller-manager", "files", "alerts.yaml")
)

// Prometheus is a real Prometheus (Debian's) scraping CCM replicas with the
// chart's alert rules loaded.
type Prometheus struct {
	base string
}

// StartPrometheus runs Prometheus on loopback, scraping each target's
// secure port every second with the cluster admin's certificate, with the
// rules loaded, and waits until a target is up.
func StartPrometheus(t testing.TB, c *Cluster, targets []string, rules string) *Prometheus {
	t.Helper()
	if err := EnsureCommands(map[string]string{"prometheus": "prometheus", "promtool": "prometheus"}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cert, key := filepath.Join(dir, "admin.crt"), filepath.Join(dir, "admin.key")
	if err := os.WriteFile(cert, c.AdminConfig.CertData, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(key, c.AdminConfig.KeyData, 0o600); err != nil {
		t.Fatal(err)
	}
	quoted := make([]string, len(targets))
	for i, target := range targets {
		quoted[i] = fmt.Sprintf("%q", target)
	}
	config := fmt.Sprintf(`global: {scrape_interval: 1s, evaluation_interval: 1s}
rule_files: [%q]
scrape_configs:
- job_name: baremetal-cloud-controller-manager
  scheme: https
  tls_config: {insecure_skip_verify: true, cert_file: %q, key_file: %q}
  static_configs: [{targets: [%s]}]
`, rules, cert, key, strings.Join(quoted, ", "))
	conf := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(conf, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	port, err := FreePort()
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"--config.file=" + conf, "--storage.tsdb.path=" + filepath.Join(dir, "data"), fmt.Sprintf("--web.listen-address=127.0.0.1:%d", port)}
	p, err := StartProcess("prometheus", dir, "prometheus", 0, nil, args...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.Stop()
		if t.Failed() {
			t.Logf("Prometheus:\n%s", Tail(p.Logs(), 40))
		}
	})
	prom := &Prometheus{base: fmt.Sprintf("http://127.0.0.1:%d", port)}
	Eventually(t, 30*time.Second, "Prometheus scraping the CCM", func() (bool, string) {
		n, err := prom.Samples(`up{job="baremetal-cloud-controller-manager"} == 1`)
		if err != nil {
			return false, err.Error()
		}
		return n > 0, "target not up"
	})
	return prom
}

func (p *Prometheus) get(path string, params url.Values, into any) error {
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

// Samples is how many series an instant query returns.
func (p *Prometheus) Samples(query string) (int, error) {
	var r struct {
		Data struct{ Result []json.RawMessage }
	}
	err := p.get("/api/v1/query", url.Values{"query": {query}}, &r)
	return len(r.Data.Result), err
}

// AlertRule is an alerting rule as Prometheus holds it.
type AlertRule struct {
	Name, Query, Health, LastError, State string
}

// Rules are the alerting rules loaded.
func (p *Prometheus) Rules(t testing.TB) []AlertRule {
	t.Helper()
	var r struct {
		Data struct {
			Groups []struct{ Rules []AlertRule }
		}
	}
	if err := p.get("/api/v1/rules", url.Values{"type": {"alert"}}, &r); err != nil {
		t.Fatal(err)
	}
	var out []AlertRule
	for _, g := range r.Data.Groups {
		out = append(out, g.Rules...)
	}
	return out
}

// CheckDashboard checks the panels of the rows row keeps (by title):
// each is described in docs/operations/monitoring.md, and each of its
// queries names only metrics the CCM exports and returns data. It returns
// how many queries it ran.
func CheckDashboard(t testing.TB, p *Prometheus, exported map[string]bool, row func(title string) bool) int {
	t.Helper()
	root := RepoRoot()
	var dash struct {
		Panels []struct {
			Title   string
			Type    string
			Targets []struct{ Expr string }
		}
	}
	b, err := os.ReadFile(filepath.Join(root, DashboardFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("%s: %v", DashboardFile, err)
	}
	readme, err := os.ReadFile(filepath.Join(root, "docs", "operations", "monitoring.md"))
	if err != nil {
		t.Fatal(err)
	}
	queries, in := 0, false
	for _, panel := range dash.Panels {
		if panel.Type == "row" {
			in = row(panel.Title)
			continue
		}
		if !in {
			continue
		}
		if !strings.Contains(string(readme), "**"+panel.Title+"**") {
			t.Errorf("panel %q is not described in docs/operations/monitoring.md", panel.Title)
		}
		for _, target := range panel.Targets {
			queries++
			for _, name := range MetricNames(target.Expr) {
				if !exported[name] {
					t.Errorf("panel %q: %s is not a metric the CCM exports (query %s)", panel.Title, name, target.Expr)
				}
			}
			// Grafana's variables, as the dashboard's "All" sets them.
			q := strings.NewReplacer("$__rate_interval", "15s", "$job", ".+", "$instance", ".+").Replace(target.Expr)
			Eventually(t, 30*time.Second, fmt.Sprintf("panel %q's query %s returning data", panel.Title, q), func() (bool, string) {
				n, err := p.Samples(q)
				if err != nil {
					return false, err.Error()
				}
				return n > 0, "no series"
			})
		}
	}
	return queries
}

// ExportedNames are the sample names of a /metrics text.
func ExportedNames(text string) map[string]bool {
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
	quotedRE     = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
	matchersRE   = regexp.MustCompile(`\{[^}]*\}|\[[^\]]*\]`)
	groupingRE   = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	identifierRE = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*(\s*\()?`)
	promKeywords = []string{"by", "without", "on", "ignoring", "group_left", "group_right", "and", "or", "unless", "bool", "offset", "inf", "nan"}
)

// MetricNames are the metrics a PromQL expression selects: identifiers
// that are not functions, keywords, label names or strings.
func MetricNames(expr string) []string {
	e := quotedRE.ReplaceAllString(expr, `""`)
	e = matchersRE.ReplaceAllString(e, " ")
	e = groupingRE.ReplaceAllString(e, " ")
	var names []string
	for _, m := range identifierRE.FindAllStringSubmatch(e, -1) {
		if m[1] != "" || slices.Contains(promKeywords, strings.ToLower(m[0])) || strings.Contains(m[0], "$") {
			continue
		}
		names = append(names, m[0])
	}
	return names
}
