// Package release checks what `make release` wrote to dist/, as a site
// that downloads a release would: the checksums verify, the image index
// holds an image per platform whose binary is an ELF of that machine and
// runs (arm64 under Debian's qemu-user-static), the chart lints and renders
// the pinned image, the SBOM lists the modules, and a second build of the
// same commit gives the same bytes.
package release

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	sigsyaml "sigs.k8s.io/yaml"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/test/framework"
)

var version = flag.String("version", "v0.1.0", "the version make release was run with")

const name = "baremetal-cloud-controller-manager"

func dist(parts ...string) string {
	return filepath.Join(append([]string{framework.RepoRoot(), "dist"}, parts...)...)
}

func run(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// descriptor is an OCI descriptor, as much as the test reads.
type descriptor struct {
	MediaType   string
	Digest      string
	Size        int64
	Annotations map[string]string
	Platform    *struct{ OS, Architecture string }
}

// blob reads a blob of the layout at dir, checking its digest.
func blob(t *testing.T, dir, digest string) []byte {
	t.Helper()
	hexDigest, ok := strings.CutPrefix(digest, "sha256:")
	if !ok {
		t.Fatalf("digest %q is not sha256", digest)
	}
	b, err := os.ReadFile(filepath.Join(dir, "blobs", "sha256", hexDigest))
	if err != nil {
		t.Fatal(err)
	}
	if sum := sha256.Sum256(b); hex.EncodeToString(sum[:]) != hexDigest {
		t.Fatalf("blob %s has digest sha256:%x", digest, sum)
	}
	return b
}

// imageIndex is the layout's one index: its digest and per-platform
// manifests.
func imageIndex(t *testing.T, dir string) (string, []descriptor) {
	t.Helper()
	var top struct{ Manifests []descriptor }
	b, err := os.ReadFile(filepath.Join(dir, "index.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &top); err != nil {
		t.Fatal(err)
	}
	if len(top.Manifests) != 1 || top.Manifests[0].MediaType != "application/vnd.oci.image.index.v1+json" {
		t.Fatalf("index.json: %+v, want one image index", top.Manifests)
	}
	ref := top.Manifests[0].Annotations
	if want := "ghcr.io/cloud-provider-baremetal/" + name + ":" + *version; ref["io.containerd.image.name"] != want || ref["org.opencontainers.image.ref.name"] != *version {
		t.Errorf("the index is named %v, want %s", ref, want)
	}
	var idx struct{ Manifests []descriptor }
	if err := json.Unmarshal(blob(t, dir, top.Manifests[0].Digest), &idx); err != nil {
		t.Fatal(err)
	}
	return top.Manifests[0].Digest, idx.Manifests
}

// binaryOf is the CCM's binary in an image's one layer.
func binaryOf(t *testing.T, dir string, manifest descriptor) (arch string, bin []byte) {
	t.Helper()
	var m struct {
		Config descriptor
		Layers []descriptor
	}
	if err := json.Unmarshal(blob(t, dir, manifest.Digest), &m); err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		OS, Architecture string
		Config           struct {
			User       string
			Entrypoint []string
		}
	}
	if err := json.Unmarshal(blob(t, dir, m.Config.Digest), &cfg); err != nil {
		t.Fatal(err)
	}
	entry := "/usr/local/bin/" + name
	if cfg.OS != "linux" || cfg.Config.User != "65532:65532" || !slices.Equal(cfg.Config.Entrypoint, []string{entry}) || len(m.Layers) != 1 {
		t.Errorf("image %s: os %s, user %q, entrypoint %v, %d layers; want linux, nonroot, %s, one layer",
			manifest.Digest, cfg.OS, cfg.Config.User, cfg.Config.Entrypoint, len(m.Layers), entry)
	}
	zr, err := gzip.NewReader(bytes.NewReader(blob(t, dir, m.Layers[0].Digest)))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err != nil {
			t.Fatalf("no %s in the layer of %s: %v", entry, manifest.Digest, err)
		}
		if "/"+h.Name == entry {
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			return cfg.Architecture, b
		}
	}
}

