// Command image builds the CCM's container image from its static binary,
// without Docker: the content of the Dockerfile's (the binary, a non-root
// user, no shell), written as a tarball that `ctr images import` and
// `docker load` read.
package main

import (
	"archive/tar"
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// Where the binary goes and who runs it: as in the Dockerfile (distroless
// static, user nonroot).
const (
	binaryPath = "usr/local/bin/baremetal-cloud-controller-manager"
	user       = "65532:65532"
	passwd     = "root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"
	group      = "root:x:0:\nnonroot:x:65532:\n"
)

func main() {
	binary := flag.String("binary", "bin/baremetal-cloud-controller-manager", "the static binary")
	tag := flag.String("tag", "ghcr.io/cloud-provider-baremetal/baremetal-cloud-controller-manager:latest", "the image's name")
	out := flag.String("out", "bin/baremetal-cloud-controller-manager-image.tar", "the tarball to write")
	flag.Parse()
	if err := build(*binary, *tag, *out); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
	fmt.Printf("wrote %s (%s)\n", *out, *tag)
}

func build(binary, tag, out string) error {
	ref, err := name.NewTag(tag)
	if err != nil {
		return fmt.Errorf("image name %q: %w", tag, err)
	}
	bin, err := os.ReadFile(binary)
	if err != nil {
		return err
	}
	img, err := image(bin)
	if err != nil {
		return err
	}
	return tarball.WriteToFile(out, ref, img)
}

// image is one layer, the binary and the user database, with the config
// that runs the binary as nonroot.
func image(bin []byte) (v1.Image, error) {
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar(bin))), nil
	})
	if err != nil {
		return nil, err
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return nil, err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture = "linux", runtime.GOARCH
	cfg.Config.Entrypoint = []string{"/" + binaryPath}
	cfg.Config.User = user
	cfg.Config.Env = []string{"PATH=/usr/local/bin"}
	return mutate.ConfigFile(img, cfg)
}

// layerTar is the layer's content; fixed times keep the image the same
// for the same binary.
func layerTar(bin []byte) []byte {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	epoch := time.Unix(0, 0)
	dir := func(name string, mode int64, uid int) {
		tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name, Mode: mode, Uid: uid, Gid: uid, ModTime: epoch})
	}
	file := func(name string, mode int64, data []byte) {
		tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Size: int64(len(data)), ModTime: epoch})
		tw.Write(data)
	}
	for _, d := range []string{"etc/", "usr/", "usr/local/", "usr/local/bin/"} {
		dir(d, 0o755, 0)
	}
	dir("home/", 0o755, 0)
	dir("home/nonroot/", 0o700, 65532)
	dir("tmp/", 0o1777, 0)
	file("etc/passwd", 0o644, []byte(passwd))
	file("etc/group", 0o644, []byte(group))
	file(binaryPath, 0o755, bin)
	tw.Close()
	return buf.Bytes()
}
