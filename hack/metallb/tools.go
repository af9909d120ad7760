//go:build tools

// Package metallb pins MetalLB's controller and speaker for go.mod; the
// Makefile builds them.
package metallb

import (
	_ "go.universe.tf/metallb/controller"
	_ "go.universe.tf/metallb/speaker"
)
