// Command image builds a container image from a static binary, without
// Docker, as a tarball that `ctr images import` and `docker load` read.
// By default it is the CCM's image, the Dockerfile's content: the binary,
// a non-root user, no shell. The real-cluster tests build the Kubernetes
// components' images the same way (-user 0:0), and kube-proxy's with the
// Debian nft it runs (-with, which adds a host file and the shared
// libraries it loads).
//
// With -oci and one -platform per architecture it writes the release's
// multi-platform image instead: an OCI image layout (what `crane push`,
// `oras cp --from-oci-layout` and `ctr images import` read) holding one
// index of an image per platform. The same binaries give the same digests.
package main

import (
	"archive/tar"
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"path"
	"runtime"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// Who runs the binary by default: as in the Dockerfile (distroless static,
// user nonroot).
const (
	nonroot = "65532:65532"
	passwd  = "root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"
	group   = "root:x:0:\nnonroot:x:65532:\n"
	binDir  = "usr/local/bin/"
)

// spec is one image.
type spec struct {
	binary string   // goes to /usr/local/bin/<its name>, the entrypoint
	path   string   // or here
	tag    string   // the image's name
	user   string   // uid:gid
	with   []string // host files added at their own paths, with their libraries
	cmd    []string // the entrypoint's default arguments
}

type list []string

func (l *list) String() string     { return strings.Join(*l, ",") }
func (l *list) Set(s string) error { *l = append(*l, s); return nil }

func main() {
	var s spec
	var with list
	flag.StringVar(&s.binary, "binary", "bin/baremetal-cloud-controller-manager", "the static binary")
	flag.StringVar(&s.tag, "tag", "ghcr.io/cloud-provider-baremetal/baremetal-cloud-controller-manager:dev", "the image's name")
	flag.StringVar(&s.user, "user", nonroot, "the user (uid:gid) that runs the binary")
	flag.StringVar(&s.path, "path", "", "where the binary goes in the image (default: /usr/local/bin/ and its name)")
	flag.Var(&with, "with", "a host file to add at its own path with the shared libraries it loads (repeatable)")
	var cmd list
	flag.Var(&cmd, "cmd", "a default argument of the entrypoint, as a Dockerfile's CMD (repeatable)")
	out := flag.String("out", "bin/baremetal-cloud-controller-manager-image.tar", "the tarball to write")
	var platforms list
	flag.Var(&platforms, "platform", "with -oci: os/arch=binary, one per platform of the index (repeatable)")
	oci := flag.String("oci", "", "write a multi-platform OCI image layout to this directory instead of a tarball")
	var annotations list
	flag.Var(&annotations, "annotation", "with -oci: key=value on the index (repeatable)")
	flag.Parse()
	s.with, s.cmd = with, cmd
	var err error
	if *oci != "" {
		err = buildIndex(s, platforms, annotations, *oci)
		*out = *oci
	} else {
		err = build(s, *out)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
	fmt.Printf("wrote %s (%s)\n", *out, s.tag)
}

func build(s spec, out string) error {
	ref, err := name.NewTag(s.tag)
	if err != nil {
		return fmt.Errorf("image name %q: %w", s.tag, err)
	}
	files := map[string][]byte{}
	bin, err := os.ReadFile(s.binary)
	if err != nil {
		return err
	}
	entry := binDir + path.Base(s.binary)
	if s.path != "" {
		entry = strings.TrimPrefix(path.Clean(s.path), "/")
	}
	files[entry] = bin
	for _, f := range s.with {
		if err := addWithLibraries(files, f); err != nil {
			return err
		}
	}
	img, err := image(files, "/"+entry, s, runtime.GOARCH)
	if err != nil {
		return err
	}
	return tarball.WriteToFile(out, ref, img)
}

// image is one layer, the files and the user database, with the config
// that runs entry, with s's default arguments, as s's user.
func image(files map[string][]byte, entry string, s spec, arch string) (v1.Image, error) {
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar(files))), nil
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
	cfg.OS, cfg.Architecture = "linux", arch
	cfg.Config.Entrypoint = []string{entry}
	cfg.Config.Cmd = s.cmd
	cfg.Config.User = s.user
	cfg.Config.Env = []string{"PATH=/usr/local/bin:/usr/sbin:/usr/bin"}
	return mutate.ConfigFile(img, cfg)
}

// layerTar is the layer's content; fixed times keep the image the same
// for the same files.
func layerTar(files map[string][]byte) []byte {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	epoch := time.Unix(0, 0)
	dirs := map[string]bool{}
	dir := func(name string, mode int64, uid int) {
		dirs[name] = true
		tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name, Mode: mode, Uid: uid, Gid: uid, ModTime: epoch})
	}
	dir("etc/", 0o755, 0)
	dir("home/", 0o755, 0)
	dir("home/nonroot/", 0o700, 65532)
	dir("tmp/", 0o1777, 0)
	all := map[string][]byte{"etc/passwd": []byte(passwd), "etc/group": []byte(group)}
	for n, data := range files {
		all[n] = data
	}
	for _, n := range sortedKeys(all) {
		var parents []string
		for d := path.Dir(n); d != "."; d = path.Dir(d) {
			parents = append([]string{d + "/"}, parents...)
		}
		for _, d := range parents {
			if !dirs[d] {
				dir(d, 0o755, 0)
			}
		}
		mode := int64(0o644)
		if strings.HasPrefix(n, binDir) || isELF(all[n]) {
			mode = 0o755
		}
		tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: n, Mode: mode, Size: int64(len(all[n])), ModTime: epoch})
		tw.Write(all[n])
	}
	tw.Close()
	return buf.Bytes()
}
