# baremetal-cloud-controller-manager

GO        ?= go
BIN_DIR   ?= bin
TOOLS_BIN := hack/tools/bin
BINARY    := $(BIN_DIR)/baremetal-cloud-controller-manager
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo unknown)
COMMIT    ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
# The component-base version is the Kubernetes release the binary is built
# on (feature gates and compatibility checks parse it); the project's own
# version goes in the build metadata.
K8S_VERSION := v1.37.2
LDFLAGS := -s -w \
	-X k8s.io/component-base/version/verflag.programName=baremetal-cloud-controller-manager \
	-X k8s.io/component-base/version.gitVersion=$(K8S_VERSION)+baremetal.$(subst -,.,$(VERSION)) \
	-X k8s.io/component-base/version.gitCommit=$(COMMIT) \
	-X k8s.io/component-base/version.gitTreeState=$(if $(findstring dirty,$(VERSION)),dirty,clean) \
	-X k8s.io/component-base/version.buildDate=$(shell date -u +%Y-%m-%dT%H:%M:%SZ) \
	-X k8s.io/client-go/pkg/version.gitVersion=$(K8S_VERSION)+baremetal.$(subst -,.,$(VERSION)) \
	-X k8s.io/client-go/pkg/version.gitCommit=$(COMMIT)



# How long `make test` runs each fuzz target; longer: make fuzz FUZZTIME=10m
FUZZTIME ?= 10s

.PHONY: all build tools node-tools test unit integration chaos e2e fuzz bench lint demo clean image

all: build

build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BINARY) ./cmd/baremetal-cloud-controller-manager

# The test control plane, built from Go modules (hack/tools/go.mod); a no-op
# once built.
TOOLS := $(TOOLS_BIN)/kube-apiserver $(TOOLS_BIN)/etcd $(TOOLS_BIN)/kubectl $(TOOLS_BIN)/kubeadm
tools: $(TOOLS)

# They report the release they are built from (kubeadm checks the versions
# of what it runs against its own).
TOOLS_LDFLAGS := -ldflags '-X k8s.io/component-base/version.gitVersion=$(K8S_VERSION) -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=37 -X k8s.io/component-base/version.gitTreeState=clean'

$(TOOLS_BIN)/kube-apiserver $(TOOLS_BIN)/kubectl $(TOOLS_BIN)/kubeadm: hack/tools/go.mod hack/tools/go.sum
	cd hack/tools && $(GO) build $(TOOLS_LDFLAGS) -o bin/ k8s.io/kubernetes/cmd/$(notdir $@)

$(TOOLS_BIN)/etcd: hack/tools/go.mod hack/tools/go.sum hack/tools/etcd/main.go
	cd hack/tools && $(GO) build -o bin/etcd ./etcd

# The node stack of the real-cluster tests, in one go build so that the
# packages they share are built once; a no-op once built.
NODE_TOOLS := $(TOOLS_BIN)/kubelet $(TOOLS_BIN)/kube-proxy $(TOOLS_BIN)/kube-controller-manager $(TOOLS_BIN)/kube-scheduler
node-tools: $(NODE_TOOLS)

$(NODE_TOOLS) &: hack/tools/go.mod hack/tools/go.sum
	cd hack/tools && $(GO) build $(TOOLS_LDFLAGS) -o bin/ $(addprefix k8s.io/kubernetes/cmd/,$(notdir $(NODE_TOOLS)))

lint:
	$(GO) vet ./...
	cd hack/tools && $(GO) vet ./...
	cd hack/image && $(GO) vet ./...
	@out=$$(gofmt -l cmd pkg test hack); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

unit:
	$(GO) test ./pkg/... ./cmd/...
	cd hack/image && $(GO) test ./...

# Benchmarks (not part of `make test`): make bench BENCHFLAGS="--runs=5 --idle=5m"
BENCHFLAGS ?=
bench: tools build
	$(GO) run ./test/perf $(BENCHFLAGS)

integration: tools build
	$(GO) test -count=1 -timeout 20m ./test/framework/ ./test/speaker/ ./test/integration/...

# Restarts, failover, API outage, peer restarts, bad input; full size:
# make chaos CHAOSFLAGS="-services=1000 -churn=500"
CHAOSFLAGS ?=
chaos: tools build
	$(GO) test -count=1 -timeout 30m ./test/chaos/... $(if $(CHAOSFLAGS),-args $(CHAOSFLAGS))

# Data path in network namespaces with FRR; needs root (installs frr).
# The full size of the restart test: make e2e E2EFLAGS="-restart-services=1000 -restart-nodes=100"
e2e: tools build
	$(GO) test -count=1 -timeout 40m ./test/e2e/... $(if $(E2EFLAGS),-args $(E2EFLAGS))

# Bounded fuzzing of the config parser and the annotation parsers; the seed
# corpus is in each package's testdata/fuzz.
fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzParse$$' -fuzztime $(FUZZTIME) ./pkg/config
	$(GO) test -run '^$$' -fuzz '^FuzzParseAddressRange$$' -fuzztime $(FUZZTIME) ./pkg/config
	$(GO) test -run '^$$' -fuzz '^FuzzAnnotations$$' -fuzztime $(FUZZTIME) ./pkg/provider

test: lint unit fuzz integration chaos e2e

demo: tools build
	$(GO) run ./hack/demo

# The image without Docker: the Dockerfile's content (the static binary, user
# nonroot, no shell) as a tarball for `ctr images import` or `docker load`.
IMAGE     ?= ghcr.io/cloud-provider-baremetal/baremetal-cloud-controller-manager:$(VERSION)
IMAGE_TAR := $(BIN_DIR)/baremetal-cloud-controller-manager-image.tar
image: build
	cd hack/image && $(GO) run . -binary ../../$(BINARY) -tag $(IMAGE) -out ../../$(IMAGE_TAR)

clean:
	rm -rf $(BIN_DIR) $(TOOLS_BIN)
