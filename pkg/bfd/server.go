package bfd

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"
)

// Port is where single-hop control packets are sent (RFC 5881 §4).
const Port = 3784

// MultihopPort is where multihop control packets are sent (RFC 5883 §5).
const MultihopPort = 4784

// Timers are a session's parameters, as the router's bfdd names them.
type Timers struct {
	// TransmitInterval is how often this side wants to send (its
	// DesiredMinTxInterval); the router may ask for less often.
	TransmitInterval time.Duration
	// ReceiveInterval is the fastest this side accepts packets
	// (RequiredMinRxInterval).
	ReceiveInterval time.Duration
	// DetectMultiplier is how many of the router's intervals pass
	// without a packet before it declares this side down.
	DetectMultiplier uint8
}

// Peer is a router to keep a session with.
type Peer struct {
	Address netip.Addr
	// Source is the address the session is sent from: the BGP session's.
	// Unset, the kernel picks it.
	Source netip.Addr
	Timers
	// Multihop runs the session by RFC 5883, for a router more than one
	// hop away (a ToR's loopback): on MultihopPort, taking the router's
	// packets that arrive with a TTL of at least MinimumTTL, addressed to
	// the session's own address. A single-hop session takes only TTL 255
	// (RFC 5881 §5). Packets are sent with 255 either way.
	Multihop   bool
	MinimumTTL uint8
}

// Change is a session's change of state.
type Change struct {
	Peer     netip.Addr
	From, To State
	Diag     Diagnostic
	// AdminDown says the router ended the session by configuration: it
	// sent AdminDown, or Down with the diagnostic "administratively down"
	// (FRR's bfdd when BFD is removed from a neighbour). Not a failure of
	// the path (RFC 5882 §3.2).
	AdminDown bool
	// RemoteDiag is the router's diagnostic in the packet that changed
	// the state, if one did.
	RemoteDiag Diagnostic
}

// Options are a Server's ports and what it reports.
type Options struct {
	// ListenPort and PeerPort are Port unless set, MultihopListenPort and
	// MultihopPeerPort MultihopPort (tests use others).
	ListenPort, PeerPort                 int
	MultihopListenPort, MultihopPeerPort int
	// OnChange is told each change of a session's state, from that
	// session's goroutine: it must not block long.
	OnChange func(Change)
}

// Server keeps a session with each router it is given, on one listener per
// address family.
type Server struct {
	opts Options

	mu        sync.Mutex
	sessions  map[netip.Addr]*session
	byDisc    map[uint32]*session
	listeners map[listenerKind]*listener
	// readers are the listeners by kind, for sessions to look at without
	// the lock (Set holds it while it waits for a session to end).
	readers [4]atomic.Pointer[listener]
}

// listenerKind is a listener's family and port (single hop, multihop).
type listenerKind struct{ is4, multihop bool }

func (k listenerKind) index() int {
	i := 0
	if k.is4 {
		i = 2
	}
	if k.multihop {
		i++
	}
	return i
}

// New is a Server with no session; it listens once it has one.
func New(opts Options) *Server {
	if opts.ListenPort == 0 {
		opts.ListenPort = Port
	}
	if opts.PeerPort == 0 {
		opts.PeerPort = Port
	}
	if opts.MultihopListenPort == 0 {
		opts.MultihopListenPort = MultihopPort
	}
	if opts.MultihopPeerPort == 0 {
		opts.MultihopPeerPort = MultihopPort
	}
	return &Server{opts: opts, sessions: map[netip.Addr]*session{}, byDisc: map[uint32]*session{}, listeners: map[listenerKind]*listener{}}
}

// Set makes the sessions those of peers: new ones start Down, gone ones
// are told AdminDown (the router keeps the BGP session, RFC 5882 §3.2),
// changed timers are sent to the router with a Poll. A listener that
// cannot be opened (the port in use) is an error; sessions of the other
// family still run.
func (s *Server) Set(peers []Peer) error {
	closed, err := s.set(peers)
	// Waited for outside the lock: a listener may be waiting for it.
	for _, l := range closed {
		<-l.done
	}
	return err
}

