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

// TestDependencyUpdatesCoverEveryModule: every go.mod of the repository is
// in .github/dependabot.yml, and the workflows' actions are watched too.
func TestDependencyUpdatesCoverEveryModule(t *testing.T) {
	root := framework.RepoRoot()
	data, err := os.ReadFile(filepath.Join(root, ".github", "dependabot.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Updates []struct {
			Ecosystem   string   `yaml:"package-ecosystem"`
			Directory   string   `yaml:"directory"`
			Directories []string `yaml:"directories"`
		}
	}
	if err := yaml.Unmarshal(data, &cfg); err != nil {
		t.Fatal(err)
	}
	watched := map[string][]string{}
	for _, u := range cfg.Updates {
		watched[u.Ecosystem] = append(append(watched[u.Ecosystem], u.Directories...), u.Directory)
	}
	err = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() && (strings.HasPrefix(rel, "bin") || strings.HasPrefix(rel, "dist") || rel == "hack/tools/bin" || strings.HasPrefix(d.Name(), ".")) && rel != "." {
			return filepath.SkipDir
		}
		if d.Name() == "go.mod" {
			if dir := "/" + filepath.Dir(rel); !slices.Contains(watched["gomod"], strings.TrimSuffix(strings.Replace(dir, "/.", "/", 1), "/.")) {
				t.Errorf("%s is not in .github/dependabot.yml's gomod directories %v", rel, watched["gomod"])
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(watched["github-actions"], "/") {
		t.Error(".github/dependabot.yml does not watch the workflows' actions")
	}
}

// TestActionsPinnedByCommit: every action a workflow uses is pinned by
// its commit, with the release it is in a comment.
func TestActionsPinnedByCommit(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(framework.RepoRoot(), ".github", "workflows", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no workflows: %v", err)
	}
	pinned := regexp.MustCompile(`^\s*-?\s*uses:\s*[\w.-]+/[\w./-]+@[0-9a-f]{40} # v\d+\.\d+\.\d+$`)
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(data), "\n") {
			if strings.Contains(line, "uses:") && !pinned.MatchString(line) {
				t.Errorf("%s:%d: %q is not pinned by a commit with its release in a comment (uses: owner/action@<40 hex> # vX.Y.Z)", filepath.Base(f), i+1, strings.TrimSpace(line))
			}
		}
	}
}

// TestTheReleaseIsNamedOnce: the release being made is named in one
// place, the Makefile's RELEASE, and everything that names it agrees: the
// chart's version and appVersion, the CHANGELOG section that becomes its
// notes, the commands of the README and the install page, deploy/'s
// images and labels, the release test's default.
func TestTheReleaseIsNamedOnce(t *testing.T) {
	root := framework.RepoRoot()
	read := func(rel string) string {
		data, err := os.ReadFile(filepath.Join(root, rel))
		if err != nil {
			t.Fatal(err)
		}
		return string(data)
	}
	m := regexp.MustCompile(`(?m)^RELEASE := (v(\d+\.\d+\.\d+))$`).FindStringSubmatch(read("Makefile"))
	if m == nil {
		t.Fatal("the Makefile names no RELEASE := vX.Y.Z")
	}
	tag, semver := m[1], m[2]
	chart := read("deploy/chart/baremetal-cloud-controller-manager/Chart.yaml")
	for _, want := range []string{"\nversion: " + semver + "\n", "\nappVersion: " + tag + "\n"} {
		if !strings.Contains(chart, want) {
			t.Errorf("Chart.yaml does not have %q", strings.TrimSpace(want))
		}
	}
	changelog := read("CHANGELOG.md")
	for _, want := range []string{"\n## [" + semver + "]", "\n[" + semver + "]: https://github.com/cloud-provider-baremetal/cloud-provider-baremetal/releases/tag/" + tag} {
		if !strings.Contains(changelog, want) {
			t.Errorf("CHANGELOG.md does not have %q (the section that becomes the release's notes)", strings.TrimSpace(want))
		}
	}
	versions := regexp.MustCompile(`--version (\d+\.\d+\.\d+)|VERSION=(v\d+\.\d+\.\d+)|baremetal-cloud-controller-manager:(v\d+\.\d+\.\d+)|app.kubernetes.io/version: "(v\d+\.\d+\.\d+)"`)
	files := []string{"README.md", "docs/operations/install.md", "docs/getting-started.md", "deploy/chart/baremetal-cloud-controller-manager/README.md"}
	manifests, _ := filepath.Glob(filepath.Join(root, "deploy", "*.yaml"))
	for _, f := range manifests {
		rel, _ := filepath.Rel(root, f)
		files = append(files, rel)
	}
	seen := 0
	for _, f := range files {
		for _, found := range versions.FindAllStringSubmatch(read(f), -1) {
			seen++
			for _, v := range found[1:] {
				if v != "" && v != semver && v != tag {
					t.Errorf("%s names %q, not the release %s", f, found[0], tag)
				}
			}
		}
	}
	if seen < 10 {
		t.Errorf("found the release named %d times; the patterns are broken", seen)
	}
	if !strings.Contains(read("test/release/release_test.go"), `flag.String("version", "`+tag+`"`) {
		t.Errorf("test/release's -version default is not %s", tag)
	}
}

