package metallb

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/config"
)

// FRR-K8s is MetalLB v0.16's default BGP backend: MetalLB writes one
// FRRConfiguration per node (metallb-<node>) from its own resources, and a
// site may add its own, which FRR-K8s merges into every selected node's
// FRR. The converter reads what a site's own add: neighbours it
// advertises pools' VIPs to become peers; what only the nodes' FRR can do
// (receiving routes, raw FRR configuration, VRFs, other prefixes) is
// refused with what to do.

const hostnameLabel = "kubernetes.io/hostname"

// keep ends a refusal of what only the nodes' FRR can do.
const keep = "; keep this FRRConfiguration under FRR-K8s (which may go on running on the nodes for it) without the neighbours converted here"

// generatedByMetalLB reports whether r is one MetalLB writes for a node:
// named metallb-<node>, selecting that node by hostname.
func generatedByMetalLB(r resource, s frrConfigurationSpec) bool {
	node, ok := strings.CutPrefix(r.Metadata.Name, "metallb-")
	return ok && s.NodeSelector != nil && len(s.NodeSelector.MatchExpressions) == 0 &&
		maps.Equal(s.NodeSelector.MatchLabels, map[string]string{hostnameLabel: node})
}

// frrConfiguration converts a site's own FRRConfiguration, field by field.
func (c *converter) frrConfiguration(r resource) {
	var s frrConfigurationSpec
	if !c.spec(r, &s) {
		return
	}
	if generatedByMetalLB(r, s) {
		c.note(r, "", "written by MetalLB for node %s from the MetalLB resources of this dump, which are converted: nothing of its own", strings.TrimPrefix(r.Metadata.Name, "metallb-"))
		return
	}
	if s.Raw.Config != "" {
		c.refuse(r, "spec.raw.rawConfig", "raw FRR configuration is for the nodes' FRR; the CCM is not FRR"+keep)
	}
	var selectors []metav1.LabelSelector
	if s.NodeSelector != nil && (len(s.NodeSelector.MatchLabels) > 0 || len(s.NodeSelector.MatchExpressions) > 0) {
		selectors = []metav1.LabelSelector{*s.NodeSelector}
	}
	profiles := map[string]bfdProfileSpec{}
	for _, p := range s.BGP.BFDProfiles {
		profiles[p.Name] = p.bfdProfileSpec
	}
	for i, rt := range s.BGP.Routers {
		at := fmt.Sprintf("spec.bgp.routers[%d]", i)
		if rt.ID != "" {
			c.note(r, at+".id", "%q left out: each replica has its own router ID (its address)", rt.ID)
		}
		if rt.VRF != "" {
			c.refuse(r, at+".vrf", "%q: sessions in a VRF are not supported", rt.VRF)
		}
		if len(rt.Imports) > 0 {
			c.refuse(r, at+".imports", "route leaking between VRFs is the nodes' FRR's"+keep)
		}
		prefixes := c.poolsOfPrefixes(r, at+".prefixes", rt.Prefixes)
		for j, n := range rt.Neighbors {
			c.frrNeighbor(r, fmt.Sprintf("%s.neighbors[%d]", at, j), rt.ASN, n, selectors, profiles, prefixes)
		}
	}
}

// poolsOfPrefixes maps each prefix a router advertises to the pool whose
// addresses hold it; a prefix in no pool is refused.
func (c *converter) poolsOfPrefixes(r resource, at string, prefixes []string) map[string]string {
	out := map[string]string{}
	for k, p := range prefixes {
		pfx, err := netip.ParsePrefix(p)
		if err != nil {
			c.refuse(r, fmt.Sprintf("%s[%d]", at, k), "%q is not a prefix", p)
			continue
		}
		if name := c.poolHolding(pfx); name != "" {
			out[p] = name
			continue
		}
		c.refuse(r, fmt.Sprintf("%s[%d]", at, k), "%s is in no IPAddressPool: the CCM announces its pools' VIPs only", p)
	}
	return out
}

// poolHolding is the pool whose addresses hold all of pfx, or "".
func (c *converter) poolHolding(pfx netip.Prefix) string {
	want, err := config.ParseAddressRange(pfx.Masked().String())
	if err != nil {
		return ""
	}
	for _, p := range c.pools {
		for _, a := range p.out.Addresses {
			if rng, err := config.ParseAddressRange(a); err == nil && rng.Contains(want.First) && rng.Contains(want.Last) {
				return p.name
			}
		}
	}
	return ""
}

