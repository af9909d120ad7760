// Package bgp is the BGP speaker: it takes the desired set of paths and
// converges the sessions to it. It knows nothing of Kubernetes.
package bgp

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/osrg/gobgp/v4/api"
	"github.com/osrg/gobgp/v4/pkg/apiutil"
	"github.com/osrg/gobgp/v4/pkg/config/oc"
	"github.com/osrg/gobgp/v4/pkg/packet/bgp"
	"github.com/osrg/gobgp/v4/pkg/server"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/rendezvous"
)

// MaxNextHops is how many paths (next hops) of one prefix the speaker
// announces to a peer that negotiates ADD-PATH (RFC 7911). GoBGP sends at
// most 255 paths of a prefix (its send-max is a byte) and drops the rest
// in arrival order, so the speaker chooses which ones itself.
const MaxNextHops = 255

// Config is the speaker's own configuration.
type Config struct {
	ASN      uint32
	RouterID netip.Addr
	// ListenPort accepts sessions when non-zero; 0 only dials out.
	ListenPort      uint16
	ListenAddresses []string
	Peers           []Peer
}

// Peer is one neighbour.
type Peer struct {
	Address       netip.Addr
	Port          uint16
	ASN           uint32
	Password      string
	SourceAddress netip.Addr
	HoldTime      time.Duration
	Keepalive     time.Duration
	ConnectRetry  time.Duration
	// EBGPMultihopTTL > 0 allows a peer that many hops away.
	EBGPMultihopTTL uint8
	IPv4, IPv6      bool
	GracefulRestart bool
	RestartTime     time.Duration
}

// LargeCommunity is an RFC 8092 community.
type LargeCommunity struct{ Global, Local1, Local2 uint32 }

// Attributes are the attributes of a path besides its next hop.
type Attributes struct {
	Communities      []uint32
	LargeCommunities []LargeCommunity
	// LocalPref, if non-zero, is sent to iBGP peers.
	LocalPref uint32
	// MED, if HasMED, is the multi-exit discriminator.
	MED    uint32
	HasMED bool
	// Prepend is how many more times the speaker's AS leads the AS path,
	// besides the once every eBGP session adds.
	Prepend uint8
}

func (a Attributes) equal(b Attributes) bool {
	return a.LocalPref == b.LocalPref && a.MED == b.MED && a.HasMED == b.HasMED && a.Prepend == b.Prepend &&
		slices.Equal(a.Communities, b.Communities) && slices.Equal(a.LargeCommunities, b.LargeCommunities)
}

// Announcement is a prefix via each of its next hops: one path per next
// hop, all with the same attributes. Callers may share NextHops between
// announcements; the speaker does not change them.
type Announcement struct {
	Prefix   netip.Prefix
	NextHops []netip.Addr
	Attributes
}

// PeerState is what a peer's session is doing.
type PeerState struct {
	Address     netip.Addr
	ASN         uint32
	State       string // idle, connect, active, opensent, openconfirm, established
	Established bool
	// AddPath is set for an established session whose peer takes ADD-PATH
	// (RFC 7911): it gets every next hop of a VIP, not one.
	AddPath bool
	// Speaker is the speaker whose session this is: a router handed from
	// one speaker to another is reported by both for a moment.
	Speaker *Speaker
}

// Speaker announces paths from an in-process GoBGP server.
type Speaker struct {
	srv *server.BgpServer
	log *slog.Logger
	asn uint32

	mu sync.Mutex
	// announced is what was sent, by prefix; paths counts its next hops,
	// IPv4 and IPv6.
	announced map[netip.Prefix]*announced
	paths     [2]int
	peers     map[netip.Addr]Peer
	// capped is how many prefixes capNextHops cut at the last convergence.
	capped int
	// restarting is true until the first SetPeers with peers: those are
	// told that this speaker restarted and kept forwarding.
	restarting bool

	// OnPeerState, if set, is called on every session state change.
	OnPeerState func(PeerState)
}

