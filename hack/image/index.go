package main

import (
	"fmt"
	"os"
	"path"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// buildIndex writes an OCI image layout at dir with one image index: an
// image per platform ("linux/arm64=path/to/binary"), each as build makes
// it, in OCI media types. The index carries the name as
// io.containerd.image.name (ctr images import names it so) and its tag as
// org.opencontainers.image.ref.name (crane and oras select by it).
func buildIndex(s spec, platforms, annotations []string, dir string) error {
	ref, err := name.NewTag(s.tag)
	if err != nil {
		return fmt.Errorf("image name %q: %w", s.tag, err)
	}
	if len(platforms) == 0 {
		return fmt.Errorf("-oci needs at least one -platform os/arch=binary")
	}
	var idx v1.ImageIndex = mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, p := range platforms {
		plat, binary, ok := strings.Cut(p, "=")
		osName, arch, ok2 := strings.Cut(plat, "/")
		if !ok || !ok2 || osName != "linux" {
			return fmt.Errorf("-platform %q: want linux/<arch>=<binary>", p)
		}
		bin, err := os.ReadFile(binary)
		if err != nil {
			return err
		}
		img, err := image(map[string][]byte{binDir + path.Base(s.binary): bin}, "/"+binDir+path.Base(s.binary), s, arch)
		if err != nil {
			return err
		}
		img = mutate.ConfigMediaType(mutate.MediaType(img, types.OCIManifestSchema1), types.OCIConfigJSON)
		if img, err = ociLayers(img); err != nil {
			return err
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img,
			Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: osName, Architecture: arch}}})
	}
	indexAnnotations := map[string]string{}
	for _, a := range annotations {
		k, v, ok := strings.Cut(a, "=")
		if !ok {
			return fmt.Errorf("-annotation %q: want key=value", a)
		}
		indexAnnotations[k] = v
	}
	if len(indexAnnotations) > 0 {
		idx = mutate.Annotations(idx, indexAnnotations).(v1.ImageIndex)
	}
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	lp, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	return lp.AppendIndex(idx, layout.WithAnnotations(map[string]string{
		"io.containerd.image.name":          ref.Name(),
		"org.opencontainers.image.ref.name": ref.TagStr(),
	}))
}

// ociLayers gives the image's layers the OCI media type.
func ociLayers(img v1.Image) (v1.Image, error) {
	layers, err := img.Layers()
	if err != nil {
		return nil, err
	}
	base := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	for _, l := range layers {
		if base, err = mutate.Append(base, mutate.Addendum{Layer: l, MediaType: types.OCILayer}); err != nil {
			return nil, err
		}
	}
	return mutate.ConfigFile(base, cfg)
}