// frrNeighbor converts one neighbour of a site's FRRConfiguration to a
// peer that is sent the pools of the prefixes it may be advertised.
func (c *converter) frrNeighbor(r resource, at string, asn uint32, n frrNeighbor, selectors []metav1.LabelSelector, profiles map[string]bfdProfileSpec, prefixes map[string]string) {
	router, _, _ := strings.Cut(at, ".neighbors")
	names := map[string]string{"myASN": router + ".asn", "peerASN": at + ".asn", "localASN": at + ".localASN",
		"dynamicASN": at + ".dynamicASN", "peerAddress": at + ".address", "interface": at + ".interface",
		"sourceAddress": at + ".sourceaddress", "password": at + ".password", "passwordSecret": at + ".passwordSecret",
		"nodeSelectors": "spec.nodeSelector", "bfdProfile": at + ".bfdProfile", "enableGracefulRestart": at + ".enableGracefulRestart",
		"disableMP": at + ".disableMP", "vrf": router + ".vrf"}
	field := func(f string) string {
		if n, ok := names[f]; ok {
			return n
		}
		return at + "." + f
	}
	if slices.ContainsFunc(c.peers, func(p peerOut) bool { return p.Address == n.Address }) {
		c.refuse(r, at+".address", "%s is also a BGPPeer's: FRR-K8s merges the two sessions into one; merge what this neighbour adds into the BGPPeer, or leave it to FRR-K8s", n.Address)
		return
	}
	if len(n.ToReceive.Allowed.Prefixes) > 0 || n.ToReceive.Allowed.Mode == "all" {
		c.refuse(r, at+".toReceive", "the CCM takes no routes from routers: routes the nodes learn are the nodes' FRR's"+keep)
	}
	if len(n.ToAdvertise.PrefixesWithLocalPref) > 0 {
		c.refuse(r, at+".toAdvertise.withLocalPref", "attributes are per pool here, not per prefix: give the pool's bgp.localPreference (or a bgp.advertisements entry for this peer)")
	}
	if len(n.ToAdvertise.PrefixesWithCommunity) > 0 {
		c.refuse(r, at+".toAdvertise.withCommunity", "attributes are per pool here, not per prefix: give the pool's bgp.communities (or a bgp.advertisements entry for this peer)")
	}
	var pools []string
	switch {
	case n.ToAdvertise.Allowed.Mode == "all":
		pools = slices.Collect(maps.Values(prefixes))
		if len(prefixes) == 0 {
			// Every prefix of the node's router: MetalLB's VIPs too.
			for _, p := range c.pools {
				pools = append(pools, p.name)
			}
		}
	case len(n.ToAdvertise.Allowed.Prefixes) > 0:
		for k, p := range n.ToAdvertise.Allowed.Prefixes {
			pool, ok := prefixes[p]
			if !ok {
				c.refuse(r, fmt.Sprintf("%s.toAdvertise.allowed.prefixes[%d]", at, k), "%s is not among the router's prefixes in a pool", p)
				continue
			}
			pools = append(pools, pool)
		}
	default:
		c.refuse(r, at+".toAdvertise", "advertises nothing: a session for the nodes to receive routes, which the CCM does not take"+keep)
	}
	slices.Sort(pools)
	pools = slices.Compact(pools)
	spec := bgpPeerSpec{MyASN: asn, PeerASN: n.ASN, LocalASN: n.LocalASN, DynamicASN: n.DynamicASN, PeerAddress: n.Address,
		Interface: n.Interface, SourceAddress: n.SourceAddress, HoldTime: n.HoldTime, KeepaliveTime: n.KeepaliveTime,
		ConnectTime: n.ConnectTime, NodeSelectors: selectors, Password: n.Password, PasswordSecret: n.PasswordSecret,
		EnableGracefulRestart: n.EnableGracefulRestart, EBGPMultiHop: n.EBGPMultiHop, DisableMP: n.DisableMP,
		DualStackAddressFamily: n.DualStackAddressFamily}
	if n.Port != nil {
		spec.PeerPort = *n.Port
	}
	out, ok := c.peerOf(r, spec, field)
	if n.BFDProfile != "" {
		if b, found := profiles[n.BFDProfile]; found {
			out.BFD = c.bfdOut(r, at+".bfdProfile", n.BFDProfile, b, n.EBGPMultiHop)
		} else {
			c.refuse(r, at+".bfdProfile", "no bfdProfiles entry %q in this FRRConfiguration", n.BFDProfile)
		}
	}
	if !ok || c.dropped[r.ref] {
		return
	}
	c.frrPeers = append(c.frrPeers, frrPeer{ref: r.ref, out: out, pools: pools})
	c.note(r, at, "peer %s, sent the VIPs of pools %v as host routes with the nodes that serve them (not the prefixes themselves)", out.Address, pools)
}

// frrPeer is a neighbour converted, kept until its FRRConfiguration is
// known to be converted whole.
type frrPeer struct {
	ref   string
	out   peerOut
	pools []string
}

// placeFRRPeers adds the converted neighbours of the FRRConfigurations
// left whole, each with the advertisement of its pools, and makes the
// advertisements per peer, so that MetalLB's own go to its BGPPeers only.
func (c *converter) placeFRRPeers() {
	for i, p := range c.frrPeers {
		if c.dropped[p.ref] {
			continue
		}
		name := fmt.Sprintf("%s#%d", p.ref, i)
		c.peerAddrs[name] = p.out.Address
		c.peers = append(c.peers, p.out)
		c.frrPeerNames = append(c.frrPeerNames, name)
		c.ads = append(c.ads, adOut{ref: p.ref, attrs: &poolBGPOut{}, peerNames: []string{name}, pools: p.pools,
			resource: resource{ref: p.ref}})
	}
}
