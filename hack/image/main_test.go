package main

import (
	"archive/tar"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// The image a user loads runs the binary as nonroot and has no shell.
func TestImageRunsTheBinaryAsNonRootWithoutAShell(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "baremetal-cloud-controller-manager")
	if err := os.WriteFile(bin, []byte("not really a program"), 0o755); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "image.tar")
	if err := build(spec{binary: bin, tag: "example.com/ccm:test", user: nonroot}, out); err != nil {
		t.Fatal(err)
	}
	img, err := tarball.ImageFromPath(out, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Config.User != "65532:65532" || !slices.Equal(cfg.Config.Entrypoint, []string{"/usr/local/bin/baremetal-cloud-controller-manager"}) || cfg.OS != "linux" {
		t.Errorf("config: user %q, entrypoint %v, os %q", cfg.Config.User, cfg.Config.Entrypoint, cfg.OS)
	}
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("layers: %d, %v", len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	files := map[string]*tar.Header{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		files[h.Name] = h
	}
	if h := files["usr/local/bin/baremetal-cloud-controller-manager"]; h == nil || h.Mode != 0o755 || h.Size != int64(len("not really a program")) {
		t.Errorf("the binary in the layer: %+v", h)
	}
	for _, shell := range []string{"bin/sh", "bin/bash", "bin/busybox", "usr/bin/sh"} {
		if files[shell] != nil {
			t.Errorf("the image has a shell: %s", shell)
		}
	}
	if files["etc/passwd"] == nil {
		t.Errorf("no /etc/passwd: the nonroot user has no name")
	}
}

// A host program added with -with brings the libraries it loads, so that
// it runs in an image that has nothing else.
func TestWithAddsAProgramAndItsLibraries(t *testing.T) {
	files := map[string][]byte{}
	if err := addWithLibraries(files, "/bin/true"); err != nil {
		t.Fatal(err)
	}
	var libc, interp bool
	for n := range files {
		libc = libc || filepath.Base(n) == "libc.so.6"
		interp = interp || strings.HasPrefix(filepath.Base(n), "ld-linux")
	}
	if files["bin/true"] == nil || !libc || !interp {
		t.Errorf("files for /bin/true: %v; want it, libc.so.6 and the interpreter", sortedKeys(files))
	}
	if err := addWithLibraries(files, "/no/such/program"); err == nil || !strings.Contains(err.Error(), "/no/such/program") {
		t.Errorf("a missing file: %v, want an error naming it", err)
	}
}
