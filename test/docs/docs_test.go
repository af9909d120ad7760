// Package docs checks that the documentation says what the code does: every
// cloud config it shows validates, and every Event reason and metric the
// code emits is in the reference, and nothing else is; and MetalLB's own
// examples convert. It reads files only (make unit runs it): MetalLB's
// examples from the Go module cache, which the go command fills from the
// module proxy when they are missing.
package docs

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"go/ast"
	"go/parser"
	"go/token"
	"math/big"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"go.yaml.in/yaml/v3"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/config"
	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/metallb"
	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/provider"
	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/test/framework"
)

// cloudConfigKeys are the top-level keys of a cloud config; a YAML block
// of the docs with one of them is one (or a part of one) and must validate
// on its own.
var cloudConfigKeys = []string{"inventory", "loadBalancer", "bgp", "routes"}

func TestEveryCloudConfigOfTheDocsValidates(t *testing.T) {
	blocks, err := framework.MarkdownBlocks()
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, b := range blocks {
		if b.Lang != "yaml" || !isCloudConfig(b.Text) {
			continue
		}
		checked++
		if _, err := config.Parse([]byte(withPasswordFiles(t, b.Text))); err != nil {
			t.Errorf("%s:%d (under %q): the cloud config does not validate: %v", b.File, b.Line, b.Heading, err)
		}
	}
	// The getting-started page alone shows three.
	if checked < 3 {
		t.Errorf("found %d cloud configs in the docs; the extraction is broken", checked)
	}
}

// withPasswordFiles is text with every passwordFile, BMC usernameFile and
// tls.caFile moved into a temporary directory where it exists, as the
// Secret the docs mount would make it exist on the CCM's host.
func withPasswordFiles(t *testing.T, text string) string {
	dir := t.TempDir()
	return secretFileRE.ReplaceAllStringFunc(text, func(m string) string {
		sub := secretFileRE.FindStringSubmatch(m)
		path := filepath.Join(dir, sub[2])
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			t.Fatal(err)
		}
		content := []byte("secret\n")
		if sub[1] == "caFile" {
			content = selfSignedPEM(t)
		}
		if err := os.WriteFile(path, content, 0o600); err != nil {
			t.Fatal(err)
		}
		return sub[1] + ": " + path
	})
}

var secretFileRE = regexp.MustCompile(`(passwordFile|usernameFile|caFile): (/[^\s,}]+)`)

// selfSignedPEM is a certificate, as a BMC's CA file holds one.
func selfSignedPEM(t *testing.T) []byte {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "bmc"}, NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func isCloudConfig(text string) bool {
	var top map[string]any
	if yaml.Unmarshal([]byte(text), &top) != nil || len(top) == 0 {
		return false
	}
	// One key of a cloud config makes it one: a misspelt other key must
	// fail its validation, not hide the block from it.
	for k := range top {
		if slices.Contains(cloudConfigKeys, k) {
			return true
		}
	}
	return false
}

// TestEveryEventReasonIsDocumented compares the reasons the code records
// with the first column of the reference's table of this provider's.
func TestEveryEventReasonIsDocumented(t *testing.T) {
	emitted := eventReasons(t)
	documented := firstColumn(t, "docs/reference/events.md", "This provider's")
	compareSets(t, "Event reason", emitted, documented, "docs/reference/events.md")
}

// TestEveryMetricIsDocumented compares the provider's metrics with the
// reference's table.
func TestEveryMetricIsDocumented(t *testing.T) {
	var exported []string
	for _, m := range provider.Metrics() {
		exported = append(exported, m.FQName())
	}
	documented := firstColumn(t, "docs/reference/metrics.md", "")
	compareSets(t, "metric", exported, documented, "docs/reference/metrics.md")
}

func compareSets(t *testing.T, what string, code, docs []string, file string) {
	t.Helper()
	if len(code) == 0 || len(docs) == 0 {
		t.Fatalf("found %d of the code's and %d of the docs'; the extraction is broken", len(code), len(docs))
	}
	for _, c := range code {
		if !slices.Contains(docs, c) {
			t.Errorf("%s %s is emitted by the code but not in %s", what, c, file)
		}
	}
	for _, d := range docs {
		if !slices.Contains(code, d) {
			t.Errorf("%s %s is in %s but the code does not emit it", what, d, file)
		}
	}
}

// reasonRE is how a reason looks, unlike a message or a format.
var reasonRE = regexp.MustCompile(`^[A-Z][A-Za-z0-9]+$`)

