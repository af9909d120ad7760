// Package bgp is the BGP speaker: it takes the desired set of paths and
// converges the sessions to it. It knows nothing of Kubernetes.
package bgp

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/osrg/gobgp/v4/api"
	"github.com/osrg/gobgp/v4/pkg/apiutil"
	"github.com/osrg/gobgp/v4/pkg/packet/bgp"
	"github.com/osrg/gobgp/v4/pkg/server"
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

// Path is one announcement: a prefix via a next hop, with its attributes.
type Path struct {
	Prefix           netip.Prefix
	NextHop          netip.Addr
	Communities      []uint32
	LargeCommunities []LargeCommunity
	// LocalPref, if non-zero, is sent to iBGP peers.
	LocalPref uint32
}

type pathKey struct {
	prefix  netip.Prefix
	nextHop netip.Addr
}

// PeerState is what a peer's session is doing.
type PeerState struct {
	Address     netip.Addr
	ASN         uint32
	State       string // idle, connect, active, opensent, openconfirm, established
	Established bool
}

// Speaker announces paths from an in-process GoBGP server.
type Speaker struct {
	srv *server.BgpServer
	log *slog.Logger

	mu        sync.Mutex
	announced map[pathKey]announced
	peers     map[netip.Addr]Peer
	// capped is how many prefixes capNextHops cut at the last convergence.
	capped int

	// OnPeerState, if set, is called on every session state change.
	OnPeerState func(PeerState)
}

type announced struct {
	path Path
	id   uint32 // ADD-PATH path identifier, unique per prefix
}

// Start runs the speaker and connects to the peers.
func Start(ctx context.Context, cfg Config, log *slog.Logger, onPeerState func(PeerState)) (*Speaker, error) {
	level := &slog.LevelVar{}
	level.Set(slog.LevelWarn)
	s := &Speaker{
		srv:         server.NewBgpServer(server.LoggerOption(log, level)),
		log:         log,
		announced:   map[pathKey]announced{},
		peers:       map[netip.Addr]Peer{},
		OnPeerState: onPeerState,
	}
	go s.srv.Serve()
	listen := int32(-1)
	if cfg.ListenPort != 0 {
		listen = int32(cfg.ListenPort)
	}
	if err := s.srv.StartBgp(ctx, &api.StartBgpRequest{Global: &api.Global{
		Asn: cfg.ASN, RouterId: cfg.RouterID.String(), ListenPort: listen, ListenAddresses: cfg.ListenAddresses,
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
	}
	s.log.Info("BGP session state changed", "peer", st.Address, "asn", st.ASN, "state", st.State, "reason", ev.Peer.State.DisconnectMessage)
	if st.Established && !receivesAddPath(ev.Peer.State.RemoteCap) {
		// GoBGP then sends its best path: of our paths for a prefix, the
		// one it has held longest, which stays until that next hop goes.
		s.log.Info("BGP peer did not negotiate ADD-PATH receive: it gets one next hop per VIP, not all of them, so no ECMP", "peer", st.Address)
	}
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
	for addr, p := range want {
		if _, ok := s.peers[addr]; ok {
			continue
		}
		if err := s.srv.AddPeer(ctx, &api.AddPeerRequest{Peer: apiPeer(p)}); err != nil {
			errs = append(errs, fmt.Errorf("adding BGP peer %s: %w", addr, err))
			continue
		}
		s.peers[addr] = p
	}
	return errors.Join(errs...)
}

func apiPeer(p Peer) *api.Peer {
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
		GracefulRestart: &api.GracefulRestart{Enabled: p.GracefulRestart, RestartTime: uint32(p.RestartTime / time.Second)},
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

// Change counts what one SetPaths sent.
type Change struct{ Announced, Withdrawn int }

// SetPaths converges what is announced to paths: new paths are added,
// changed ones re-announced, and those no longer wanted withdrawn, each in
// one batch. A path that did not change is not sent again.
func (s *Speaker) SetPaths(paths []Path) (Change, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	paths, capped := capNextHops(paths)
	if capped != s.capped {
		s.capped = capped
		if capped > 0 {
			s.log.Warn("Prefixes with more next hops than can be announced: each gets a stable subset", "prefixes", capped, "maxNextHops", MaxNextHops)
		}
	}
	want := map[pathKey]Path{}
	for _, p := range paths {
		want[pathKey{p.Prefix.Masked(), p.NextHop}] = p
	}
	var withdraw []*apiutil.Path
	for k, a := range s.announced {
		if _, ok := want[k]; !ok {
			ap, err := apiPath(a.path, a.id, true)
			if err != nil {
				return Change{}, err
			}
			withdraw = append(withdraw, ap)
		}
	}
	used := map[netip.Prefix][]uint32{}
	for k, a := range s.announced {
		if _, ok := want[k]; ok {
			used[k.prefix] = append(used[k.prefix], a.id)
		}
	}
	var add []*apiutil.Path
	next := map[pathKey]announced{}
	for _, k := range sortedKeys(want) {
		p := want[k]
		a, ok := s.announced[k]
		if !ok {
			a.id = freeID(used[k.prefix])
			used[k.prefix] = append(used[k.prefix], a.id)
		}
		changed := !ok || !pathEqual(a.path, p)
		a.path = p
		next[k] = a
		if changed {
			ap, err := apiPath(p, a.id, false)
			if err != nil {
				return Change{}, err
			}
			add = append(add, ap)
		}
	}
	if len(withdraw) > 0 {
		if err := s.srv.DeletePath(apiutil.DeletePathRequest{Paths: withdraw}); err != nil {
			return Change{}, fmt.Errorf("withdrawing %d paths: %w", len(withdraw), err)
		}
	}
	if len(add) > 0 {
		if _, err := s.srv.AddPath(apiutil.AddPathRequest{Paths: add}); err != nil {
			return Change{Withdrawn: len(withdraw)}, fmt.Errorf("announcing %d paths: %w", len(add), err)
		}
	}
	s.announced = next
	if len(add)+len(withdraw) > 0 {
		s.log.Info("BGP paths converged", "announced", len(next), "added", len(add), "withdrawn", len(withdraw))
	}
	return Change{Announced: len(add), Withdrawn: len(withdraw)}, nil
}

// Announced returns the number of paths announced now.
func (s *Speaker) Announced() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.announced)
}

func sortedKeys(m map[pathKey]Path) []pathKey {
	keys := make([]pathKey, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b pathKey) int {
		if c := a.prefix.Addr().Compare(b.prefix.Addr()); c != 0 {
			return c
		}
		return a.nextHop.Compare(b.nextHop)
	})
	return keys
}

