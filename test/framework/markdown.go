package framework

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Block is one fenced code block of a Markdown file: what the docs show a
// user, so that tests can run exactly that text.
type Block struct {
	File    string // relative to the repository's root
	Line    int    // of the opening fence
	Lang    string // the fence's info string ("yaml", "frr", ...)
	Heading string // the nearest heading above it
	Text    string
}

// DocFiles are the user's documentation: README.md and docs/**.md.
func DocFiles() ([]string, error) {
	root := RepoRoot()
	files := []string{filepath.Join(root, "README.md")}
	err := filepath.WalkDir(filepath.Join(root, "docs"), func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".md") {
			files = append(files, path)
		}
		return err
	})
	return files, err
}

// MarkdownBlocks is every fenced block of DocFiles.
func MarkdownBlocks() ([]Block, error) {
	files, err := DocFiles()
	if err != nil {
		return nil, err
	}
	var out []Block
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		rel, _ := filepath.Rel(RepoRoot(), f)
		out = append(out, blocksOf(rel, string(raw))...)
	}
	return out, nil
}

func blocksOf(file, text string) []Block {
	var out []Block
	var cur *Block
	var body []string
	heading := ""
	for i, line := range strings.Split(text, "\n") {
		switch {
		case cur == nil && strings.HasPrefix(line, "```"):
			cur = &Block{File: file, Line: i + 1, Lang: strings.TrimSpace(strings.TrimPrefix(line, "```")), Heading: heading}
			body = nil
		case cur != nil && strings.TrimSpace(line) == "```":
			cur.Text = strings.Join(body, "\n") + "\n"
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			body = append(body, line)
		case strings.HasPrefix(line, "#"):
			heading = strings.TrimSpace(strings.TrimLeft(line, "#"))
		}
	}
	return out
}

// MarkdownBlock is the one block of file under heading with the info
// string lang; tests run what the docs show through it.
func MarkdownBlock(file, heading, lang string) (Block, error) {
	all, err := MarkdownBlocks()
	if err != nil {
		return Block{}, err
	}
	var found []Block
	for _, b := range all {
		if b.File == file && b.Heading == heading && b.Lang == lang {
			found = append(found, b)
		}
	}
	if len(found) != 1 {
		return Block{}, fmt.Errorf("docs: %s under %q has %d blocks of %s, want 1", file, heading, len(found), lang)
	}
	return found[0], nil
}

// RunDocShell runs text, shell commands a page of the docs gives, with
// bash in dir against c (kubectl and the CCM's binary, in binDir, on the
// PATH); a failure fails the test with their output.
func RunDocShell(t *testing.T, c *Cluster, dir, binDir, text string) {
	t.Helper()
	cmd := exec.Command("bash", "-euo", "pipefail", "-c", text)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "KUBECONFIG="+c.AdminKubeconfig, "PATH="+binDir+":"+ToolsBin()+":"+os.Getenv("PATH"))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the docs' commands:\n%s\nfailed: %v\n%s", text, err, out)
	}
}