// eventReasons are the string literals the code gives as an Event's
// reason: a report.Problem's Reason, and the reason argument of the calls
// that record an Event directly.
func eventReasons(t *testing.T) []string {
	t.Helper()
	recorders := map[string]int{"eventf": 2, "podEvent": 1, "reportEvent": 2, "Eventf": 2}
	var out []string
	add := func(e ast.Expr) {
		lit, ok := e.(*ast.BasicLit)
		if !ok || lit.Kind != token.STRING {
			return
		}
		s, _ := strconv.Unquote(lit.Value)
		if reasonRE.MatchString(s) && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	root := framework.RepoRoot()
	for _, dir := range []string{"pkg", "cmd"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
			if err != nil {
				return err
			}
			ast.Inspect(f, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.KeyValueExpr:
					if k, ok := n.Key.(*ast.Ident); ok && k.Name == "Reason" {
						add(n.Value)
					}
				case *ast.CallExpr:
					name := ""
					switch fn := n.Fun.(type) {
					case *ast.Ident:
						name = fn.Name
					case *ast.SelectorExpr:
						name = fn.Sel.Name
					}
					if i, ok := recorders[name]; ok && i < len(n.Args) {
						add(n.Args[i])
					}
				}
				return true
			})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// firstColumn is the backquoted names in the first column of the tables
// of file under heading ("" for any), with a metric's labels cut off.
func firstColumn(t *testing.T, file, heading string) []string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(framework.RepoRoot(), file))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	under := heading == ""
	for _, line := range strings.Split(string(raw), "\n") {
		if strings.HasPrefix(line, "#") {
			under = heading == "" || strings.TrimSpace(strings.TrimLeft(line, "#")) == heading
			continue
		}
		if !under || !strings.HasPrefix(line, "| `") {
			continue
		}
		cell := strings.Split(line, "|")[1]
		for _, m := range namesRE.FindAllStringSubmatch(cell, -1) {
			name, _, _ := strings.Cut(m[1], "{")
			out = append(out, name)
		}
	}
	return out
}

// TestTheSchemaTakesEveryConfigOfTheDocs runs the docs' cloud configs and
// the example through the JSON Schema an editor would use, and a misspelt
// field, which it must flag.
func TestTheSchemaTakesEveryConfigOfTheDocs(t *testing.T) {
	root := framework.RepoRoot()
	c := jsonschema.NewCompiler()
	schema, err := c.Compile(filepath.Join(root, "deploy", "cloud-config.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	check := func(name, text string) error {
		var doc any
		if err := yaml.Unmarshal([]byte(text), &doc); err != nil {
			return err
		}
		return schema.Validate(jsonValue(doc))
	}
	blocks, err := framework.MarkdownBlocks()
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range blocks {
		if b.Lang == "yaml" && isCloudConfig(b.Text) {
			if err := check(b.File, b.Text); err != nil {
				t.Errorf("%s:%d: the schema refuses it: %v", b.File, b.Line, err)
			}
		}
	}
	example, err := os.ReadFile(filepath.Join(root, "deploy", "cloud-config.example.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := check("example", string(example)); err != nil {
		t.Errorf("deploy/cloud-config.example.yaml: the schema refuses it: %v", err)
	}
	if err := check("misspelt", "loadBalancer:\n  pools:\n  - name: a\n    adresses: [10.0.0.0/24]\n"); err == nil || !strings.Contains(err.Error(), "adresses") {
		t.Errorf("the schema takes a misspelt field (%v)", err)
	}
}

// jsonValue is v as encoding/json would give it (the schema validator's
// input): numbers as json.Number-compatible float64 or int.
func jsonValue(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			v[k] = jsonValue(e)
		}
		return v
	case []any:
		for i, e := range v {
			v[i] = jsonValue(e)
		}
		return v
	case int:
		return float64(v)
	}
	return v
}

// TestEveryLinkOfTheDocsResolves follows every relative link of README.md
// and docs/ to its file and, for a Markdown file, its heading.
func TestEveryLinkOfTheDocsResolves(t *testing.T) {
	root := framework.RepoRoot()
	files, err := framework.DocFiles()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, f)
		for _, m := range linkRE.FindAllStringSubmatch(outsideCode(string(raw)), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			path, anchor, _ := strings.Cut(target, "#")
			full := f
			if path != "" {
				full = filepath.Join(filepath.Dir(f), path)
			}
			if _, err := os.Stat(full); err != nil {
				t.Errorf("%s: link %s: no such file", rel, target)
				continue
			}
			if anchor != "" && strings.HasSuffix(full, ".md") && !slices.Contains(anchors(t, full), anchor) {
				t.Errorf("%s: link %s: no heading #%s in %s", rel, target, anchor, filepath.Base(full))
			}
		}
	}
}

var (
	linkRE       = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	inlineCodeRE = regexp.MustCompile("`[^`]*`")
	namesRE      = regexp.MustCompile("`([^`]+)`")
)

// outsideCode is text without its fenced blocks and inline code.
func outsideCode(text string) string {
	var b strings.Builder
	fence := false
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "```") {
			fence = !fence
			continue
		}
		if !fence {
			b.WriteString(inlineCodeRE.ReplaceAllString(line, "") + "\n")
		}
	}
	return b.String()
}

