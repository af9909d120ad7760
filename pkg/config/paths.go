package config

import (
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
)

// DefaultMaximumPaths is a peer's maximumPaths when it sets none: every
// eligible node, up to GoBGP's limit. Not a router's width: after a
// restart, FRR 8.4 keeps as stale (and in use) the ADD-PATH paths of a
// prefix the restarted speaker does not send again, and GoBGP numbers a
// prefix's paths anew for every next hop it ever had, so a subset that
// changed while the CCM ran (nodes joining, health flaps) leaves paths via
// nodes no longer chosen. Until that is solved, a site opts in.
const DefaultMaximumPaths = MaxMaximumPaths

// PathSelection is what a router is sent: of each VIP's nodes, at most
// MaximumPaths of those NodeSelector matches; of the pools, those the
// advertisements give it.
type PathSelection struct {
	MaximumPaths int
	// MaximumLoad, if non-zero, bounds a node's paths to that multiple
	// of the mean.
	MaximumLoad  float64
	NodeSelector *LabelSelector // nil: every node
	// Advertised are the pools some advertisement names (of every peer's).
	Advertised map[string]bool
	// Ads are the indexes in bgp.advertisements of those that give the
	// peers pools, and Advertisements those advertisements.
	Ads            []int
	Advertisements []Advertisement
}

// Selection is the peer's choice of next hops.
func (p *Peer) Selection() PathSelection {
	return PathSelection{MaximumPaths: p.MaximumPaths, MaximumLoad: p.MaximumLoad, NodeSelector: p.NodeSelector}
}

// Key names the selection: peers with equal keys are sent the same paths.
func (s PathSelection) Key() string {
	key := fmt.Sprint(s.MaximumPaths)
	if s.NodeSelector != nil {
		key = fmt.Sprintf("%d %s", s.MaximumPaths, s.NodeSelector.Selector())
	}
	if s.MaximumLoad != 0 {
		key += fmt.Sprintf(" load %g", s.MaximumLoad)
	}
	if len(s.Ads) > 0 {
		key += fmt.Sprintf(" advertisements %v", s.Ads)
	}
	return key
}

// Announces is whether the selection's peers are sent pool, and the
// advertisement whose attributes go with it (nil: the pool's own only).
func (s PathSelection) Announces(pool string) (*Advertisement, bool) {
	if !s.Advertised[pool] {
		return nil, true
	}
	for i := range s.Advertisements {
		if slices.Contains(s.Advertisements[i].Pools, pool) {
			return &s.Advertisements[i], true
		}
	}
	return nil, false
}

// Selections are the distinct selections of the peers, in the order they
// first appear, each with the indexes of its peers.
func (b *BGP) Selections() (sels []PathSelection, peers [][]int) {
	advertised := map[string]bool{}
	for _, ad := range b.Advertisements {
		for _, p := range ad.Pools {
			advertised[p] = true
		}
	}
	var keys []string
	for i := range b.Peers {
		s := b.Peers[i].Selection()
		s.Advertised = advertised
		for j, ad := range b.Advertisements {
			if len(ad.Peers) == 0 || slices.ContainsFunc(ad.Peers, func(a string) bool { return samePeer(a, b.Peers[i].Address) }) {
				s.Ads, s.Advertisements = append(s.Ads, j), append(s.Advertisements, ad)
			}
		}
		k := slices.Index(keys, s.Key())
		if k < 0 {
			keys, sels, peers = append(keys, s.Key()), append(sels, s), append(peers, nil)
			k = len(keys) - 1
		}
		peers[k] = append(peers[k], i)
	}
	return sels, peers
}

// Selector is the label selector as Kubernetes evaluates it. A selector
// Kubernetes cannot express selects nothing, never everything: dropping a
// requirement it rejects would widen it (a ToR sent every rack's nodes, a
// pool serving every Service). Validation refuses such a config first.
func (sel *LabelSelector) Selector() labels.Selector {
	s, err := labels.ValidatedSelectorFromSet(sel.MatchLabels)
	if err != nil {
		return labels.Nothing()
	}
	for _, e := range sel.MatchExpressions {
		op, ok := map[string]selection.Operator{"In": selection.In, "NotIn": selection.NotIn, "Exists": selection.Exists, "DoesNotExist": selection.DoesNotExist}[e.Operator]
		if !ok {
			return labels.Nothing()
		}
		r, err := labels.NewRequirement(e.Key, op, e.Values)
		if err != nil {
			return labels.Nothing()
		}
		s = s.Add(*r)
	}
	return s
}