// TestTheKubernetesVersionsTableIsTheTestedOnes: the README's table names
// the release each minor is tested with, as the Makefile builds it (the
// newest's K8S_VERSION, each older minor's RELEASE_OF_), and every older
// minor has its module in hack/tools and its row.
func TestTheKubernetesVersionsTableIsTheTestedOnes(t *testing.T) {
	root := framework.RepoRoot()
	makefile, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	newest := regexp.MustCompile(`(?m)^K8S_VERSION := (v1\.(\d+)\.\d+)$`).FindSubmatch(makefile)
	if newest == nil {
		t.Fatal("the Makefile names no K8S_VERSION := v1.N.P")
	}
	want := map[string]string{"1." + string(newest[2]): string(newest[1])}
	minors := regexp.MustCompile(`(?m)^MINORS := (.+)$`).FindSubmatch(makefile)
	if minors == nil {
		t.Fatal("the Makefile names no MINORS")
	}
	for _, m := range strings.Fields(string(minors[1])) {
		r := regexp.MustCompile(`(?m)^RELEASE_OF_` + regexp.QuoteMeta(m) + ` := (v\S+)$`).FindSubmatch(makefile)
		if r == nil {
			t.Errorf("MINORS has %s but the Makefile has no RELEASE_OF_%s", m, m)
			continue
		}
		want[m] = string(r[1])
		mod, err := os.ReadFile(filepath.Join(root, "hack", "tools", "k8s-"+m, "go.mod"))
		if err != nil {
			t.Errorf("minor %s: %v", m, err)
		} else if !strings.Contains(string(mod), "\tk8s.io/kubernetes "+string(r[1])+"\n") {
			t.Errorf("hack/tools/k8s-%s/go.mod does not require k8s.io/kubernetes %s", m, r[1])
		}
	}
	rows := regexp.MustCompile(`(?m)^\| (1\.\d+) \| (v1\.\d+\.\d+) \|`).FindAllStringSubmatch(string(readme), -1)
	got := map[string]string{}
	for _, r := range rows {
		got[r[1]] = r[2]
	}
	if len(got) != len(want) {
		t.Errorf("README's Kubernetes versions table has %v, the Makefile tests %v", got, want)
	}
	for m, v := range want {
		if got[m] != v {
			t.Errorf("README's row for %s says %q, the Makefile tests %s", m, got[m], v)
		}
	}
	dirs, _ := filepath.Glob(filepath.Join(root, "hack", "tools", "k8s-*"))
	for _, d := range dirs {
		if m := strings.TrimPrefix(filepath.Base(d), "k8s-"); want[m] == "" {
			t.Errorf("%s is the module of minor %s, which MINORS does not test", d, m)
		}
	}
}
