# baremetal-cloud-controller-manager

GO        ?= go
BIN_DIR   ?= bin
TOOLS_BIN := hack/tools/bin
BINARY    := $(BIN_DIR)/baremetal-cloud-controller-manager
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo unknown)
COMMIT    ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
# The commit's time, not the build's: the same commit builds the same
# binary (and the release the same image digests).
BUILD_DATE ?= $(shell date -u -d @$$(git log -1 --format=%ct 2>/dev/null || echo 0) +%Y-%m-%dT%H:%M:%SZ)
# The component-base version is the Kubernetes release the binary is built
# on (feature gates and compatibility checks parse it); the project's own
# version goes in the build metadata.
K8S_VERSION := v1.37.2
LDFLAGS := -s -w \
	-X k8s.io/component-base/version/verflag.programName=baremetal-cloud-controller-manager \
	-X k8s.io/component-base/version.gitVersion=$(K8S_VERSION)+baremetal.$(subst -,.,$(VERSION)) \
	-X k8s.io/component-base/version.gitCommit=$(COMMIT) \
	-X k8s.io/component-base/version.gitTreeState=$(if $(findstring dirty,$(VERSION)),dirty,clean) \
	-X k8s.io/component-base/version.buildDate=$(BUILD_DATE) \
	-X k8s.io/client-go/pkg/version.gitVersion=$(K8S_VERSION)+baremetal.$(subst -,.,$(VERSION)) \
	-X k8s.io/client-go/pkg/version.gitCommit=$(COMMIT)



# Every go command here (builds, tests, vet, go run) compiles with the same
# settings as the release's build, static and with trimmed paths, so that
# a package is compiled once for all of them: a test binary built with cgo
# would compile net, and everything above it (most of k8s.io), a second
# time.
export CGO_ENABLED := 0
export GOFLAGS := -trimpath $(shell go env GOFLAGS 2>/dev/null)

# How many inputs `make test` tries on each fuzz target (about 10 s each
# here); longer: make fuzz FUZZTIME=1000000x. A count, not a duration: Go
# 1.26's fuzzing coordinator can fail a duration run at its deadline with
# "context deadline exceeded" and no failing input (go.dev/issue/75804).
FUZZTIME ?= 40000x

.PHONY: minor-tools minors-test previous all build control-plane tools manifests node-tools e2e-tools conformance cluster-images cluster cluster-down cluster-test test unit integration chaos e2e fuzz bench lint demo clean image release release-test release-tools chart-docs

all: build

build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BINARY) ./cmd/baremetal-cloud-controller-manager

# The test control plane, built from Go modules (hack/tools/go.mod), and
# the clients the tests use; a no-op once built. Each group is one go
# build, which shares the packages its binaries have in common.
CONTROL_PLANE := $(TOOLS_BIN)/kube-apiserver $(TOOLS_BIN)/etcd
CLIENTS := $(TOOLS_BIN)/kubectl $(TOOLS_BIN)/kubeadm
control-plane: $(CONTROL_PLANE)
tools: $(CONTROL_PLANE) $(CLIENTS)

# They report the release they are built from (kubeadm checks the versions
# of what it runs against its own); without a symbol table and DWARF, as
# upstream builds its releases (the link is quicker and nothing here
# debugs them).
# -trimpath and CGO_ENABLED=0 as the CCM's build: the packages they have in
# common with it (most of k8s.io) are then compiled once for all of them.
# $(call tools_ldflags,RELEASE): the flags for the tools of a Kubernetes
# release v1.N.P.
tools_ldflags = -trimpath -ldflags '-s -w -X k8s.io/component-base/version.gitVersion=$(1) -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$(word 2,$(subst ., ,$(1))) -X k8s.io/component-base/version.gitTreeState=clean'
TOOLS_LDFLAGS := $(call tools_ldflags,$(K8S_VERSION))

# Static, as the same binaries go into the real-cluster tests' images.
$(CONTROL_PLANE) &: hack/tools/go.mod hack/tools/go.sum hack/tools/etcd/main.go
	cd hack/tools && CGO_ENABLED=0 $(GO) build $(TOOLS_LDFLAGS) -o bin/ k8s.io/kubernetes/cmd/kube-apiserver ./etcd