// announced is one prefix as sent: its attributes and its next hops,
// sorted by address, each with its ADD-PATH path identifier. A sorted
// slice rather than a map: it is a fraction of the size, and a convergence
// compares it with the wanted next hops in one walk.
type announced struct {
	attrs Attributes
	hops  []hop
	// top is the highest identifier the prefix's paths have had. GoBGP
	// gives a new path of a prefix the lowest identifier never used while
	// the prefix lives (it frees none), and a path that takes another's
	// place keeps that one's; keeping the same rule, the identifiers here
	// are the ones on the wire, which a speaker taking over a router's
	// session must send again (see Load).
	top uint32
}

type hop struct {
	addr netip.Addr
	id   uint32 // unique per prefix
}

// Start runs the speaker and connects to the peers. A caller that has a
// table to announce starts without peers, sets the paths, then the peers:
// so the sessions come up with the whole table in place, and the peers of
// that first SetPeers get the graceful-restart treatment (see apiPeer).
func Start(ctx context.Context, cfg Config, log *slog.Logger, onPeerState func(PeerState)) (*Speaker, error) {
	level := &slog.LevelVar{}
	level.Set(slog.LevelWarn)
	s := &Speaker{
		srv:         server.NewBgpServer(server.LoggerOption(log, level)),
		asn:         cfg.ASN,
		log:         log,
		announced:   map[netip.Prefix]*announced{},
		peers:       map[netip.Addr]Peer{},
		OnPeerState: onPeerState,
		restarting:  true,
	}
	go s.srv.Serve()
	listen := int32(-1)
	if cfg.ListenPort != 0 {
		listen = int32(cfg.ListenPort)
	}
	if err := s.srv.StartBgp(ctx, &api.StartBgpRequest{Global: &api.Global{
		Asn: cfg.ASN, RouterId: cfg.RouterID.String(), ListenPort: listen, ListenAddresses: cfg.ListenAddresses,
		// Without a list GoBGP keeps tables for all of its thirty-odd
		// families, each sharded 2,048 ways: about 20 MB for nothing.
		Families: []uint32{
			uint32(oc.AfiSafiTypeToIntMap[oc.AFI_SAFI_TYPE_IPV4_UNICAST]),
			uint32(oc.AfiSafiTypeToIntMap[oc.AFI_SAFI_TYPE_IPV6_UNICAST]),
		},
	}}); err != nil {
		return nil, fmt.Errorf("starting BGP: %w", err)
	}
	if err := s.learnNothing(ctx); err != nil {
		return nil, err
	}
	if err := s.srv.WatchEvent(ctx, server.WatchEventMessageCallbacks{OnPeerUpdate: s.peerEvent}, server.WatchPeer()); err != nil {
		return nil, fmt.Errorf("watching peers: %w", err)
	}
	if err := s.SetPeers(ctx, cfg.Peers); err != nil {
		return nil, err
	}
	return s, nil
}

// learnNothing makes the speaker reject every path a peer sends (routers
// reflect ours back, and may send a full table), so it never learns or
// passes on routes. The global import policy also sees our own paths, which
// have no neighbour and so pass.
func (s *Speaker) learnNothing(ctx context.Context) error {
	const set, policy = "all-peers", "learn-nothing"
	if err := s.srv.AddDefinedSet(ctx, &api.AddDefinedSetRequest{DefinedSet: &api.DefinedSet{
		DefinedType: api.DefinedType_DEFINED_TYPE_NEIGHBOR, Name: set, List: []string{"0.0.0.0/0", "::/0"},
	}}); err != nil {
		return fmt.Errorf("defining the neighbour set: %w", err)
	}
	if err := s.srv.AddPolicy(ctx, &api.AddPolicyRequest{Policy: &api.Policy{Name: policy, Statements: []*api.Statement{{
		Name:       "reject-from-peers",
		Conditions: &api.Conditions{NeighborSet: &api.MatchSet{Type: api.MatchSet_TYPE_ANY, Name: set}},
		Actions:    &api.Actions{RouteAction: api.RouteAction_ROUTE_ACTION_REJECT},
	}}}}); err != nil {
		return fmt.Errorf("defining the import policy: %w", err)
	}
	if err := s.srv.SetPolicyAssignment(ctx, &api.SetPolicyAssignmentRequest{Assignment: &api.PolicyAssignment{
		Name: "global", Direction: api.PolicyDirection_POLICY_DIRECTION_IMPORT,
		Policies: []*api.Policy{{Name: policy}}, DefaultAction: api.RouteAction_ROUTE_ACTION_ACCEPT,
	}}); err != nil {
		return fmt.Errorf("setting the import policy: %w", err)
	}
	return nil
}

