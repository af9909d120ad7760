package bfd

import (
	"math/rand/v2"
	"net"
	"net/netip"
	"sync/atomic"
	"time"
)

// slowTx is the slowest a session not Up may send at, and the least it
// may ask for (RFC 5880 §6.8.3): it saves the link while nothing is up.
const slowTx = time.Second

// session is one router's: a goroutine owns its state; the listener hands
// it packets, Set new timers.
type session struct {
	peer     Peer // Address, Source and Multihop fixed; Timers: the last sent to the goroutine, under the Server's lock
	local    uint32
	conn     *net.UDPConn
	onChange func(Change)
	// localAddr is the address the session sends from, where the
	// router's multihop packets must be sent to.
	localAddr  netip.Addr
	minimumTTL atomic.Uint32

	rx chan packet
	// unread reports a packet waiting in the listener's socket, not yet
	// handed to any session.
	unread func() bool
	timers chan Timers
	stop   chan struct{}
	done   chan struct{}
	state  atomic.Uint32
}

func newSession(p Peer, disc uint32, conn *net.UDPConn, onChange func(Change), unread func() bool) *session {
	s := &session{peer: p, local: disc, conn: conn, onChange: onChange, unread: unread,
		localAddr: conn.LocalAddr().(*net.UDPAddr).AddrPort().Addr().Unmap(),
		rx:        make(chan packet, 16), timers: make(chan Timers, 1), stop: make(chan struct{}), done: make(chan struct{})}
	s.state.Store(uint32(Down))
	s.minimumTTL.Store(uint32(p.MinimumTTL))
	return s
}

