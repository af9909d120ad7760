package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/test/framework"
)

// TestMigrationTableNamesEveryField walks the spec of each MetalLB and
// FRR-K8s resource the converter reads, from their CRDs (the stored
// version, in the modules hack/metallb pins), and finds every field named
// in its section of docs/migration/metallb.md's table: a field MetalLB
// adds in a new release fails here until the page says what becomes of it.
func TestMigrationTableNamesEveryField(t *testing.T) {
	mlb, err := framework.MetalLBModuleDir()
	if err != nil {
		t.Fatal(err)
	}
	frr, err := framework.FRRK8sModuleDir()
	if err != nil {
		t.Fatal(err)
	}
	page, err := os.ReadFile(filepath.Join(framework.RepoRoot(), "docs", "migration", "metallb.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ crd, section string }{
		{filepath.Join(mlb, "config", "crd", "bases", "metallb.io_ipaddresspools.yaml"), "IPAddressPool"},
		{filepath.Join(mlb, "config", "crd", "bases", "metallb.io_bgpadvertisements.yaml"), "BGPAdvertisement"},
		{filepath.Join(mlb, "config", "crd", "bases", "metallb.io_l2advertisements.yaml"), "L2Advertisement"},
		{filepath.Join(mlb, "config", "crd", "bases", "metallb.io_bgppeers.yaml"), "BGPPeer"},
		{filepath.Join(mlb, "config", "crd", "bases", "metallb.io_bfdprofiles.yaml"), "BFDProfile and Community"},
		{filepath.Join(mlb, "config", "crd", "bases", "metallb.io_communities.yaml"), "BFDProfile and Community"},
		{filepath.Join(frr, "config", "crd", "bases", "frrk8s.metallb.io_frrconfigurations.yaml"), "FRRConfiguration (FRR-K8s)"},
	} {
		fields := specFields(t, c.crd)
		if len(fields) == 0 {
			t.Fatalf("%s: no spec fields read", c.crd)
		}
		tokens := sectionTokens(string(page), c.section)
		if len(tokens) == 0 {
			t.Fatalf("docs/migration/metallb.md has no section %q", c.section)
		}
		for _, f := range fields {
			if !named(f, tokens) {
				t.Errorf("%s: the table (section %q) does not name spec.%s", filepath.Base(c.crd), c.section, strings.Join(f, "."))
			}
		}
	}
}

// specFields are the paths of the leaves of the stored version's spec
// (arrays' items are walked; a map or a list of scalars is a leaf).
func specFields(t *testing.T, crd string) [][]string {
	t.Helper()
	raw, err := os.ReadFile(crd)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Spec struct {
			Versions []struct {
				Storage bool
				Schema  struct {
					OpenAPIV3Schema schema `yaml:"openAPIV3Schema"`
				}
			}
		}
	}
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("%s: %v", crd, err)
	}
	var out [][]string
	var walk func(path []string, s schema)
	walk = func(path []string, s schema) {
		if s.Items != nil {
			s = *s.Items
		}
		if len(s.Properties) == 0 {
			out = append(out, slices.Clone(path))
			return
		}
		for name, p := range s.Properties {
			walk(append(path, name), p)
		}
	}
	for _, v := range doc.Spec.Versions {
		if v.Storage {
			walk(nil, v.Schema.OpenAPIV3Schema.Properties["spec"])
		}
	}
	slices.SortFunc(out, func(a, b []string) int { return strings.Compare(strings.Join(a, "."), strings.Join(b, ".")) })
	return out
}

type schema struct {
	Properties map[string]schema
	Items      *schema
}

// sectionTokens are the backticked names in the section under "### name",
// each as its path: `spec.a[].b: x` is [spec a b].
func sectionTokens(page, name string) [][]string {
	start := strings.Index(page, "\n### "+name+"\n")
	if start < 0 {
		return nil
	}
	text := page[start+len(name)+5:]
	if end := strings.Index(text, "\n#"); end >= 0 {
		text = text[:end]
	}
	var out [][]string
	for _, m := range regexp.MustCompile("`([^`]+)`").FindAllStringSubmatch(text, -1) {
		tok, _, _ := strings.Cut(m[1], ":")
		tok, _, _ = strings.Cut(tok, " ")
		out = append(out, strings.Split(strings.ReplaceAll(tok, "[]", ""), "."))
	}
	return out
}

// named reports whether a token names the field: one from spec (as
// `spec.a.b`) names it and everything under it; another, a run of its
// path's names that ends at the field or, of two names or more, names a
// part of it (`neighbors[].toReceive`).
func named(field []string, tokens [][]string) bool {
	for _, tok := range tokens {
		if tok[0] == "spec" {
			if len(tok) > 1 && len(field) >= len(tok)-1 && slices.Equal(field[:len(tok)-1], tok[1:]) {
				return true
			}
			continue
		}
		for i := 0; i+len(tok) <= len(field); i++ {
			if slices.Equal(field[i:i+len(tok)], tok) && (i+len(tok) == len(field) || len(tok) >= 2) {
				return true
			}
		}
	}
	return false
}