func (s *Speaker) peerEvent(ev *apiutil.WatchEventMessage_PeerEvent, _ time.Time) {
	if ev.Type != apiutil.PEER_EVENT_STATE {
		return
	}
	st := PeerState{
		Address:     ev.Peer.State.NeighborAddress,
		ASN:         ev.Peer.State.PeerASN,
		State:       stateName(ev.Peer.State.SessionState),
		Established: ev.Peer.State.SessionState == bgp.BGP_FSM_ESTABLISHED,
		Speaker:     s,
	}
	s.log.Info("BGP session state changed", "peer", st.Address, "asn", st.ASN, "state", st.State, "reason", ev.Peer.State.DisconnectMessage)
	// Without ADD-PATH GoBGP sends its best path: of our paths for a
	// prefix, the one it has held longest, which stays until that next hop
	// goes. The provider reports it.
	st.AddPath = st.Established && receivesAddPath(ev.Peer.State.RemoteCap)
	if s.OnPeerState != nil {
		s.OnPeerState(st)
	}
}

func receivesAddPath(caps []bgp.ParameterCapabilityInterface) bool {
	for _, c := range caps {
		if ap, ok := c.(*bgp.CapAddPath); ok {
			for _, t := range ap.Tuples {
				if t.Mode&bgp.BGP_ADD_PATH_RECEIVE != 0 {
					return true
				}
			}
		}
	}
	return false
}

func stateName(st bgp.FSMState) string {
	switch st {
	case bgp.BGP_FSM_IDLE:
		return "idle"
	case bgp.BGP_FSM_CONNECT:
		return "connect"
	case bgp.BGP_FSM_ACTIVE:
		return "active"
	case bgp.BGP_FSM_OPENSENT:
		return "opensent"
	case bgp.BGP_FSM_OPENCONFIRM:
		return "openconfirm"
	case bgp.BGP_FSM_ESTABLISHED:
		return "established"
	}
	return st.String()
}

// SetPeers converges the configured neighbours: new ones are added, gone
// ones removed, changed ones replaced. Unchanged sessions are not touched.
func (s *Speaker) SetPeers(ctx context.Context, peers []Peer) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	want := map[netip.Addr]Peer{}
	for _, p := range peers {
		want[p.Address] = p
	}
	var errs []error
	for addr, old := range s.peers {
		if p, ok := want[addr]; ok && p == old {
			continue
		}
		if err := s.srv.DeletePeer(ctx, &api.DeletePeerRequest{Address: addr.String()}); err != nil {
			errs = append(errs, fmt.Errorf("removing BGP peer %s: %w", addr, err))
			continue
		}
		delete(s.peers, addr)
	}
	// The first peers of this run (the first call that has any) are told
	// that the speaker restarted.
	restarting := s.restarting
	if len(want) > 0 {
		s.restarting = false
	}
	for addr, p := range want {
		if _, ok := s.peers[addr]; ok {
			continue
		}
		if err := s.srv.AddPeer(ctx, &api.AddPeerRequest{Peer: apiPeer(p, restarting)}); err != nil {
			errs = append(errs, fmt.Errorf("adding BGP peer %s: %w", addr, err))
			continue
		}
		s.peers[addr] = p
	}
	return errors.Join(errs...)
}

// restartDeferral is how long GoBGP, restarting, waits for the End-of-RIB
// of every peer before it sends its table. RFC 4724 has a restarting
// speaker wait so that it can select routes from what its peers send; this
// one learns nothing from them, so once a peer's session is up there is
// nothing to wait for but the other peers, some of which may be down.
const restartDeferral = time.Second

