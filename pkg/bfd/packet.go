// Package bfd is Bidirectional Forwarding Detection (RFC 5880) for the
// speaker's single-hop BGP sessions (RFC 5881): a router that hears nothing
// from this replica for its detection time (a cut link, a dead host) drops
// the replica's session, and with it its paths, in under a second instead
// of after the BGP hold time.
//
// One Server per process serves every router of every speaker: RFC 5881
// fixes the port (3784), so per-speaker listeners would take each other's
// packets.
package bfd

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// State is a session's state (RFC 5880 §4.1).
type State uint8

const (
	AdminDown State = iota
	Down
	Init
	Up
)

func (s State) String() string {
	return [...]string{"AdminDown", "Down", "Init", "Up"}[s&3]
}

// Diagnostic says why a session last left Up (RFC 5880 §4.1).
type Diagnostic uint8

const (
	NoDiagnostic         Diagnostic = 0
	DetectionTimeExpired Diagnostic = 1
	NeighborSignaledDown Diagnostic = 3
	AdministrativelyDown Diagnostic = 7
)

func (d Diagnostic) String() string {
	switch d {
	case NoDiagnostic:
		return "none"
	case DetectionTimeExpired:
		return "detection_time_expired"
	case NeighborSignaledDown:
		return "neighbor_signaled_down"
	case AdministrativelyDown:
		return "administratively_down"
	}
	return fmt.Sprintf("diagnostic_%d", d)
}

// packet is a control packet without authentication (RFC 5880 §4.1).
type packet struct {
	Diagnostic    Diagnostic
	State         State
	Poll, Final   bool
	DetectMult    uint8
	MyDisc        uint32
	YourDisc      uint32
	DesiredMinTx  uint32 // microseconds
	RequiredMinRx uint32 // microseconds
}

const packetLen = 24

const (
	flagPoll       = 0x20
	flagFinal      = 0x10
	flagAuth       = 0x04
	flagMultipoint = 0x01
)

func (p packet) marshal() []byte {
	b := make([]byte, packetLen)
	b[0] = 1<<5 | byte(p.Diagnostic)&0x1f
	b[1] = byte(p.State) << 6
	if p.Poll {
		b[1] |= flagPoll
	}
	if p.Final {
		b[1] |= flagFinal
	}
	b[2] = p.DetectMult
	b[3] = packetLen
	binary.BigEndian.PutUint32(b[4:], p.MyDisc)
	binary.BigEndian.PutUint32(b[8:], p.YourDisc)
	binary.BigEndian.PutUint32(b[12:], p.DesiredMinTx)
	binary.BigEndian.PutUint32(b[16:], p.RequiredMinRx)
	return b
}

// Reasons a received packet is dropped, as counted.
var (
	errShort      = errors.New("short")
	errVersion    = errors.New("version")
	errAuth       = errors.New("authentication")
	errMalformed  = errors.New("malformed")
	errMultipoint = errors.New("multipoint")
)

// parse checks a received packet as RFC 5880 §6.8.6 asks, before any
// session is looked at. Authentication is not supported: a packet asking
// for it is dropped, as the RFC requires of a session without it.
func parse(b []byte) (packet, error) {
	if len(b) < packetLen {
		return packet{}, errShort
	}
	if b[0]>>5 != 1 {
		return packet{}, errVersion
	}
	if b[1]&flagAuth != 0 {
		return packet{}, errAuth
	}
	if int(b[3]) < packetLen || int(b[3]) > len(b) {
		return packet{}, errMalformed
	}
	if b[1]&flagMultipoint != 0 {
		return packet{}, errMultipoint
	}
	p := packet{
		Diagnostic:    Diagnostic(b[0] & 0x1f),
		State:         State(b[1] >> 6),
		Poll:          b[1]&flagPoll != 0,
		Final:         b[1]&flagFinal != 0,
		DetectMult:    b[2],
		MyDisc:        binary.BigEndian.Uint32(b[4:]),
		YourDisc:      binary.BigEndian.Uint32(b[8:]),
		DesiredMinTx:  binary.BigEndian.Uint32(b[12:]),
		RequiredMinRx: binary.BigEndian.Uint32(b[16:]),
	}
	if p.DetectMult == 0 || p.MyDisc == 0 || (p.Poll && p.Final) {
		return packet{}, errMalformed
	}
	// A packet that names no session may only come from a system that
	// has not learned ours: one Down or AdminDown.
	if p.YourDisc == 0 && p.State != Down && p.State != AdminDown {
		return packet{}, errMalformed
	}
	return p, nil
}

// next is the session state after receiving a packet in state remote
// (RFC 5880 §6.8.6), and the diagnostic when it falls from Up or Init.
func next(local, remote State) (State, Diagnostic, bool) {
	if local == AdminDown {
		return local, NoDiagnostic, false
	}
	if remote == AdminDown {
		if local != Down {
			return Down, NeighborSignaledDown, true
		}
		return local, NoDiagnostic, false
	}
	switch local {
	case Down:
		switch remote {
		case Down:
			return Init, NoDiagnostic, true
		case Init:
			return Up, NoDiagnostic, true
		}
	case Init:
		if remote == Init || remote == Up {
			return Up, NoDiagnostic, true
		}
	case Up:
		if remote == Down {
			return Down, NeighborSignaledDown, true
		}
	}
	return local, NoDiagnostic, false
}