$(CLIENTS) &: hack/tools/go.mod hack/tools/go.sum
	cd hack/tools && CGO_ENABLED=0 $(GO) build $(TOOLS_LDFLAGS) -o bin/ $(addprefix k8s.io/kubernetes/cmd/,$(notdir $(CLIENTS)))

# Helm, from its Go module (its own go.mod: it pins the k8s.io modules it
# was released with).
HELM := $(TOOLS_BIN)/helm
$(HELM): hack/helm/go.mod hack/helm/go.sum
	cd hack/helm && CGO_ENABLED=0 $(GO) build -trimpath -ldflags '-s -w -X helm.sh/helm/v4/internal/version.version=v4.3.2' -o ../tools/bin/helm helm.sh/helm/v4/cmd/helm

# MetalLB's controller and speaker, for the migration test (test/e2e's
# TestMetalLBCutOver); their CRDs are read from the module cache.
METALLB := $(TOOLS_BIN)/metallb-controller $(TOOLS_BIN)/metallb-speaker
$(TOOLS_BIN)/metallb-%: hack/metallb/go.mod hack/metallb/go.sum
	cd hack/metallb && CGO_ENABLED=0 $(GO) build -trimpath -ldflags '-s -w' -o ../tools/bin/metallb-$* go.universe.tf/metallb/$*

# deploy/rbac.yaml, deployment.yaml and load-balancer-finalizer.yaml are
# the chart (deploy/chart) rendered with its defaults; after editing the
# chart, write them again. The integration tests fail while they differ.
manifests: $(HELM)
	hack/manifests.sh

# The node stack of the real-cluster tests, in one go build so that the
# packages they share are built once; a no-op once built.
NODE_TOOLS := $(TOOLS_BIN)/kubelet $(TOOLS_BIN)/kube-proxy $(TOOLS_BIN)/kube-controller-manager $(TOOLS_BIN)/kube-scheduler
CONTAINERD := $(TOOLS_BIN)/containerd $(TOOLS_BIN)/containerd-shim-runc-v2 $(TOOLS_BIN)/ctr
node-tools: $(NODE_TOOLS) $(CONTAINERD)

$(NODE_TOOLS) &: hack/tools/go.mod hack/tools/go.sum
	cd hack/tools && CGO_ENABLED=0 $(GO) build $(TOOLS_LDFLAGS) -o bin/ $(addprefix k8s.io/kubernetes/cmd/,$(notdir $(NODE_TOOLS)))

$(CONTAINERD) &: hack/containerd/go.mod hack/containerd/go.sum
	cd hack/containerd && CGO_ENABLED=0 $(GO) build -tags 'no_btrfs no_devmapper no_zfs no_aufs no_erofs' \
		-ldflags '-s -w -X github.com/containerd/containerd/v2/version.Version=v2.4.2' \
		-o ../tools/bin/ $(addprefix github.com/containerd/containerd/v2/cmd/,$(notdir $(CONTAINERD)))

# The real cluster's images, built from the binaries above with hack/image
# under the names kubeadm v1.37.2 asks for (so nothing is ever pulled),
# plus the tests' server; kube-proxy's carries Debian's nft, which its
# nftables mode runs, and /etc/protocols, by which nft names protocols
# (without it nft lists "tcp" as 6, and a restarted kube-proxy deletes
# every Service element it reads back).
IMAGES_DIR := $(TOOLS_BIN)/images
IMAGE_TOOL := $(TOOLS_BIN)/image
CLUSTER_IMAGES := $(addprefix $(IMAGES_DIR)/,kube-apiserver.tar kube-controller-manager.tar kube-scheduler.tar kube-proxy.tar etcd.tar pause.tar echo.tar coredns.tar)
cluster-images: $(CLUSTER_IMAGES) image