// apiPeer is the GoBGP configuration of a peer. restarting marks the
// speaker's first sessions of this run, with graceful restart on: the OPEN
// then says Restart State, and Forwarding State for every family (RFC
// 4724 §3), which is true: the data plane is kube-proxy on the nodes, and
// it went on forwarding. A router that keeps our paths as stale then keeps
// them when the session comes back, rather than deleting them at once
// (§4.2), and replaces them by what we send before our End-of-RIB. GoBGP
// sends nothing until then, so the End-of-RIB follows the whole table.
func apiPeer(p Peer, restarting bool) *api.Peer {
	secs := func(d time.Duration) uint64 { return uint64(d / time.Second) }
	ap := &api.Peer{
		Conf: &api.PeerConf{NeighborAddress: p.Address.String(), PeerAsn: p.ASN, AuthPassword: p.Password},
		Transport: &api.Transport{
			RemotePort: uint32(p.Port),
		},
		Timers: &api.Timers{Config: &api.TimersConfig{
			ConnectRetry: secs(p.ConnectRetry), HoldTime: secs(p.HoldTime), KeepaliveInterval: secs(p.Keepalive),
			IdleHoldTimeAfterReset: 1,
		}},
		GracefulRestart: &api.GracefulRestart{
			Enabled: p.GracefulRestart, RestartTime: uint32(p.RestartTime / time.Second),
			LocalRestarting: restarting && p.GracefulRestart, DeferralTime: uint32(restartDeferral / time.Second),
		},
	}
	if p.SourceAddress.IsValid() {
		ap.Transport.LocalAddress = p.SourceAddress.String()
	}
	if p.EBGPMultihopTTL > 0 {
		ap.EbgpMultihop = &api.EbgpMultihop{Enabled: true, MultihopTtl: uint32(p.EBGPMultihopTTL)}
	}
	family := func(afi api.Family_Afi) *api.AfiSafi {
		return &api.AfiSafi{
			Config:            &api.AfiSafiConfig{Family: &api.Family{Afi: afi, Safi: api.Family_SAFI_UNICAST}, Enabled: true},
			AddPaths:          &api.AddPaths{Config: &api.AddPathsConfig{SendMax: MaxNextHops}},
			MpGracefulRestart: &api.MpGracefulRestart{Config: &api.MpGracefulRestartConfig{Enabled: p.GracefulRestart}},
		}
	}
	if p.IPv4 {
		ap.AfiSafis = append(ap.AfiSafis, family(api.Family_AFI_IP))
	}
	if p.IPv6 {
		ap.AfiSafis = append(ap.AfiSafis, family(api.Family_AFI_IP6))
	}
	return ap
}

// Change counts the paths one SetPaths sent. Replaced are those of
// Announced that took the place (and identifier) of a path no longer
// wanted, which is not counted as withdrawn.
type Change struct{ Announced, Withdrawn, Replaced int }

// SetPaths converges what is announced to want: new paths are added,
// changed ones re-announced, and those no longer wanted withdrawn, each in
// one batch. A path that did not change is not sent again, and a prefix
// whose next hops and attributes did not change costs one comparison.
// Announcements of the same prefix are merged.
func (s *Speaker) SetPaths(want []Announcement) (Change, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	byPrefix := make(map[netip.Prefix]Announcement, len(want))
	for _, a := range want {
		a.Prefix = a.Prefix.Masked()
		if prev, ok := byPrefix[a.Prefix]; ok {
			a.NextHops = append(slices.Clip(prev.NextHops), a.NextHops...)
			a.Attributes = prev.Attributes
		}
		byPrefix[a.Prefix] = a
	}
	b := newBatch(s.srv, s.asn)
	next := map[netip.Prefix]*announced{}
	capped := 0
	for _, prefix := range slices.SortedFunc(maps.Keys(byPrefix), comparePrefixes) {
		a := byPrefix[prefix]
		hops, cut := capNextHops(prefix, sortedUnique(a.NextHops))
		if cut {
			capped++
		}
		old := s.announced[prefix]
		if old == nil {
			old = &announced{attrs: a.Attributes}
		}
		if sameAddrs(old.hops, hops) && old.attrs.equal(a.Attributes) {
			continue
		}
		next[prefix] = b.diff(prefix, old, a.Attributes, hops)
	}
	for prefix, old := range s.announced {
		if _, ok := byPrefix[prefix]; !ok {
			next[prefix] = b.diff(prefix, old, old.attrs, nil)
		}
	}
	if capped != s.capped {
		s.capped = capped
		if capped > 0 {
			s.log.Warn("Prefixes with more next hops than can be announced: each gets a stable subset", "prefixes", capped, "maxNextHops", MaxNextHops)
		}
	}
	b.flush()
	change := Change{Announced: b.added, Withdrawn: b.withdrawn, Replaced: b.replaced}
	if b.err != nil {
		// GoBGP refuses paths only when it is stopping. The state stays as
		// before, so a retry sends again what this one meant to.
		return change, b.err
	}
	for prefix, a := range next {
		f := family(prefix)
		if old, ok := s.announced[prefix]; ok {
			s.paths[f] -= len(old.hops)
		}
		if len(a.hops) == 0 {
			delete(s.announced, prefix)
			continue
		}
		s.announced[prefix] = a
		s.paths[f] += len(a.hops)
	}
	if b.added+b.withdrawn > 0 {
		s.log.Info("BGP paths converged", "announced", s.paths[0]+s.paths[1], "added", b.added, "replaced", b.replaced, "withdrawn", b.withdrawn)
	}
	return change, nil
}