func TestDist(t *testing.T) {
	if _, err := os.Stat(dist("SHA256SUMS")); err != nil {
		t.Fatalf("no dist/ (make release VERSION=%s): %v", *version, err)
	}
	chartVersion := strings.TrimPrefix(*version, "v")
	chart := dist(name + "-" + chartVersion + ".tgz")

	t.Run("the checksums verify and cover every file", func(t *testing.T) {
		run(t, dist(), "sha256sum", "--check", "--strict", "--quiet", "SHA256SUMS")
		sums := run(t, dist(), "cat", "SHA256SUMS")
		for _, f := range []string{name + "-linux-amd64", name + "-linux-arm64", "image.oci.tar", "image/index.json", filepath.Base(chart), "sbom.cdx.json", "manifests/deployment.yaml", "manifests/static-pod.yaml"} {
			if !strings.Contains(sums, "  "+f+"\n") {
				t.Errorf("SHA256SUMS does not cover %s", f)
			}
		}
	})

	digest, manifests := imageIndex(t, dist("image"))
	t.Run("the index holds both platforms, each with its own machine's static binary", func(t *testing.T) {
		machines := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}
		var platforms []string
		for _, m := range manifests {
			if m.Platform == nil {
				t.Fatalf("manifest %s has no platform", m.Digest)
			}
			platforms = append(platforms, m.Platform.OS+"/"+m.Platform.Architecture)
			arch, bin := binaryOf(t, dist("image"), m)
			if arch != m.Platform.Architecture {
				t.Errorf("the %s image's config says %s", m.Platform.Architecture, arch)
			}
			f, err := elf.NewFile(bytes.NewReader(bin))
			if err != nil {
				t.Fatalf("the %s image's binary: %v", arch, err)
			}
			if f.Machine != machines[arch] {
				t.Errorf("the %s image's binary is an ELF for %v", arch, f.Machine)
			}
			for _, p := range f.Progs {
				if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
					t.Errorf("the %s image's binary is dynamically linked", arch)
				}
			}
			released, err := os.ReadFile(dist(name + "-linux-" + arch))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(bin, released) {
				t.Errorf("the %s image's binary is not dist/%s-linux-%s", arch, name, arch)
			}
		}
		slices.Sort(platforms)
		if !slices.Equal(platforms, []string{"linux/amd64", "linux/arm64"}) {
			t.Errorf("the index's platforms: %v", platforms)
		}
	})

	t.Run("both binaries print the version and the Kubernetes release", func(t *testing.T) {
		if err := framework.EnsureCommands(map[string]string{"qemu-aarch64-static": "qemu-user-static"}); err != nil {
			t.Fatal(err)
		}
		for _, cmd := range [][]string{
			{dist(name + "-linux-amd64"), "--version"},
			{"qemu-aarch64-static", dist(name + "-linux-arm64"), "--version"},
		} {
			out := strings.TrimSpace(run(t, dist(), cmd...))
			if want := name + " v1.37.2+baremetal." + *version; out != want {
				t.Errorf("%s: %q, want %q (Kubernetes v1.37.2, the project's %s)", strings.Join(cmd, " "), out, want, *version)
			}
		}
	})

	helm := func(args ...string) string {
		t.Helper()
		out, err := framework.Helm(t, "/dev/null", args...)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	image := "ghcr.io/cloud-provider-baremetal/" + name + ":" + *version
	t.Run("the chart is versioned from the tag, lints, and runs the released image", func(t *testing.T) {
		var meta struct{ Version, AppVersion string }
		if err := sigsyaml.Unmarshal([]byte(helm("show", "chart", chart)), &meta); err != nil {
			t.Fatal(err)
		}
		if meta.Version != chartVersion || meta.AppVersion != *version {
			t.Errorf("the chart is %s with appVersion %s, want %s and %s", meta.Version, meta.AppVersion, chartVersion, *version)
		}
		helm("lint", "--strict", chart)
		if out := helm("template", chart, "--kube-version", "1.37.2"); !strings.Contains(out, "image: "+image+"\n") {
			t.Errorf("the chart does not run %s by default", image)
		}
		if out := helm("template", chart, "--kube-version", "1.37.2", "--set", "image.digest="+digest); !strings.Contains(out, "image: "+image+"@"+digest+"\n") {
			t.Errorf("with image.digest the chart does not run %s@%s", image, digest)
		}
		for _, f := range []string{"deployment.yaml", "static-pod.yaml"} {
			b, err := os.ReadFile(dist("manifests", f))
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(b), "image: "+image+"@"+digest+"\n") {
				t.Errorf("dist/manifests/%s does not pin %s@%s", f, image, digest)
			}
		}
	})

	t.Run("the SBOM lists the binary's modules, the same for both architectures", func(t *testing.T) {
		components := func(path string) []string {
			t.Helper()
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			var bom struct {
				BOMFormat  string
				Metadata   struct{ Component struct{ Name string } }
				Components []struct{ Name, Version string }
			}
			if err := json.Unmarshal(b, &bom); err != nil {
				t.Fatal(err)
			}
			if bom.BOMFormat != "CycloneDX" || bom.Metadata.Component.Name != "github.com/cloud-provider-baremetal/cloud-provider-baremetal" {
				t.Errorf("%s: format %q of %q", path, bom.BOMFormat, bom.Metadata.Component.Name)
			}
			var out []string
			for _, c := range bom.Components {
				out = append(out, c.Name+"@"+c.Version)
			}
			slices.Sort(out)
			return out
		}
		amd64 := components(dist("sbom.cdx.json"))
		for _, want := range []string{"k8s.io/cloud-provider@v0.37.2", "github.com/osrg/gobgp/v4@", "k8s.io/client-go@v0.37.2"} {
			if !slices.ContainsFunc(amd64, func(c string) bool { return strings.HasPrefix(c, want) }) {
				t.Errorf("the SBOM does not list %s", want)
			}
		}
		arm64 := filepath.Join(t.TempDir(), "arm64.cdx.json")
		cmd := exec.Command(filepath.Join(framework.ToolsBin(), "cyclonedx-gomod"), "app", "-json", "-licenses", "-noserial", "-notimestamp", "-main", "cmd/"+name, "-output", arm64, ".")
		cmd.Dir = framework.RepoRoot()
		cmd.Env = append(os.Environ(), "GOOS=linux", "GOARCH=arm64", "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		if got := components(arm64); !slices.Equal(got, amd64) {
			t.Errorf("arm64's modules differ from amd64's, which the one SBOM lists: %d against %d", len(got), len(amd64))
		}
	})

	t.Run("the same commit builds the same release", func(t *testing.T) {
		again := t.TempDir()
		cmd := exec.Command("make", "release", "VERSION="+*version, "DIST="+again)
		cmd.Dir = framework.RepoRoot()
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		if d, _ := imageIndex(t, filepath.Join(again, "image")); d != digest {
			t.Errorf("the second build's image index is %s, the first's %s", d, digest)
		}
		for _, f := range []string{name + "-linux-amd64", name + "-linux-arm64", "image.oci.tar", "sbom.cdx.json", "manifests/deployment.yaml"} {
			a, errA := os.ReadFile(dist(f))
			b, errB := os.ReadFile(filepath.Join(again, f))
			if errA != nil || errB != nil || !bytes.Equal(a, b) {
				t.Errorf("%s differs between two builds of one commit (%v, %v)", f, errA, errB)
			}
		}
		fmt.Println("image index", digest, "built twice, the same")
	})
}