func freeID(used []uint32) uint32 {
	for id := uint32(1); ; id++ {
		if !slices.Contains(used, id) {
			return id
		}
	}
}

func pathEqual(a, b Path) bool {
	return a.Prefix == b.Prefix && a.NextHop == b.NextHop && a.LocalPref == b.LocalPref &&
		slices.Equal(a.Communities, b.Communities) && slices.Equal(a.LargeCommunities, b.LargeCommunities)
}

func apiPath(p Path, id uint32, withdraw bool) (*apiutil.Path, error) {
	nlri, err := bgp.NewIPAddrPrefix(p.Prefix.Masked())
	if err != nil {
		return nil, fmt.Errorf("path %s: %w", p.Prefix, err)
	}
	family := bgp.RF_IPv4_UC
	if p.Prefix.Addr().Is6() {
		family = bgp.RF_IPv6_UC
	}
	attrs := []bgp.PathAttributeInterface{bgp.NewPathAttributeOrigin(bgp.BGP_ORIGIN_ATTR_TYPE_IGP)}
	if family == bgp.RF_IPv4_UC {
		nh, err := bgp.NewPathAttributeNextHop(p.NextHop)
		if err != nil {
			return nil, fmt.Errorf("path %s via %s: %w", p.Prefix, p.NextHop, err)
		}
		attrs = append(attrs, nh)
	} else {
		mp, err := bgp.NewPathAttributeMpReachNLRI(family, []bgp.PathNLRI{{NLRI: nlri, ID: id}}, p.NextHop)
		if err != nil {
			return nil, fmt.Errorf("path %s via %s: %w", p.Prefix, p.NextHop, err)
		}
		attrs = append(attrs, mp)
	}
	if len(p.Communities) > 0 {
		attrs = append(attrs, bgp.NewPathAttributeCommunities(p.Communities))
	}
	if len(p.LargeCommunities) > 0 {
		var lcs []*bgp.LargeCommunity
		for _, c := range p.LargeCommunities {
			lcs = append(lcs, bgp.NewLargeCommunity(c.Global, c.Local1, c.Local2))
		}
		attrs = append(attrs, bgp.NewPathAttributeLargeCommunities(lcs))
	}
	if p.LocalPref != 0 {
		attrs = append(attrs, bgp.NewPathAttributeLocalPref(p.LocalPref))
	}
	return &apiutil.Path{Family: family, Nlri: nlri, Attrs: attrs, RemoteID: id, Withdrawal: withdraw}, nil
}

// Stop ends every session. With graceful, peers that negotiated graceful
// restart get no NOTIFICATION and keep forwarding on the paths as stale
// until a new speaker (the next leader) re-announces them.
func (s *Speaker) Stop(ctx context.Context, graceful bool) error {
	return s.srv.StopBgp(ctx, &api.StopBgpRequest{AllowGracefulRestart: graceful})
}

// capNextHops keeps at most MaxNextHops paths per prefix, chosen by
// rendezvous hashing of prefix and next hop: a prefix keeps the same
// subset while its next hops stay, and different prefixes spread over
// different next hops. It returns how many prefixes were cut.
func capNextHops(paths []Path) ([]Path, int) {
	count := map[netip.Prefix]int{}
	cut := false
	for _, p := range paths {
		count[p.Prefix.Masked()]++
		cut = cut || count[p.Prefix.Masked()] > MaxNextHops
	}
	// The usual case, on every convergence: nothing to cut, nothing to copy.
	if !cut {
		return paths, 0
	}
	over := map[netip.Prefix][]Path{}
	var kept []Path
	for _, p := range paths {
		if count[p.Prefix.Masked()] > MaxNextHops {
			over[p.Prefix.Masked()] = append(over[p.Prefix.Masked()], p)
		} else {
			kept = append(kept, p)
		}
	}
	for prefix, ps := range over {
		score := func(p Path) uint64 {
			h := fnv.New64a()
			b, _ := prefix.MarshalBinary()
			h.Write(b)
			b, _ = p.NextHop.MarshalBinary()
			h.Write(b)
			return h.Sum64()
		}
		slices.SortFunc(ps, func(a, b Path) int { return cmp.Compare(score(a), score(b)) })
		kept = append(kept, ps[:MaxNextHops]...)
	}
	return kept, len(over)
}