// Announced returns the number of paths announced now.
func (s *Speaker) Announced() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.paths[0] + s.paths[1]
}

// AnnouncedIn returns the number of IPv4 (or IPv6) paths announced now:
// what a peer that takes the family is sent.
func (s *Speaker) AnnouncedIn(v6 bool) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if v6 {
		return s.paths[1]
	}
	return s.paths[0]
}

// family is 0 for an IPv4 prefix, 1 for IPv6: an index of paths.
func family(p netip.Prefix) int {
	if p.Addr().Is4() {
		return 0
	}
	return 1
}

func comparePrefixes(a, b netip.Prefix) int {
	if c := a.Addr().Compare(b.Addr()); c != 0 {
		return c
	}
	return cmp.Compare(a.Bits(), b.Bits())
}

// sortedUnique returns the addresses sorted and without repeats, copying
// them only when they are not so already.
func sortedUnique(addrs []netip.Addr) []netip.Addr {
	for i := 1; i < len(addrs); i++ {
		if addrs[i-1].Compare(addrs[i]) >= 0 {
			out := slices.Clone(addrs)
			slices.SortFunc(out, netip.Addr.Compare)
			return slices.Compact(out)
		}
	}
	return addrs
}

func sameAddrs(hops []hop, addrs []netip.Addr) bool {
	if len(hops) != len(addrs) {
		return false
	}
	for i, h := range hops {
		if h.addr != addrs[i] {
			return false
		}
	}
	return true
}

// batch sends the paths of one convergence to GoBGP, batchSize at a time
// so that neither it nor GoBGP holds a whole table's worth of requests at
// once. Paths share their attribute values (GoBGP keeps them with every
// path it holds): one origin, one next-hop attribute per next hop.
type batch struct {
	srv              *server.BgpServer
	asn              uint32 // the speaker's, for AS paths it prepends
	add, withdraw    []*apiutil.Path
	added, withdrawn int
	replaced         int // queued in add in place of a path leaving
	origin           bgp.PathAttributeInterface
	nextHops         map[netip.Addr]bgp.PathAttributeInterface
	err              error
}

const batchSize = 5000

func newBatch(srv *server.BgpServer, asn uint32) *batch {
	return &batch{srv: srv, asn: asn, origin: bgp.NewPathAttributeOrigin(bgp.BGP_ORIGIN_ATTR_TYPE_IGP), nextHops: map[netip.Addr]bgp.PathAttributeInterface{}}
}

// flush sends what is queued, withdrawals first: a path that replaces
// another is sent without a withdrawal (see diff), and a prefix's
// withdrawals free identifiers only for its next convergence.
func (b *batch) flush() {
	if b.err == nil && len(b.withdraw) > 0 {
		if err := b.srv.DeletePath(apiutil.DeletePathRequest{Paths: b.withdraw}); err != nil {
			b.err = fmt.Errorf("withdrawing %d paths: %w", len(b.withdraw), err)
		} else {
			b.withdrawn += len(b.withdraw)
		}
	}
	if b.err == nil && len(b.add) > 0 {
		if _, err := b.srv.AddPath(apiutil.AddPathRequest{Paths: b.add}); err != nil {
			b.err = fmt.Errorf("announcing %d paths: %w", len(b.add), err)
		} else {
			b.added += len(b.add)
		}
	}
	b.add, b.withdraw = b.add[:0], b.withdraw[:0]
}