func (s *Server) set(peers []Peer) (closed []*listener, _ error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	want := map[netip.Addr]Peer{}
	for _, p := range peers {
		want[p.Address] = p
	}
	for addr, sess := range s.sessions {
		if p, ok := want[addr]; !ok || p.Source != sess.peer.Source || p.Multihop != sess.peer.Multihop {
			s.removeLocked(sess)
		}
	}
	var errs []error
	for addr, p := range want {
		if sess, ok := s.sessions[addr]; ok {
			sess.minimumTTL.Store(uint32(p.MinimumTTL))
			if sess.peer.Timers != p.Timers {
				sess.peer.Timers = p.Timers
				sess.timers <- p.Timers
			}
			continue
		}
		sess, err := s.newSessionLocked(p)
		if err != nil {
			errs = append(errs, fmt.Errorf("BFD with %s: %w", addr, err))
			continue
		}
		s.sessions[addr], s.byDisc[sess.local] = sess, sess
		sessionUp.WithLabelValues(addr.String()).Set(0)
		go sess.run(p.Timers)
	}
	kinds := map[listenerKind]bool{}
	for addr, sess := range s.sessions {
		kinds[listenerKind{is4: addr.Is4(), multihop: sess.peer.Multihop}] = true
	}
	for kind, l := range s.listeners {
		if !kinds[kind] {
			s.readers[kind.index()].Store(nil)
			l.conn.Close()
			closed = append(closed, l)
			delete(s.listeners, kind)
		}
	}
	for kind := range kinds {
		if s.listeners[kind] != nil {
			continue
		}
		l, err := s.listen(kind)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		s.listeners[kind] = l
		s.readers[kind.index()].Store(l)
	}
	return closed, errors.Join(errs...)
}

// States are the sessions' states, by router.
func (s *Server) States() map[netip.Addr]State {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[netip.Addr]State{}
	for addr, sess := range s.sessions {
		out[addr] = State(sess.state.Load())
	}
	return out
}

// Close ends every session (AdminDown) and the listeners.
func (s *Server) Close() {
	s.Set(nil)
}

func (s *Server) removeLocked(sess *session) {
	close(sess.stop)
	<-sess.done
	delete(s.sessions, sess.peer.Address)
	delete(s.byDisc, sess.local)
	forgetSession(sess.peer.Address)
}

// newSessionLocked opens the session's socket: from a source port of
// 49152–65535, the same for the whole session, sent with TTL 255 so that
// the router can tell it was not forwarded (RFC 5881 §4, §5) or how far it
// came (RFC 5883 §5).
func (s *Server) newSessionLocked(p Peer) (*session, error) {
	var disc uint32
	for disc == 0 || s.byDisc[disc] != nil {
		var b [4]byte
		rand.Read(b[:])
		disc = binary.BigEndian.Uint32(b[:])
	}
	network := "udp4"
	if !p.Address.Is4() {
		network = "udp6"
	}
	var conn *net.UDPConn
	var err error
	for range 16 {
		var port [2]byte
		rand.Read(port[:])
		local := netip.AddrPortFrom(p.Source, 49152+binary.BigEndian.Uint16(port[:])%16384)
		if !p.Source.IsValid() {
			local = netip.AddrPortFrom(netip.Addr{}, local.Port())
		}
		peerPort := s.opts.PeerPort
		if p.Multihop {
			peerPort = s.opts.MultihopPeerPort
		}
		conn, err = net.DialUDP(network, net.UDPAddrFromAddrPort(local), net.UDPAddrFromAddrPort(netip.AddrPortFrom(p.Address, uint16(peerPort))))
		if err == nil {
			break
		}
	}
	if err != nil {
		return nil, err
	}
	if p.Address.Is4() {
		err = ipv4.NewConn(conn).SetTTL(255)
	} else {
		err = ipv6.NewConn(conn).SetHopLimit(255)
	}
	if err != nil {
		conn.Close()
		return nil, err
	}
	reader := &s.readers[listenerKind{is4: p.Address.Is4(), multihop: p.Multihop}.index()]
	unread := func() bool {
		l := reader.Load()
		return l != nil && l.unread()
	}
	return newSession(p, disc, conn, s.opts.OnChange, unread), nil
}

// listener reads the control packets of one family.
type listener struct {
	conn net.PacketConn
	done chan struct{}
}

