//go:build tools

// Package containerd pins containerd v2, built from its Go module for the
// real-cluster tests (its own module: its Kubernetes dependencies are not
// the ones hack/tools pins).
package containerd

import (
	_ "github.com/containerd/containerd/v2/cmd/containerd"
	_ "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2"
	_ "github.com/containerd/containerd/v2/cmd/ctr"
)
