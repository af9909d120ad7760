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