// anchors are the GitHub anchors of a Markdown file's headings.
func anchors(t *testing.T, file string) []string {
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	fence := false
	for _, line := range strings.Split(string(raw), "\n") {
		if strings.HasPrefix(line, "```") {
			fence = !fence
		}
		if fence || !strings.HasPrefix(line, "#") {
			continue
		}
		h := strings.ToLower(strings.TrimSpace(strings.TrimLeft(line, "#")))
		var b strings.Builder
		for _, r := range h {
			switch {
			case r == ' ' || r == '-':
				b.WriteRune('-')
			case r == '_' || (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9'):
				b.WriteRune(r)
			}
		}
		out = append(out, b.String())
	}
	return out
}

// TestEveryMetalLBExampleConverts: a YAML block of MetalLB's resources in
// the docs is followed by the cloud config convert-metallb makes of it.
func TestEveryMetalLBExampleConverts(t *testing.T) {
	blocks, err := framework.MarkdownBlocks()
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for i, b := range blocks {
		if b.Lang != "yaml" || !strings.Contains(b.Text, "apiVersion: metallb.io/") {
			continue
		}
		checked++
		res, err := metallb.Convert([]byte(b.Text), metallb.Options{})
		if err != nil || len(res.Refused) > 0 {
			t.Errorf("%s:%d: MetalLB's resources do not convert: %v %v", b.File, b.Line, err, res)
			continue
		}
		if i+1 >= len(blocks) || blocks[i+1].File != b.File || blocks[i+1].Lang != "yaml" {
			t.Errorf("%s:%d: MetalLB's resources are not followed by what they convert to", b.File, b.Line)
			continue
		}
		var got []string
		for _, l := range strings.Split(strings.TrimSpace(string(res.Config)), "\n") {
			if !strings.HasPrefix(l, "#") {
				got = append(got, l)
			}
		}
		if want := strings.TrimSpace(blocks[i+1].Text); strings.Join(got, "\n") != want {
			t.Errorf("%s:%d: convert-metallb writes\n%s\nnot what the docs show:\n%s", b.File, blocks[i+1].Line, strings.Join(got, "\n"), want)
		}
	}
	if checked == 0 {
		t.Error("no MetalLB example in the docs; the extraction is broken")
	}
}

// Every alert of the chart has a runbook_url into docs/operations/alerts.md,
// at a section of its own name, and the page has no section for an alert
// that does not exist.
func TestEveryAlertHasItsRunbook(t *testing.T) {
	const base = "https://github.com/cloud-provider-baremetal/cloud-provider-baremetal/blob/main/docs/operations/alerts.md#"
	root := framework.RepoRoot()
	raw, err := os.ReadFile(filepath.Join(root, "deploy", "chart", "baremetal-cloud-controller-manager", "files", "alerts.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var rules struct {
		Groups []struct {
			Rules []struct {
				Alert       string            `yaml:"alert"`
				Annotations map[string]string `yaml:"annotations"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(raw, &rules); err != nil {
		t.Fatal(err)
	}
	page := filepath.Join(root, "docs", "operations", "alerts.md")
	sections := anchors(t, page)
	var alerts []string
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			alerts = append(alerts, strings.ToLower(r.Alert))
			anchor, ok := strings.CutPrefix(r.Annotations["runbook_url"], base)
			if !ok || anchor != strings.ToLower(r.Alert) {
				t.Errorf("%s: runbook_url %q, want %s%s", r.Alert, r.Annotations["runbook_url"], base, strings.ToLower(r.Alert))
			}
			if !slices.Contains(sections, strings.ToLower(r.Alert)) {
				t.Errorf("%s: no section ## %s in docs/operations/alerts.md", r.Alert, r.Alert)
			}
		}
	}
	for _, s := range sections {
		if strings.HasPrefix(s, "baremetal") && !slices.Contains(alerts, s) {
			t.Errorf("docs/operations/alerts.md has a section %q for no alert of the chart", s)
		}
	}
}

// TestNewerConfigMessageIsTheBinarys: the upgrade page shows what an
// older binary says of a config of a newer version; it is what the code
// says of one.
func TestNewerConfigMessageIsTheBinarys(t *testing.T) {
	blocks, err := framework.MarkdownBlocks()
	if err != nil {
		t.Fatal(err)
	}
	_, got := config.Parse([]byte("apiVersion: baremetal.cloudprovider.io/v1alpha2\ninventory:\n  fencing: {}\n"))
	for _, b := range blocks {
		if strings.HasSuffix(b.File, "upgrade.md") && b.Heading == "The config's version" && b.Lang == "" {
			if got == nil || strings.TrimSpace(b.Text) != got.Error() {
				t.Errorf("%s:%d shows\n%s\nthe binary says\n%v", b.File, b.Line, b.Text, got)
			}
			return
		}
	}
	t.Error("no message block under \"The config's version\" in upgrade.md")
}