// diff queues what turns old into hops (sorted, unique) with attrs, and
// returns the new state: kept next hops keep their path identifiers, and
// with changed attributes every kept path is sent again.
//
// A new next hop takes the identifier of one that leaves in the same
// convergence, and is sent without that one's withdrawal: GoBGP replaces
// the path in place and keeps its ADD-PATH identifier on the wire, where
// a withdrawal and a new path would give the new one an identifier never
// used before (GoBGP frees none of a prefix's local identifiers while the
// prefix lives). So a VIP keeps identifiers 1 to maximumPaths as its nodes
// change, a restarted speaker sends the same ones again, and a strict
// router replaces every path it kept as stale (FRR 8.4 sweeps at most one
// stale path per prefix, #17372). The router sees one UPDATE, and its
// route goes from the old set of next hops to the new one in one step.
// Only new next hops beyond those leaving get new identifiers, above any
// the prefix has had, as GoBGP gives them on the wire.
func (b *batch) diff(prefix netip.Prefix, old *announced, attrs Attributes, hops []netip.Addr) *announced {
	resend := !old.attrs.equal(attrs)
	was := b.prefix(prefix, old.attrs)
	now := was
	if resend {
		now = b.prefix(prefix, attrs)
	}
	out := &announced{attrs: attrs, hops: make([]hop, 0, len(hops)), top: old.top}
	var added []int   // indexes in out.hops still without an identifier
	var leaving []hop // old next hops not in hops
	i, j := 0, 0
	for i < len(old.hops) || j < len(hops) {
		switch {
		case j == len(hops) || (i < len(old.hops) && old.hops[i].addr.Compare(hops[j]) < 0):
			leaving = append(leaving, old.hops[i])
			i++
		case i == len(old.hops) || old.hops[i].addr.Compare(hops[j]) > 0:
			added = append(added, len(out.hops))
			out.hops = append(out.hops, hop{addr: hops[j]})
			j++
		default:
			out.hops = append(out.hops, old.hops[i])
			if resend {
				b.queue(now, old.hops[i], false)
			}
			i++
			j++
		}
	}
	for len(added) > 0 && len(leaving) > 0 {
		out.hops[added[0]].id = leaving[0].id
		b.queue(now, out.hops[added[0]], false)
		b.replaced++
		added, leaving = added[1:], leaving[1:]
	}
	for _, h := range leaving {
		b.queue(was, h, true)
	}
	for _, k := range added {
		out.top++
		out.hops[k].id = out.top
		b.queue(now, out.hops[k], false)
	}
	return out
}

// prefixPaths is what the paths of one prefix with one set of attributes
// share.
type prefixPaths struct {
	prefix netip.Prefix
	family bgp.Family
	nlri   bgp.NLRI
	attrs  []bgp.PathAttributeInterface // besides origin and next hop
	err    error
}

func (b *batch) prefix(prefix netip.Prefix, a Attributes) *prefixPaths {
	pp := &prefixPaths{prefix: prefix, family: bgp.RF_IPv4_UC}
	if prefix.Addr().Is6() {
		pp.family = bgp.RF_IPv6_UC
	}
	if pp.nlri, pp.err = bgp.NewIPAddrPrefix(prefix); pp.err != nil {
		pp.err = fmt.Errorf("path %s: %w", prefix, pp.err)
		return pp
	}
	if len(a.Communities) > 0 {
		pp.attrs = append(pp.attrs, bgp.NewPathAttributeCommunities(a.Communities))
	}
	if len(a.LargeCommunities) > 0 {
		var lcs []*bgp.LargeCommunity
		for _, c := range a.LargeCommunities {
			lcs = append(lcs, bgp.NewLargeCommunity(c.Global, c.Local1, c.Local2))
		}
		pp.attrs = append(pp.attrs, bgp.NewPathAttributeLargeCommunities(lcs))
	}
	if a.LocalPref != 0 {
		pp.attrs = append(pp.attrs, bgp.NewPathAttributeLocalPref(a.LocalPref))
	}
	if a.HasMED {
		pp.attrs = append(pp.attrs, bgp.NewPathAttributeMultiExitDisc(a.MED))
	}
	if a.Prepend > 0 {
		asns := make([]uint32, a.Prepend)
		for i := range asns {
			asns[i] = b.asn
		}
		pp.attrs = append(pp.attrs, bgp.NewPathAttributeAsPath([]bgp.AsPathParamInterface{bgp.NewAs4PathParam(bgp.BGP_ASPATH_ATTR_TYPE_SEQ, asns)}))
	}
	return pp
}

