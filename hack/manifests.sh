#!/bin/sh
# deploy/rbac.yaml, deploy/deployment.yaml and
# deploy/load-balancer-finalizer.yaml are the Helm chart rendered with its
# default values, and deploy/static-pod-rbac.yaml its rights with the
# static pod's user bound too, so that the chart and the plain manifests
# cannot part.
#   hack/manifests.sh          writes them
#   hack/manifests.sh --check  fails if they differ from the chart
set -eu
cd "$(dirname "$0")/.."
helm=hack/tools/bin/helm
chart=deploy/chart/baremetal-cloud-controller-manager
out=deploy
if [ "${1:-}" = --check ]; then
	out=$(mktemp -d)
	trap 'rm -rf "$out"' EXIT
fi
for f in rbac deployment load-balancer-finalizer; do
	{
		echo "# Rendered from $chart by 'make manifests'; edit the chart, not this file."
		"$helm" template baremetal-cloud-controller-manager "$chart" --kube-version 1.37.2 --namespace kube-system --show-only "templates/$f.yaml"
	} >"$out/$f.yaml"
done
{
	echo "# Rendered from $chart (rbac.staticPodUser=true) by 'make manifests'; edit the chart, not this file."
	echo "# deploy/rbac.yaml's rights, also bound to the user system:cloud-controller-manager of a static pod."
	"$helm" template baremetal-cloud-controller-manager "$chart" --kube-version 1.37.2 --namespace kube-system --show-only templates/rbac.yaml --set rbac.staticPodUser=true
} >"$out/static-pod-rbac.yaml"
if [ "${1:-}" = --check ]; then
	for f in rbac static-pod-rbac deployment load-balancer-finalizer; do
		if ! diff -u "deploy/$f.yaml" "$out/$f.yaml"; then
			echo "deploy/$f.yaml is not what the chart renders: run make manifests" >&2
			exit 1
		fi
	done
fi
