package config

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/labels"
)

func TestCheckSite(t *testing.T) {
	const base = `
inventory:
  machines:
  - name: worker-1
    addresses: [{type: InternalIP, address: 10.0.0.11}]
loadBalancer:
  announce: none
  pools:
  - name: p
    addresses: [%s]
`
	pfx := func(s ...string) []netip.Prefix {
		var out []netip.Prefix
		for _, x := range s {
			out = append(out, netip.MustParsePrefix(x))
		}
		return out
	}
	cases := []struct {
		name, pool string
		site       Site
		want       []string // substrings of the error, in any order; none: valid
	}{
		{"clear of everything", "10.0.100.0/24", Site{pfx("10.244.0.0/16"), pfx("10.96.0.0/12")}, nil},
		{"no site given", "10.0.100.0/24", Site{}, nil},
		{"inside the pod CIDR", "10.244.5.0/24", Site{ClusterCIDRs: pfx("10.244.0.0/16")},
			[]string{`loadBalancer.pools[0].addresses[0]: "10.244.5.0/24" overlaps the pod CIDR 10.244.0.0/16 (--cluster-cidr)`}},
		{"a range across the Service CIDR's edge", "10.95.255.250-10.96.0.5", Site{ServiceCIDRs: pfx("10.96.0.0/12")},
			[]string{`overlaps the Service CIDR 10.96.0.0/12 (--service-cluster-ip-range)`}},
		{"a node's address", "10.0.0.0/28", Site{},
			[]string{`loadBalancer.pools[0].addresses[0]: "10.0.0.0/28" holds 10.0.0.11, an address of machine "worker-1"`}},
		{"other family only", "2001:db8::/120", Site{pfx("10.244.0.0/16"), pfx("10.96.0.0/12")}, nil},
		{"IPv6 pod CIDR", "fd00:10:244::/120", Site{ClusterCIDRs: pfx("fd00:10:244::/56")}, []string{"overlaps the pod CIDR fd00:10:244::/56"}},
		{"pod and Service CIDRs overlap", "10.0.100.0/24", Site{pfx("10.0.0.0/8"), pfx("10.96.0.0/12")},
			[]string{"--cluster-cidr 10.0.0.0/8 overlaps --service-cluster-ip-range 10.96.0.0/12"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := Parse([]byte(strings.Replace(base, "%s", c.pool, 1)))
			if err != nil {
				t.Fatal(err)
			}
			err, _ = cfg.CheckSite(c.site)
			if len(c.want) == 0 {
				if err != nil {
					t.Fatalf("want valid, got %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("want %q, got no error", c.want)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

// A selector Kubernetes cannot express matches nothing: a requirement
// dropped would widen it (a ToR sent every rack's nodes, a pool serving
// every Service). Validation refuses such a config; this is the floor
// beneath it.
func TestUnparsableSelectorMatchesNothing(t *testing.T) {
	rack1 := labels.Set{"rack": "r1", "team": "a"}
	for name, c := range map[string]struct {
		sel  LabelSelector
		want bool
	}{
		"valid In":                   {LabelSelector{MatchExpressions: []SelectorRequirement{{Key: "rack", Operator: "In", Values: []string{"r1"}}}}, true},
		"valid In, other rack":       {LabelSelector{MatchExpressions: []SelectorRequirement{{Key: "rack", Operator: "In", Values: []string{"r2"}}}}, false},
		"value with a space":         {LabelSelector{MatchExpressions: []SelectorRequirement{{Key: "rack", Operator: "In", Values: []string{"rack 1"}}}}, false},
		"NotIn with a bad value":     {LabelSelector{MatchExpressions: []SelectorRequirement{{Key: "rack", Operator: "NotIn", Values: []string{"-x"}}}}, false},
		"unknown operator":           {LabelSelector{MatchExpressions: []SelectorRequirement{{Key: "rack", Operator: "Near", Values: []string{"r1"}}}}, false},
		"bad key":                    {LabelSelector{MatchExpressions: []SelectorRequirement{{Key: "a b", Operator: "Exists"}}}, false},
		"In without values":          {LabelSelector{MatchExpressions: []SelectorRequirement{{Key: "rack", Operator: "In"}}}, false},
		"matchLabels with bad key":   {LabelSelector{MatchLabels: map[string]string{"a b": "x"}}, false},
		"matchLabels with bad value": {LabelSelector{MatchLabels: map[string]string{"rack": "r 1"}}, false},
		"empty":                      {LabelSelector{}, true},
	} {
		if got := c.sel.Selector().Matches(rack1); got != c.want {
			t.Errorf("%s: matches %v: %v, want %v", name, rack1, got, c.want)
		}
	}
}

// What can never work is an error; what may be intended (a selector that
// matches no machine today) a warning; each names its field path.
func TestCheckSiteFamiliesAndPeers(t *testing.T) {
	const base = `
inventory:
  machines:
  - {name: w1, zone: hall-a, labels: {rack: r1}, addresses: [{type: InternalIP, address: 10.0.0.11}]}
loadBalancer:
  pools:
  - {name: p, addresses: [%s]}
bgp:
  localASN: 64512
  peers:
  - {address: %s, asn: 64500%s}
`
	for _, c := range []struct {
		name              string
		pool, peer, extra string
		errors, warnings  []string
	}{
		{name: "both families, a peer of both", pool: "192.0.2.0/28, \"2001:db8::/124\"", peer: "10.0.0.1"},
		{name: "an IPv6 pool, an IPv4-only peer", pool: "192.0.2.0/28, \"2001:db8::/124\"", peer: "10.0.0.1", extra: ", addressFamilies: [ipv4-unicast]",
			errors: []string{`loadBalancer.pools[0].addresses[1]: "2001:db8::/124" is announced over BGP, but no peer in bgp.peers takes ipv6-unicast`}},
		{name: "an IPv6-only peer, IPv4 pools", pool: "192.0.2.0/28", peer: "10.0.0.1", extra: ", addressFamilies: [ipv6-unicast]",
			errors: []string{`loadBalancer.pools[0].addresses[0]: "192.0.2.0/28" is announced over BGP, but no peer in bgp.peers takes ipv4-unicast`,
				`bgp.peers[0].addressFamilies: ipv6-unicast only, and no pool announced over BGP has an address of that family and there is no routes section: the peer is sent nothing`}},
		{name: "a peer inside a pool", pool: "10.0.1.0/28", peer: "10.0.1.1",
			errors: []string{`bgp.peers[0].address: "10.0.1.1" is in pool "p" (loadBalancer.pools[0].addresses[0]): a VIP would be the router's own address`}},
		{name: "a selector matching no machine", pool: "192.0.2.0/28", peer: "10.0.0.1", extra: ", nodeSelector: {matchLabels: {rack: rakc1}}",
			warnings: []string{`bgp.peers[0].nodeSelector: matches no machine of the inventory (rack=rakc1): the peer is sent no VIP`}},
		{name: "a selector on the zone", pool: "192.0.2.0/28", peer: "10.0.0.1", extra: ", nodeSelector: {matchLabels: {topology.kubernetes.io/zone: hall-a}}"},
		{name: "a selector on a Node label", pool: "192.0.2.0/28", peer: "10.0.0.1", extra: ", nodeSelector: {matchLabels: {node-restriction.kubernetes.io/rack: r1}}"},
		{name: "a peer no advertisement gives a pool", pool: "192.0.2.0/28", peer: "10.0.0.1", extra: "}\n  - {address: 10.0.0.2, asn: 64500}\n  advertisements:\n  - {pools: [p], peers: [10.0.0.2]",
			errors: []string{"bgp.peers[0]: bgp.advertisements name every pool announced over BGP and give 10.0.0.1 none, and there is no routes section: the peer is sent nothing"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := Parse([]byte(fmt.Sprintf(base, c.pool, c.peer, c.extra)))
			if err != nil {
				t.Fatal(err)
			}
			errs, warnings := cfg.CheckSite(Site{})
			var got []string
			if errs != nil {
				got = strings.Split(errs.Error(), "\n")
			}
			if !slices.Equal(got, c.errors) {
				t.Errorf("errors %q, want %q", got, c.errors)
			}
			got = nil
			for _, w := range warnings {
				got = append(got, w.Error())
			}
			if !slices.Equal(got, c.warnings) {
				t.Errorf("warnings %q, want %q", got, c.warnings)
			}
		})
	}
}