// run is the session (RFC 5880 §6.8): Down until the router answers, Up
// while its packets keep coming within its detection time.
func (s *session) run(timers Timers) {
	defer close(s.done)
	defer s.conn.Close()
	state, diag := Down, NoDiagnostic
	var remoteDisc uint32
	remoteMinRx := time.Microsecond // RFC 5880 §6.8.1: until the router says
	var remoteMinTx time.Duration
	var remoteMult uint8
	polling := false
	// active are the timers the session runs on; timers those it sends.
	// They differ while Up, from a change of timers to the end of the
	// Poll Sequence that tells the router (§6.8.3): until the router has
	// answered, it still counts on the old ones, so a slower rate of ours
	// or a faster one of its waits for its Final.
	active := timers

	desiredTx := func(t Timers) time.Duration {
		if state != Up {
			return max(slowTx, t.TransmitInterval)
		}
		return t.TransmitInterval
	}
	send := func(st State, poll, final bool) {
		p := packet{Diagnostic: diag, State: st, Poll: poll, Final: final, DetectMult: timers.DetectMultiplier,
			MyDisc: s.local, YourDisc: remoteDisc,
			DesiredMinTx: uint32(desiredTx(timers).Microseconds()), RequiredMinRx: uint32(timers.ReceiveInterval.Microseconds())}
		if _, err := s.conn.Write(p.marshal()); err != nil {
			sendErrors.Inc()
		}
	}
	// interval is the time to the next packet: the slower of ours and
	// what the router accepts, less 0–25% so that sessions do not send
	// in step (§6.8.7).
	interval := func() time.Duration {
		iv := max(desiredTx(active), remoteMinRx)
		return iv - time.Duration(rand.Int64N(int64(iv/4)+1))
	}
	detectTime := func() time.Duration {
		return time.Duration(remoteMult) * max(active.ReceiveInterval, remoteMinTx)
	}
	setState := func(to State, d Diagnostic, adminDown bool, remoteDiag Diagnostic) {
		from := state
		state, diag = to, d
		s.state.Store(uint32(to))
		// Leaving or reaching Up changes the rate we ask for: the router
		// learns it in a Poll Sequence (§6.8.3).
		if from == Up || to == Up {
			polling = true
		}
		if to != Up {
			active = timers
		}
		c := Change{Peer: s.peer.Address, From: from, To: to, Diag: d, AdminDown: adminDown, RemoteDiag: remoteDiag}
		sessionChanged(c)
		if s.onChange != nil {
			s.onChange(c)
		}
	}

	tx := time.NewTimer(0)
	defer tx.Stop()
	nextTx := time.Now()
	schedule := func(d time.Duration) {
		tx.Reset(d)
		nextTx = time.Now().Add(d)
	}
	// sooner brings the next packet forward when the rate just rose (Up
	// reached, the router asking for more): the router's detection time
	// already counts on it.
	sooner := func() {
		if time.Until(nextTx) > max(desiredTx(active), remoteMinRx) {
			schedule(interval())
		}
	}
	detect := time.NewTimer(time.Hour)
	detect.Stop()
	defer detect.Stop()
	// deadline is when the detection time runs out; checkAt when the
	// timer was last set to fire.
	var deadline, checkAt time.Time
	for {
		select {
		case <-s.stop:
			// Told AdminDown, the router takes the session's end as
			// configuration, not as a failure of the path.
			diag = AdministrativelyDown
			for range 3 {
				send(AdminDown, false, false)
			}
			return
		case t := <-s.timers:
			timers = t
			if state == Up {
				polling = true
				// Sending faster and accepting slower are safe at once.
				active.TransmitInterval = min(active.TransmitInterval, t.TransmitInterval)
				active.ReceiveInterval = max(active.ReceiveInterval, t.ReceiveInterval)
				active.DetectMultiplier = t.DetectMultiplier
			} else {
				active = timers
			}
			sooner()
		case p := <-s.rx:
			remoteDisc, remoteMult = p.MyDisc, p.DetectMult
			remoteMinRx = time.Duration(p.RequiredMinRx) * time.Microsecond
			remoteMinTx = time.Duration(p.DesiredMinTx) * time.Microsecond
			if p.Final && polling {
				polling, active = false, timers
			}
			if to, d, changed := next(state, p.State); changed {
				setState(to, d, p.State == AdminDown || p.Diagnostic == AdministrativelyDown, p.Diagnostic)
				// The router learns of the change now, not an interval later.
				if !p.Poll && remoteMinRx > 0 {
					send(state, polling, false)
				}
			}
			if p.Poll {
				send(state, false, true)
			}
			sooner()
			// Down too: a router that falls silent is forgotten after a
			// detection time, its discriminator with it (§6.8.1), so that
			// a restarted one is not named by its old one.
			deadline = time.Now().Add(detectTime())
			checkAt = deadline
			detect.Reset(detectTime())
		case <-tx.C:
			// A router asking for no packets (RequiredMinRx 0) gets none.
			if remoteMinRx > 0 {
				send(state, polling, false)
			}
			schedule(interval())
		case <-detect.C:
			if state == Init || state == Up {
				behind := len(s.rx) > 0 || (s.unread != nil && s.unread())
				if down, wait := verdict(time.Now(), checkAt, deadline, detectTime(), active.ReceiveInterval, behind); !down {
					deferred.Inc()
					checkAt = time.Now().Add(wait)
					detect.Reset(wait)
					continue
				}
			}
			remoteDisc = 0
			if state == Init || state == Up {
				setState(Down, DetectionTimeExpired, false, NoDiagnostic)
				sooner()
			}
		}
	}
}

// verdict is whether a session whose detection timer, set for checkAt,
// fired at now declares the router down, or looks again after wait. The
// router's packets still unread (behind), or a timer that fired over an
// interval late, say that this process, not the path, was slow: a replica
// whose CPU is starved (by its own convergence of a large table, or its
// neighbours on the host) would otherwise take a live router for dead and
// reset its session, and the router would drop every path with it. The
// verdict waits for the packets to be read, but no longer than one more
// detection time after the deadline: a router that did die is still found
// so, only later.
func verdict(now, checkAt, deadline time.Time, detect, interval time.Duration, behind bool) (down bool, wait time.Duration) {
	last := deadline.Add(detect)
	if !now.Before(last) || !(behind || now.Sub(checkAt) > interval) {
		return true, 0
	}
	return false, min(interval, last.Sub(now))
}