// unread reports whether a packet waits in the socket: the listener has
// not been scheduled to read it yet.
func (l *listener) unread() bool {
	sc, ok := l.conn.(syscall.Conn)
	if !ok {
		return false
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	waiting := false
	raw.Control(func(fd uintptr) { waiting = queued(fd) })
	return waiting
}

func (s *Server) listen(kind listenerKind) (*listener, error) {
	port := s.opts.ListenPort
	if kind.multihop {
		port = s.opts.MultihopListenPort
	}
	network, addr := "udp6", "[::]:"+strconv.Itoa(port)
	if kind.is4 {
		network, addr = "udp4", "0.0.0.0:"+strconv.Itoa(port)
	}
	conn, err := net.ListenPacket(network, addr)
	if err != nil {
		return nil, fmt.Errorf("BFD listener: %w", err)
	}
	// read returns a packet, how it arrived and its source.
	var read func([]byte) (int, arrival, net.Addr, error)
	if kind.is4 {
		pc := ipv4.NewPacketConn(conn)
		err = pc.SetControlMessage(ipv4.FlagTTL|ipv4.FlagDst, true)
		read = func(b []byte) (int, arrival, net.Addr, error) {
			n, cm, src, err := pc.ReadFrom(b)
			if cm == nil {
				return n, arrival{ttl: -1}, src, err
			}
			dst, _ := netip.AddrFromSlice(cm.Dst)
			return n, arrival{ttl: cm.TTL, dst: dst.Unmap(), multihop: kind.multihop}, src, err
		}
	} else {
		pc := ipv6.NewPacketConn(conn)
		err = pc.SetControlMessage(ipv6.FlagHopLimit|ipv6.FlagDst, true)
		read = func(b []byte) (int, arrival, net.Addr, error) {
			n, cm, src, err := pc.ReadFrom(b)
			if cm == nil {
				return n, arrival{ttl: -1}, src, err
			}
			dst, _ := netip.AddrFromSlice(cm.Dst)
			return n, arrival{ttl: cm.HopLimit, dst: dst, multihop: kind.multihop}, src, err
		}
	}
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("BFD listener: %w", err)
	}
	l := &listener{conn: conn, done: make(chan struct{})}
	go func() {
		defer close(l.done)
		buf := make([]byte, 1500)
		for {
			n, how, src, err := read(buf)
			if err != nil {
				if errors.Is(err, net.ErrClosed) {
					return
				}
				continue
			}
			s.receive(buf[:n], how, src)
		}
	}()
	return l, nil
}

// arrival is how a packet came: its TTL (or hop limit), the address it
// was sent to, and on which port.
type arrival struct {
	ttl      int
	dst      netip.Addr
	multihop bool
}

// receive hands a packet to its session. A single-hop packet is taken
// only if sent with TTL 255: anything that crossed a router was not sent
// by a neighbour (RFC 5881 §5), so a host off the link cannot tear a
// session down. A multihop packet must have come no further than its
// session allows (its TTL at least the session's MinimumTTL, RFC 5883 §5)
// and to the session's own address. A packet naming a session must come
// from that session's router, to that session's port. A packet naming
// none (Your Discriminator 0) is taken only by a session that is Down,
// which has no discriminator to check yet: past Down, the router knows
// ours and names it, and a host that does not know it (its source address
// is all it can forge) cannot end the session (RFC 5880 §6.8.6 leaves the
// choice; FRR's bfdd makes the same).
func (s *Server) receive(b []byte, how arrival, src net.Addr) {
	if !how.multihop && how.ttl != 255 {
		dropped.WithLabelValues("ttl").Inc()
		return
	}
	p, err := parse(b)
	if err != nil {
		dropped.WithLabelValues(err.Error()).Inc()
		return
	}
	u, ok := src.(*net.UDPAddr)
	if !ok {
		return
	}
	from := u.AddrPort().Addr().Unmap().WithZone("")
	s.mu.Lock()
	sess := s.sessions[from]
	if p.YourDisc != 0 {
		sess = s.byDisc[p.YourDisc]
	}
	s.mu.Unlock()
	switch {
	case sess == nil:
		dropped.WithLabelValues("unknown_session").Inc()
	case sess.peer.Address != from:
		dropped.WithLabelValues("wrong_source").Inc()
	case sess.peer.Multihop != how.multihop:
		dropped.WithLabelValues("wrong_port").Inc()
	case how.multihop && how.ttl < int(sess.minimumTTL.Load()):
		dropped.WithLabelValues("ttl").Inc()
	case how.multihop && how.dst != sess.localAddr:
		dropped.WithLabelValues("wrong_destination").Inc()
	case p.YourDisc == 0 && State(sess.state.Load()) != Down:
		dropped.WithLabelValues("no_discriminator").Inc()
	default:
		select {
		case sess.rx <- p:
		default:
			dropped.WithLabelValues("queue_full").Inc()
		}
	}
}
