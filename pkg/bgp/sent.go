package bgp

import (
	"fmt"
	"net/netip"
	"slices"

	"github.com/osrg/gobgp/v4/api"
	"github.com/osrg/gobgp/v4/pkg/apiutil"
	"github.com/osrg/gobgp/v4/pkg/packet/bgp"
)

// Sent is what the speaker sends peer now, read from its Adj-RIB-Out: for
// each prefix, the next hops of the paths the peer gets (all of them with
// ADD-PATH, the best one without). It is asked for on demand (the status
// page), never on the announcing path.
func (s *Speaker) Sent(peer netip.Addr) (map[netip.Prefix][]netip.Addr, error) {
	sent := map[netip.Prefix][]netip.Addr{}
	for _, family := range []bgp.Family{bgp.RF_IPv4_UC, bgp.RF_IPv6_UC} {
		var bad error
		err := s.srv.ListPath(apiutil.ListPathRequest{TableType: api.TableType_TABLE_TYPE_ADJ_OUT, Name: peer.String(), Family: family},
			func(nlri bgp.NLRI, paths []*apiutil.Path) {
				prefix, err := netip.ParsePrefix(nlri.String())
				if err != nil {
					bad = fmt.Errorf("a path to %s for %q: %w", peer, nlri, err)
					return
				}
				for _, p := range paths {
					if p.Withdrawal || p.Filtered || p.SendMaxFiltered {
						continue
					}
					if hop := nextHopOf(p); hop.IsValid() && !slices.Contains(sent[prefix], hop) {
						sent[prefix] = append(sent[prefix], hop)
					}
				}
			})
		if err != nil {
			return nil, fmt.Errorf("the paths sent to %s: %w", peer, err)
		}
		if bad != nil {
			return nil, bad
		}
	}
	for _, hops := range sent {
		slices.SortFunc(hops, netip.Addr.Compare)
	}
	return sent, nil
}

func nextHopOf(p *apiutil.Path) netip.Addr {
	for _, a := range p.Attrs {
		switch a := a.(type) {
		case *bgp.PathAttributeNextHop:
			return a.Value
		case *bgp.PathAttributeMpReachNLRI:
			return a.Nexthop
		}
	}
	return netip.Addr{}
}