$(IMAGE_TOOL): hack/image/go.mod hack/image/go.sum $(wildcard hack/image/*.go)
	cd hack/image && $(GO) build -o ../tools/bin/image .

$(TOOLS_BIN)/pause $(TOOLS_BIN)/echo: $(TOOLS_BIN)/%: test/cluster/images/%/main.go
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '-s -w' -o $@ ./test/cluster/images/$*

$(IMAGES_DIR)/kube-%.tar: $(TOOLS_BIN)/kube-% $(IMAGE_TOOL)
	@mkdir -p $(IMAGES_DIR)
	$(if $(filter proxy,$*),hack/debian-packages.sh /usr/sbin/nft=nftables /etc/protocols=netbase)
	$(IMAGE_TOOL) -binary $< -user 0:0 -tag registry.k8s.io/kube-$*:$(K8S_VERSION) -out $@ $(if $(filter proxy,$*),-with /usr/sbin/nft -with /etc/protocols)
$(IMAGES_DIR)/etcd.tar: $(TOOLS_BIN)/etcd $(IMAGE_TOOL)
	@mkdir -p $(IMAGES_DIR)
	$(IMAGE_TOOL) -binary $< -user 0:0 -tag registry.k8s.io/etcd:3.7.0-0 -out $@
$(IMAGES_DIR)/pause.tar: $(TOOLS_BIN)/pause $(IMAGE_TOOL)
	@mkdir -p $(IMAGES_DIR)
	$(IMAGE_TOOL) -binary $< -user 65535:65535 -tag registry.k8s.io/pause:3.10.2 -out $@
# agnhost, the server and client of upstream's network e2e tests, under
# the name its e2e.test asks for; they exec sh, curl, wget and nc in it
# (OpenBSD's netcat, as upstream's image has); the dual-stack specs also
# run `sleep` as a pod's command and pipe curl through `grep`. Without
# arguments it pauses, as upstream's image does (its CMD): specs start
# pods of it with no command and wait for them to stay running.
$(IMAGES_DIR)/agnhost.tar: $(TOOLS_BIN)/agnhost $(IMAGE_TOOL)
	@mkdir -p $(IMAGES_DIR)
	hack/debian-packages.sh /usr/bin/curl=curl /usr/bin/wget=wget /usr/bin/nc=netcat-openbsd
	$(IMAGE_TOOL) -binary $< -path /agnhost -user 0:0 -tag registry.k8s.io/e2e-test-images/agnhost:2.66.1 -cmd pause -out $@ -with /bin/sh -with /bin/sleep -with /bin/grep -with /usr/bin/curl -with /usr/bin/wget -with /usr/bin/nc

# The cluster's DNS, as kubeadm v1.37.2 installs it, from CoreDNS's Go module
# (its own go.mod: its dependencies are not the ones hack/tools pins).
$(TOOLS_BIN)/coredns: hack/coredns/go.mod hack/coredns/go.sum
	cd hack/coredns && CGO_ENABLED=0 $(GO) build -o ../tools/bin/coredns github.com/coredns/coredns
$(IMAGES_DIR)/coredns.tar: $(TOOLS_BIN)/coredns $(IMAGE_TOOL)
	@mkdir -p $(IMAGES_DIR)
	$(IMAGE_TOOL) -binary $< -path /coredns -user 0:0 -tag registry.k8s.io/coredns/coredns:v1.14.6 -out $@

# Upstream's e2e suite (test/e2e of k8s.io/kubernetes), its ginkgo runner
# and agnhost, from the module hack/tools pins.
E2E_TOOLS := $(TOOLS_BIN)/e2e.test $(TOOLS_BIN)/ginkgo $(TOOLS_BIN)/agnhost
e2e-tools: $(E2E_TOOLS) $(IMAGES_DIR)/agnhost.tar

$(TOOLS_BIN)/ginkgo $(TOOLS_BIN)/agnhost &: hack/tools/go.mod hack/tools/go.sum
	cd hack/tools && CGO_ENABLED=0 $(GO) build -trimpath -o bin/ github.com/onsi/ginkgo/v2/ginkgo k8s.io/kubernetes/test/images/agnhost

$(TOOLS_BIN)/e2e.test: hack/tools/go.mod hack/tools/go.sum
	cd hack/tools && CGO_ENABLED=0 $(GO) test -c $(TOOLS_LDFLAGS) -o bin/e2e.test k8s.io/kubernetes/test/e2e

$(IMAGES_DIR)/echo.tar: $(TOOLS_BIN)/echo $(IMAGE_TOOL)
	@mkdir -p $(IMAGES_DIR)
	$(IMAGE_TOOL) -binary $< -tag baremetal.test/echo:v1 -out $@

# The older Kubernetes minors a release supports (README "Kubernetes
# versions"): each one's control plane, node stack, kubeadm, kubectl and
# e2e.test from its own module (hack/tools/k8s-1.NN), in
# hack/tools/bin/k8s-1.NN beside links to the tools every minor shares
# (etcd, containerd, CoreDNS, helm, ...), with the images that minor's
# kubeadm and e2e.test ask for. The tests run on it when
# BAREMETAL_TOOLS_BIN names that directory (make minors-test).
MINORS := 1.36 1.35
RELEASE_OF_1.36 := v1.36.3
RELEASE_OF_1.35 := v1.35.4
AGNHOST_OF_1.36 := 2.63.0
AGNHOST_OF_1.35 := 2.59
# The chart's tests apply it as rendered with its defaults, which include
# the finalizer policy; 1.35 has no MutatingAdmissionPolicy (the chart
# refuses it there: TestHelmChartDayTwo).
INTEGRATION_SKIP_OF_1.35 := TestHelmChart
MINOR_KUBE := kube-apiserver kube-controller-manager kube-scheduler kube-proxy kubelet kubeadm kubectl
MINOR_TOOLS := $(foreach m,$(MINORS),$(TOOLS_BIN)/k8s-$(m)/.built)
minor-tools: $(MINOR_TOOLS)
$(TOOLS_BIN)/k8s-%/.built: hack/tools/k8s-%/go.mod hack/tools/k8s-%/go.sum | tools node-tools cluster-images e2e-tools
	$(eval M := $*)
	$(eval V := $(RELEASE_OF_$(M)))
	$(eval D := $(TOOLS_BIN)/k8s-$(M))
	$(eval FLAGS := $(call tools_ldflags,$(V)))
	mkdir -p $(D)/images
	cd hack/tools/k8s-$(M) && CGO_ENABLED=0 $(GO) build $(FLAGS) -o ../bin/k8s-$(M)/ $(addprefix k8s.io/kubernetes/cmd/,$(MINOR_KUBE)) k8s.io/kubernetes/test/images/agnhost github.com/onsi/ginkgo/v2/ginkgo
	cd hack/tools/k8s-$(M) && CGO_ENABLED=0 $(GO) test -c $(FLAGS) -o ../bin/k8s-$(M)/e2e.test k8s.io/kubernetes/test/e2e
	for f in $(TOOLS_BIN)/*; do n=$$(basename $$f); case $$n in k8s-*|images) continue;; esac; test -e $(D)/$$n || ln -s ../$$n $(D)/$$n; done
	for f in etcd pause echo coredns; do ln -sf ../../images/$$f.tar $(D)/images/$$f.tar; done
	for c in apiserver controller-manager scheduler proxy; do \
		$(IMAGE_TOOL) -binary $(D)/kube-$$c -user 0:0 -tag registry.k8s.io/kube-$$c:$(V) -out $(D)/images/kube-$$c.tar \
			$$( [ $$c = proxy ] && echo -with /usr/sbin/nft -with /etc/protocols ) || exit 1; done
	$(IMAGE_TOOL) -binary $(D)/agnhost -path /agnhost -user 0:0 -tag registry.k8s.io/e2e-test-images/agnhost:$(AGNHOST_OF_$(M)) -cmd pause -out $(D)/images/agnhost.tar -with /bin/sh -with /bin/sleep -with /bin/grep -with /usr/bin/curl -with /usr/bin/wget -with /usr/bin/nc
	echo $(V) > $@

# The release's and CI's tools, from their Go modules (hack/release/go.mod):
# actionlint for the workflows, helm-docs for the chart's README,
# cyclonedx-gomod for the SBOM.
RELEASE_TOOLS := $(TOOLS_BIN)/actionlint $(TOOLS_BIN)/helm-docs $(TOOLS_BIN)/cyclonedx-gomod
release-tools: $(RELEASE_TOOLS)
$(RELEASE_TOOLS) &: hack/release/go.mod hack/release/go.sum
	cd hack/release && CGO_ENABLED=0 $(GO) build -trimpath -o ../tools/bin/ \
		github.com/rhysd/actionlint/cmd/actionlint github.com/norwoodj/helm-docs/cmd/helm-docs github.com/CycloneDX/cyclonedx-gomod/cmd/cyclonedx-gomod

# The chart's README is generated from values.yaml; lint fails when it
# differs.
CHART := deploy/chart/baremetal-cloud-controller-manager
HELM_DOCS_FLAGS := -c deploy/chart --skip-version-footer -s file -l warning
chart-docs: $(TOOLS_BIN)/helm-docs
	$(TOOLS_BIN)/helm-docs $(HELM_DOCS_FLAGS)

lint: $(RELEASE_TOOLS)
	$(GO) vet ./...
	cd hack/tools && $(GO) vet ./...
	cd hack/image && $(GO) vet ./...
	@out=$$(gofmt -l cmd pkg test hack); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(TOOLS_BIN)/actionlint
	@$(TOOLS_BIN)/helm-docs $(HELM_DOCS_FLAGS) -d | diff -u $(CHART)/README.md - || { echo "$(CHART)/README.md is not what helm-docs makes of values.yaml: run make chart-docs"; exit 1; }

unit:
	$(GO) test ./pkg/... ./cmd/... ./test/docs/
	cd hack/image && $(GO) test ./...

# Benchmarks (not part of `make test`): make bench BENCHFLAGS="--runs=5 --idle=5m"
BENCHFLAGS ?=
bench: tools build
	$(GO) run ./test/perf $(BENCHFLAGS)

integration: tools build $(HELM)
	$(GO) test -count=1 -timeout 20m ./test/framework/ ./test/speaker/ ./test/integration/...

# Restarts, failover, API outage, peer restarts, bad input; full size:
# make chaos CHAOSFLAGS="-services=1000 -churn=500"
CHAOSFLAGS ?=
chaos: tools build
	$(GO) test -count=1 -timeout 30m ./test/chaos/... $(if $(CHAOSFLAGS),-args $(CHAOSFLAGS))

# Data path in network namespaces with FRR, and layer 2 pools on a bridge;
# needs root (installs frr). The full size of the restart test:
# make e2e E2EFLAGS="-restart-services=1000 -restart-nodes=100"
e2e: tools build $(METALLB)
	$(GO) test -count=1 -timeout 10m ./test/l2/...
	$(GO) test -count=1 -timeout 40m ./test/e2e/... $(if $(E2EFLAGS),-args $(E2EFLAGS))

# A real cluster: kubeadm, kubelets, containerd, kube-proxy and pods in
# network namespaces, the CCM run from deploy/ as a Deployment and as a
# static pod; needs root (installs runc, nftables, CNI plugins). Then a
# cluster made before a CCM (kubelets without --cloud-provider=external),
# adopted by docs/operations/adopt.md.
CLUSTERFLAGS ?=
cluster-test: tools $(HELM) node-tools cluster-images e2e-tools previous
	test -f $(DIST)/SHA256SUMS || $(MAKE) release VERSION=$(RELEASE)
	$(GO) test -count=1 -timeout 60m -skip TestAdoptingARunningCluster ./test/cluster/... $(if $(CLUSTERFLAGS),-args $(CLUSTERFLAGS))
	$(GO) test -count=1 -timeout 20m -run TestAdoptingARunningCluster ./test/cluster/ -args -lab-without-cloud-provider

# The integration suite and the lab cluster (kubeadm, kubelets, the CCM as
# a static pod and as a Deployment, and upstream's LoadBalancer and
# dual-stack specs that exist in that minor) on each older minor; make test
# runs them on the newest. The release workflow runs it for every tag.
MINORS_CLUSTER_TESTS := TestCCMAsAStaticPod|TestCCMAsADeployment
minors-test: $(MINOR_TOOLS) build $(HELM) previous
	test -f $(DIST)/SHA256SUMS || $(MAKE) release VERSION=$(RELEASE)
	$(foreach m,$(MINORS),echo "== Kubernetes $(m)" && \
		BAREMETAL_TOOLS_BIN=$(TOOLS_BIN)/k8s-$(m) $(GO) test -count=1 -timeout 20m $(if $(INTEGRATION_SKIP_OF_$(m)),-skip '$(INTEGRATION_SKIP_OF_$(m))') ./test/integration/... && \
		BAREMETAL_TOOLS_BIN=$(TOOLS_BIN)/k8s-$(m) $(GO) test -count=1 -timeout 40m -run '$(MINORS_CLUSTER_TESTS)' ./test/cluster/ && ) true

# The commit before this one, as a site runs it before an upgrade: its
# chart and its image (bin/previous/), which the real-cluster tests install
# and then upgrade to dist/. PREVIOUS names another commit or tag.
PREVIOUS ?= HEAD~1
PREVIOUS_DIR := $(BIN_DIR)/previous
previous: $(IMAGE_TOOL)
	rm -rf $(PREVIOUS_DIR) && mkdir -p $(PREVIOUS_DIR)/src
	git archive --format=tar $(PREVIOUS) | tar -x -C $(PREVIOUS_DIR)/src
	cd $(PREVIOUS_DIR)/src && CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(subst $(VERSION),previous,$(LDFLAGS))' -o ../baremetal-cloud-controller-manager ./cmd/baremetal-cloud-controller-manager
	$(IMAGE_TOOL) -binary $(PREVIOUS_DIR)/baremetal-cloud-controller-manager -tag $(IMAGE_REPO):previous -out $(PREVIOUS_DIR)/image.tar
	git rev-parse --short $(PREVIOUS) >$(PREVIOUS_DIR)/commit

# Upstream's LoadBalancer e2e suite ([Feature:LoadBalancer]) against the
# lab cluster with the CCM from deploy/, run from the lab's client behind
# the router; prints ginkgo's summary. Its parts that fit CI's budget run
# in cluster-test.
CONFORMANCEFLAGS ?=
conformance: tools node-tools cluster-images e2e-tools
	$(GO) run ./test/cluster/lab -workers 3 -conformance $(CONFORMANCEFLAGS)

# The same cluster for a person; Ctrl-C removes it. cluster-down cleans up
# after one that was killed.
cluster: tools node-tools cluster-images
	$(GO) run ./test/cluster/lab

cluster-down:
	$(GO) run ./test/cluster/lab -down

# Bounded fuzzing of the config parser and the annotation parsers; the seed
# corpus is in each package's testdata/fuzz.
fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzParse$$' -fuzztime $(FUZZTIME) ./pkg/config
	$(GO) test -run '^$$' -fuzz '^FuzzParseAddressRange$$' -fuzztime $(FUZZTIME) ./pkg/config
	$(GO) test -run '^$$' -fuzz '^FuzzAnnotations$$' -fuzztime $(FUZZTIME) ./pkg/annotations

test: lint unit fuzz integration chaos e2e release-test cluster-test

# make release VERSION=vX.Y.Z writes dist/ (hack/release.sh says what is in
# it); nothing is pushed. DIST puts it elsewhere.
DIST ?= dist
IMAGE_REPO := ghcr.io/cloud-provider-baremetal/baremetal-cloud-controller-manager
release: $(HELM) $(IMAGE_TOOL) $(TOOLS_BIN)/cyclonedx-gomod
	@case "$(VERSION)" in v*) ;; *) echo "make release VERSION=vX.Y.Z" >&2; exit 1;; esac
	GO='$(GO)' LDFLAGS='$(LDFLAGS)' IMAGE_REPO=$(IMAGE_REPO) VERSION=$(VERSION) DIST=$(DIST) hack/release.sh

# The release being made, named here only: the chart's version, the
# CHANGELOG's section, the docs' commands and deploy/'s images follow it
# (test/docs TestTheReleaseIsNamedOnce). make test builds and checks it
# (test/release), and the real-cluster tests install and upgrade to it.
RELEASE := v0.1.0
release-test:
	$(MAKE) release VERSION=$(RELEASE)
	$(GO) test -count=1 -timeout 20m ./test/release/ -args -version $(RELEASE)

# Needs root to install gobgpd (Debian's) when it is missing.
demo: control-plane build
	CGO_ENABLED=0 $(GO) run -trimpath ./hack/demo

# The image without Docker: the Dockerfile's content (the static binary, user
# nonroot, no shell) as a tarball for `ctr images import` or `docker load`.
IMAGE     ?= ghcr.io/cloud-provider-baremetal/baremetal-cloud-controller-manager:$(VERSION)
IMAGE_TAR := $(BIN_DIR)/baremetal-cloud-controller-manager-image.tar
image: build
	cd hack/image && $(GO) run . -binary ../../$(BINARY) -tag $(IMAGE) -out ../../$(IMAGE_TAR)

clean:
	rm -rf $(BIN_DIR) $(TOOLS_BIN)
