// Package bmc asks machines' baseboard management controllers (IPMI over
// LAN, Redfish) for their power state, bounded and cached. A BMC that does
// not answer, refuses the login or answers what cannot be read makes the
// state Unknown, never Off: Off fences a machine.
//
// It is a pure package: it knows nothing of Kubernetes.
package bmc

import (
	"context"
	"errors"
	"time"
)

// PowerState is what a BMC said of its machine's power.
type PowerState string

const (
	// On: the machine has power (also while it powers on or off, or is paused).
	On PowerState = "on"
	// Off: the BMC said the machine is off.
	Off PowerState = "off"
	// Unknown: the BMC was not asked yet, or did not answer.
	Unknown PowerState = "unknown"
)

// Protocol names how a BMC is asked.
type Protocol string

const (
	IPMI    Protocol = "ipmi"
	Redfish Protocol = "redfish"
)

// Target is one machine's BMC.
type Target struct {
	Machine  string
	Protocol Protocol
	// Address: host:port for IPMI, https://host[:port] for Redfish.
	Address string
	// SystemID is the Redfish ComputerSystem's Id; empty, the only one.
	SystemID string
	// Credentials are read at every login, so that a rotated Secret is used.
	Credentials func() (user, password string, err error)
	// TLS, for Redfish: CAFile's certificates, or none checked when
	// InsecureSkipVerify.
	CAFile             string
	InsecureSkipVerify bool
}

// same is whether two targets are asked the same way (a session to one
// serves the other).
func (t Target) same(o Target) bool {
	return t.Machine == o.Machine && t.Protocol == o.Protocol && t.Address == o.Address && t.SystemID == o.SystemID &&
		t.CAFile == o.CAFile && t.InsecureSkipVerify == o.InsecureSkipVerify
}

// Conn is a session with one BMC, reused while its machine is watched.
type Conn interface {
	// Power asks for the power state; an error means Unknown.
	Power(ctx context.Context) (PowerState, error)
	// Close ends the session (logging out where the protocol has one).
	Close()
}

// Reading is the last word of a machine's BMC.
type Reading struct {
	State PowerState
	// Err says why the state is Unknown.
	Err error
	// Since is when the state became what it is (as this process saw it).
	Since time.Time
	// Asked is when the BMC was last asked; Answered, when it last answered.
	Asked, Answered time.Time
	// Failures counts the questions in a row that got no answer.
	Failures int
}

// errNotAsked is the reason of a machine's state before its first answer.
var errNotAsked = errors.New("not asked yet")

// maxBody bounds what is read of one Redfish answer.
const maxBody = 1 << 20