func (b *batch) queue(pp *prefixPaths, h hop, withdraw bool) {
	if b.err != nil {
		return
	}
	p, err := b.path(pp, h, withdraw)
	if err != nil {
		b.err = err
		return
	}
	if withdraw {
		b.withdraw = append(b.withdraw, p)
	} else {
		b.add = append(b.add, p)
	}
	if len(b.add)+len(b.withdraw) >= batchSize {
		b.flush()
	}
}

func (b *batch) path(pp *prefixPaths, h hop, withdraw bool) (*apiutil.Path, error) {
	if pp.err != nil {
		return nil, pp.err
	}
	attrs := make([]bgp.PathAttributeInterface, 0, 2+len(pp.attrs))
	attrs = append(attrs, b.origin)
	if pp.family == bgp.RF_IPv4_UC {
		nh, ok := b.nextHops[h.addr]
		if !ok {
			var err error
			if nh, err = bgp.NewPathAttributeNextHop(h.addr); err != nil {
				return nil, fmt.Errorf("path %s via %s: %w", pp.prefix, h.addr, err)
			}
			b.nextHops[h.addr] = nh
		}
		attrs = append(attrs, nh)
	} else {
		mp, err := bgp.NewPathAttributeMpReachNLRI(pp.family, []bgp.PathNLRI{{NLRI: pp.nlri, ID: h.id}}, h.addr)
		if err != nil {
			return nil, fmt.Errorf("path %s via %s: %w", pp.prefix, h.addr, err)
		}
		attrs = append(attrs, mp)
	}
	attrs = append(attrs, pp.attrs...)
	return &apiutil.Path{Family: pp.family, Nlri: pp.nlri, Attrs: attrs, RemoteID: h.id, Withdrawal: withdraw}, nil
}

// ResetPeer ends the session with peer at once (a NOTIFICATION with
// why), as when its hold timer expires; it is dialled again.
func (s *Speaker) ResetPeer(ctx context.Context, peer netip.Addr, why string) error {
	return s.srv.ResetPeer(ctx, &api.ResetPeerRequest{Address: peer.String(), Communication: why})
}

// Stop ends every session. With graceful, peers that negotiated graceful
// restart get no NOTIFICATION and keep forwarding on the paths as stale
// until a new speaker (the next leader) re-announces them.
func (s *Speaker) Stop(ctx context.Context, graceful bool) error {
	return s.srv.StopBgp(ctx, &api.StopBgpRequest{AllowGracefulRestart: graceful})
}

// capNextHops keeps at most MaxNextHops of a prefix's next hops (sorted,
// unique), chosen by rendezvous hashing of prefix and next hop: a prefix
// keeps the same subset while its next hops stay, and different prefixes
// spread over different next hops. It reports whether it cut any. The
// load balancer sends no more than a peer's maximumPaths (at most
// MaxNextHops) already; this keeps the speaker's own promise.
func capNextHops(prefix netip.Prefix, hops []netip.Addr) ([]netip.Addr, bool) {
	if len(hops) <= MaxNextHops {
		return hops, false
	}
	names := make([]string, len(hops))
	for i, nh := range hops {
		names[i] = nh.String()
	}
	kept := make([]netip.Addr, 0, MaxNextHops)
	for _, i := range rendezvous.Top(prefix.Addr(), names, MaxNextHops) {
		kept = append(kept, hops[i])
	}
	slices.SortFunc(kept, netip.Addr.Compare)
	return kept, true
}
