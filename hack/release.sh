#!/bin/sh
# make release VERSION=vX.Y.Z: everything a release publishes, in dist/.
#   baremetal-cloud-controller-manager-linux-{amd64,arm64}  static binaries
#   image/                     the OCI image layout: one index, both platforms
#   image.oci.tar              the same layout as one tar (ctr images import)
#   baremetal-cloud-controller-manager-X.Y.Z.tgz  the chart (helm package)
#   manifests/                 deploy/'s manifests, the image pinned by tag and digest
#   sbom.cdx.json              the binaries' modules, CycloneDX (cyclonedx-gomod)
#   SHA256SUMS                 over every file above
# Nothing is pushed: .github/workflows/release.yaml pushes the image and the
# chart from dist/ on a tag. The same commit gives the same binaries and
# image digests (hack/release_test.sh builds twice and compares).
set -eu
cd "$(dirname "$0")/.."
version=${VERSION:?VERSION=vX.Y.Z}
if ! echo "$version" | grep -Eq '^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?$'; then
	echo "VERSION=$version is not a semver tag (vMAJOR.MINOR.PATCH[-PRERELEASE])" >&2
	exit 1
fi
: "${GO:=go}" "${LDFLAGS:?LDFLAGS from the Makefile}" "${IMAGE_REPO:?IMAGE_REPO from the Makefile}"
bin=hack/tools/bin
dist=${DIST:-dist}
name=baremetal-cloud-controller-manager
chart_version=${version#v}
rm -rf "$dist"
mkdir -p "$dist/manifests"

for arch in amd64 arm64; do
	CGO_ENABLED=0 GOOS=linux GOARCH=$arch "$GO" build -trimpath -buildvcs=false -ldflags "$LDFLAGS" \
		-o "$dist/$name-linux-$arch" ./cmd/$name
done

commit=$(git rev-parse HEAD)
"$bin/image" -binary "$name" -tag "$IMAGE_REPO:$version" -oci "$dist/image" \
	-platform "linux/amd64=$dist/$name-linux-amd64" -platform "linux/arm64=$dist/$name-linux-arm64" \
	-annotation "org.opencontainers.image.version=$version" \
	-annotation "org.opencontainers.image.revision=$commit" \
	-annotation "org.opencontainers.image.source=https://github.com/cloud-provider-baremetal/cloud-provider-baremetal" \
	-annotation "org.opencontainers.image.licenses=Apache-2.0" >/dev/null
# One tar of the layout, in a fixed order with fixed owners and times.
tar -C "$dist/image" --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -cf "$dist/image.oci.tar" .
digest=$(sed -n 's/.*"digest": *"\(sha256:[0-9a-f]*\)".*/\1/p' "$dist/image/index.json" | head -1)

# The chart, versioned from the tag; its image defaults to the tag.
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp -r "deploy/chart/$name" "$work/$name"
sed -i -e "s/^version: .*/version: $chart_version/" -e "s/^appVersion: .*/appVersion: $version/" "$work/$name/Chart.yaml"
"$bin/helm" package "$work/$name" --destination "$dist" >/dev/null

# The plain manifests of deploy/, rendered from the packaged chart with the
# image pinned by tag and digest.
tgz="$dist/$name-$chart_version.tgz"
render() {
	"$bin/helm" template "$name" "$tgz" --kube-version 1.37.2 --namespace kube-system --set "image.digest=$digest" "$@"
}
for f in rbac deployment load-balancer-finalizer; do
	{ echo "# $name $version: $f.yaml (the chart rendered with its defaults; the image pinned by digest)"; render --show-only "templates/$f.yaml"; } >"$dist/manifests/$f.yaml"
done
{ echo "# $name $version: static-pod-rbac.yaml"; render --show-only templates/rbac.yaml --set rbac.staticPodUser=true; } >"$dist/manifests/static-pod-rbac.yaml"
sed "s|image: .*$name:.*|image: $IMAGE_REPO:$version@$digest|" deploy/static-pod.yaml >"$dist/manifests/static-pod.yaml"
cp deploy/l2-patch.yaml deploy/cloud-config.example.yaml "$dist/manifests/"

# The modules built into the binary (the same for both architectures: no
# module is selected by GOARCH; the test checks).
GOOS=linux GOARCH=amd64 CGO_ENABLED=0 "$bin/cyclonedx-gomod" app -json -licenses -noserial -notimestamp \
	-main "cmd/$name" -output "$dist/sbom.cdx.json" . 2>/dev/null

(cd "$dist" && find . -type f ! -name SHA256SUMS | sed 's|^\./||' | LC_ALL=C sort | xargs sha256sum >SHA256SUMS)
echo "dist/: $name $version, image $IMAGE_REPO:$version@$digest"
