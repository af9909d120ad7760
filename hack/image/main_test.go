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

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// built is the image of s with a stand-in binary named
// baremetal-cloud-controller-manager.
func built(t *testing.T, s spec) v1.Image {
	t.Helper()
	dir := t.TempDir()
	s.binary = filepath.Join(dir, "baremetal-cloud-controller-manager")
	if err := os.WriteFile(s.binary, []byte("not really a program"), 0o755); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "image.tar")
	if err := build(s, out); err != nil {
		t.Fatal(err)
	}
	img, err := tarball.ImageFromPath(out, nil)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// The image a user loads runs the binary as nonroot and has no shell.
func TestImageRunsTheBinaryAsNonRootWithoutAShell(t *testing.T) {
	img := built(t, spec{tag: "example.com/ccm:test", user: nonroot})
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Config.User != "65532:65532" || !slices.Equal(cfg.Config.Entrypoint, []string{"/usr/local/bin/baremetal-cloud-controller-manager"}) || len(cfg.Config.Cmd) != 0 || cfg.OS != "linux" {
		t.Errorf("config: user %q, entrypoint %v, cmd %v, os %q", cfg.Config.User, cfg.Config.Entrypoint, cfg.Config.Cmd, cfg.OS)
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

// An image built with -cmd runs its entrypoint with those arguments when
// a pod gives none, as agnhost's does: upstream's specs start pods of it
// without a command and wait for them to keep running.
func TestCmdIsTheEntrypointsDefaultArguments(t *testing.T) {
	cfg, err := built(t, spec{path: "/agnhost", tag: "example.com/agnhost:test", user: "0:0", cmd: []string{"pause"}}).ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cfg.Config.Entrypoint, []string{"/agnhost"}) || !slices.Equal(cfg.Config.Cmd, []string{"pause"}) {
		t.Errorf("entrypoint %v, cmd %v; want [/agnhost] [pause]", cfg.Config.Entrypoint, cfg.Config.Cmd)
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

// The release's index: an image per platform, of that architecture, and
// the same digest from the same binaries.
func TestIndexIsOnePerPlatformAndReproducible(t *testing.T) {
	dir := t.TempDir()
	var platforms []string
	for _, arch := range []string{"amd64", "arm64"} {
		bin := filepath.Join(dir, arch)
		if err := os.WriteFile(bin, []byte("a program for "+arch), 0o755); err != nil {
			t.Fatal(err)
		}
		platforms = append(platforms, "linux/"+arch+"="+bin)
	}
	digests := map[string]bool{}
	for _, out := range []string{"one", "two"} {
		s := spec{binary: "baremetal-cloud-controller-manager", tag: "example.com/ccm:v1.2.3", user: nonroot}
		if err := buildIndex(s, platforms, []string{"org.opencontainers.image.version=v1.2.3"}, filepath.Join(dir, out)); err != nil {
			t.Fatal(err)
		}
		lp, err := layout.FromPath(filepath.Join(dir, out))
		if err != nil {
			t.Fatal(err)
		}
		top, err := lp.ImageIndex()
		if err != nil {
			t.Fatal(err)
		}
		m, err := top.IndexManifest()
		if err != nil || len(m.Manifests) != 1 || m.Manifests[0].Annotations["io.containerd.image.name"] != "example.com/ccm:v1.2.3" {
			t.Fatalf("index.json: %+v, %v", m, err)
		}
		digests[m.Manifests[0].Digest.String()] = true
		idx, err := top.ImageIndex(m.Manifests[0].Digest)
		if err != nil {
			t.Fatal(err)
		}
		im, err := idx.IndexManifest()
		if err != nil || len(im.Manifests) != 2 {
			t.Fatalf("the index: %+v, %v", im, err)
		}
		for _, d := range im.Manifests {
			img, err := idx.Image(d.Digest)
			if err != nil {
				t.Fatal(err)
			}
			cfg, err := img.ConfigFile()
			if err != nil || cfg.Architecture != d.Platform.Architecture || cfg.OS != "linux" {
				t.Errorf("the %s image's config: %+v, %v", d.Platform.Architecture, cfg, err)
			}
		}
	}
	if len(digests) != 1 {
		t.Errorf("two builds of the same binaries gave the indexes %v", digests)
	}
	if err := buildIndex(spec{tag: "example.com/ccm:v1"}, []string{"darwin/arm64=x"}, nil, filepath.Join(dir, "bad")); err == nil || !strings.Contains(err.Error(), "linux/<arch>") {
		t.Errorf("a platform not linux: %v", err)
	}
}
