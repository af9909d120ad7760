package metallb

import (
	"strings"
	"testing"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/config"
)

const peerCR = `
- apiVersion: metallb.io/v1beta2
  kind: BGPPeer
  metadata: {name: tor, namespace: metallb-system}
  spec: {myASN: 64512, peerASN: 64500, peerAddress: 10.0.0.1, enableGracefulRestart: true}
`

const poolCR = `
- apiVersion: metallb.io/v1beta1
  kind: IPAddressPool
  metadata: {name: public, namespace: metallb-system, labels: {tier: front}}
  spec: {addresses: [192.0.2.0/28]}
`

const bgpAd = `
- apiVersion: metallb.io/v1beta1
  kind: BGPAdvertisement
  metadata: {name: adv, namespace: metallb-system}
  spec: {%s}
`

func list(items ...string) string {
	return "apiVersion: v1\nkind: List\nitems:" + strings.Join(items, "")
}

func ad(spec string) string { return strings.Replace(bgpAd, "%s", spec, 1) }

// Each row is one MetalLB field: what the converted config holds (want,
// fragments of its YAML), or which field is refused (refused, the
// refusal's "Kind ns/name: field" prefix), or which note says how its
// meaning changed.
func TestConvert(t *testing.T) {
	for _, tc := range []struct {
		name    string
		dump    string
		opts    Options
		want    []string
		absent  []string
		refused string
		note    string
	}{
		{name: "a poolCR announced over BGP", dump: list(poolCR, ad(""), peerCR),
			want: []string{"- name: public\n      addresses: [192.0.2.0/28]\n      announce: bgp", "localASN: 64512", "- address: 10.0.0.1\n      asn: 64500\n      addressFamilies: [ipv4-unicast]"}},
		{name: "YAML documents instead of a List", dump: strings.ReplaceAll(strings.ReplaceAll(poolCR+ad("")+peerCR, "\n- ", "\n---\n"), "\n  ", "\n"),
			want: []string{"announce: bgp"}},
		{name: "a poolCR no advertisement names", dump: list(poolCR), want: []string{"announce: none"}, note: "IPAddressPool metallb-system/public: no advertisement"},
		{name: "autoAssign and avoidBuggyIPs", dump: list(strings.Replace(poolCR, "spec: {", "spec: {autoAssign: false, avoidBuggyIPs: true, ", 1)),
			want: []string{"autoAssign: false", "avoidBuggyIPs: true"}},
		{name: "a range of addresses and IPv6", dump: list(strings.Replace(poolCR, "192.0.2.0/28", "192.0.2.10-192.0.2.20, 2001:db8::/124", 1)),
			want: []string{"addresses: [192.0.2.10-192.0.2.20, '2001:db8::/124']"}},
		{name: "bad addresses", dump: list(strings.Replace(poolCR, "192.0.2.0/28", "192.0.2.300/28", 1)), refused: "IPAddressPool metallb-system/public: spec.addresses[0]"},
		{name: "a poolCR name that is not a label", dump: list(strings.Replace(poolCR, "name: public", "name: pub.lic", 1)), refused: "IPAddressPool metallb-system/pub.lic: metadata.name"},
		{name: "priority orders the pools", dump: list(
			strings.Replace(strings.Replace(poolCR, "spec: {", "spec: {serviceAllocation: {priority: 20, namespaces: [a]}, ", 1), "name: public", "name: b", 1),
			strings.Replace(strings.Replace(poolCR, "192.0.2.0/28", "192.0.2.16/28", 1), "name: public", "name: c", 1),
			strings.Replace(strings.Replace(poolCR, "spec: {", "spec: {serviceAllocation: {priority: 10, namespaces: [a]}, ", 1), "192.0.2.0/28", "192.0.2.32/28", 1)),
			want: []string{"- name: public\n      addresses: [192.0.2.32/28]\n      namespaces: [a]\n      announce: none\n    - name: b\n", "- name: b\n      addresses: [192.0.2.0/28]\n      namespaces: [a]\n      announce: none\n    - name: c\n"}},
		{name: "a priority alone selects no Service", dump: list(strings.Replace(poolCR, "spec: {", "spec: {serviceAllocation: {priority: 10}, ", 1)),
			want: []string{"autoAssign: false"}, note: "IPAddressPool metallb-system/public: spec.serviceAllocation"},
		{name: "namespaces", dump: list(strings.Replace(poolCR, "spec: {", "spec: {serviceAllocation: {namespaces: [web, shop]}, ", 1)), want: []string{"namespaces: [web, shop]"}},
		{name: "one service selector", dump: list(strings.Replace(poolCR, "spec: {", "spec: {serviceAllocation: {serviceSelectors: [{matchLabels: {app: web}}]}, ", 1)),
			want: []string{"serviceSelector:\n        matchLabels:\n          app: web"}},
		{name: "two service selectors", dump: list(strings.Replace(poolCR, "spec: {", "spec: {serviceAllocation: {serviceSelectors: [{matchLabels: {app: web}}, {matchLabels: {app: shop}}]}, ", 1)),
			refused: "IPAddressPool metallb-system/public: spec.serviceAllocation.serviceSelectors"},
		{name: "a namespace selector", dump: list(strings.Replace(poolCR, "spec: {", "spec: {serviceAllocation: {namespaceSelectors: [{matchLabels: {team: a}}]}, ", 1)),
			want: []string{"namespaceSelector:\n        matchLabels:\n          team: a"}},
		{name: "a namespace selector with a priority", dump: list(strings.Replace(poolCR, "spec: {", "spec: {serviceAllocation: {priority: 10, namespaceSelectors: [{matchLabels: {team: a}}]}, ", 1)),
			want: []string{"namespaceSelector:\n        matchLabels:\n          team: a"}, absent: []string{"autoAssign"}},
		{name: "two namespace selectors", dump: list(strings.Replace(poolCR, "spec: {", "spec: {serviceAllocation: {namespaceSelectors: [{matchLabels: {team: a}}, {matchLabels: {team: b}}]}, ", 1)),
			refused: "IPAddressPool metallb-system/public: spec.serviceAllocation.namespaceSelectors: 2 selectors"},
		{name: "a field this converter does not know", dump: list(strings.Replace(poolCR, "spec: {", "spec: {shiny: true, ", 1)), refused: `IPAddressPool metallb-system/public: spec: unknown field "shiny"`},
		{name: "an advertisement's pools by label", dump: list(poolCR, ad("ipAddressPoolSelectors: [{matchLabels: {tier: back}}]"), peerCR), want: []string{"announce: none"}},
		{name: "localPref and communities with an alias", dump: list(poolCR, ad("localPref: 50, communities: [no-export, '64512:7', 'large:64512:1:2']"), peerCR, `
- apiVersion: metallb.io/v1beta1
  kind: Community
  metadata: {name: aliases, namespace: metallb-system}
  spec: {communities: [{name: no-export, value: "65535:65281"}]}
`), want: []string{`communities: ['65535:65281', "64512:7"]`, `largeCommunities: ["64512:1:2"]`, "localPreference: 50"}},
		{name: "aggregation at the host length", dump: list(poolCR, ad("aggregationLength: 32, aggregationLengthV6: 128"), peerCR), want: []string{"announce: bgp"}},
		{name: "aggregationLength", dump: list(poolCR, ad("aggregationLength: 24"), peerCR), refused: "BGPAdvertisement metallb-system/adv: spec.aggregationLength"},
		{name: "aggregationLengthV6", dump: list(poolCR, ad("aggregationLengthV6: 64"), peerCR), refused: "BGPAdvertisement metallb-system/adv: spec.aggregationLengthV6"},
		{name: "asPathPrepend", dump: list(poolCR, ad("asPathPrepend: 2"), peerCR),
			want: []string{"advertisements:\n    - pools: [public]\n      peers: [10.0.0.1]\n      asPathPrepend: 2"}},
		{name: "asPathPrepend beyond 10", dump: list(poolCR, ad("asPathPrepend: 11"), peerCR), refused: "BGPAdvertisement metallb-system/adv: spec.asPathPrepend"},
		{name: "nodeSelectors on an advertisement", dump: list(poolCR, ad("nodeSelectors: [{matchLabels: {rack: a}}]"), peerCR), refused: "BGPAdvertisement metallb-system/adv: spec.nodeSelectors"},
		{name: "serviceSelectors on an advertisement", dump: list(poolCR, ad("serviceSelectors: [{matchLabels: {app: a}}]"), peerCR), refused: "BGPAdvertisement metallb-system/adv: spec.serviceSelectors"},
		{name: "an advertisement to every peerCR by name", dump: list(poolCR, ad("peers: [tor]"), peerCR), want: []string{"announce: bgp"}},
		{name: "an advertisement to some peers", dump: list(poolCR, ad("peers: [tor], communities: ['64512:7']"), peerCR, strings.Replace(strings.Replace(peerCR, "name: tor", "name: tor2", 1), "10.0.0.1", "10.0.0.2", 1)),
			want: []string{"advertisements:\n    - pools: [public]\n      peers: [10.0.0.1]\n      communities: [\"64512:7\"]"}},
		{name: "a peer that is not in the dump", dump: list(poolCR, ad("peers: [gone]"), peerCR), refused: "BGPAdvertisement metallb-system/adv: spec.peers: no BGPPeer \"gone\""},
		{name: "per-peer attributes that clash", dump: list(poolCR, ad("peers: [tor], localPref: 50"), strings.Replace(ad("localPref: 60"), "name: adv", "name: adv2", 1), strings.Replace(peerCR, "peerASN: 64500", "peerASN: 64512", 1), strings.Replace(strings.Replace(peerCR, "name: tor", "name: tor2", 1), "10.0.0.1", "10.0.0.2", 1)),
			refused: "BGPAdvertisement metallb-system/adv2: spec: gives pool \"public\" other attributes than BGPAdvertisement metallb-system/adv does for peer tor"},
		{name: "localPref to iBGP peers only", dump: list(poolCR, ad("peers: [tor, tor2], localPref: 50"), strings.Replace(peerCR, "peerASN: 64500", "peerASN: 64512", 1), strings.Replace(strings.Replace(peerCR, "name: tor", "name: tor2", 1), "10.0.0.1", "10.0.0.2", 1), strings.Replace(strings.Replace(peerCR, "name: tor", "name: tor3", 1), "10.0.0.1", "10.0.0.3", 1)),
			want: []string{"- pools: [public]\n      peers: [10.0.0.1]\n      localPreference: 50\n", "- pools: [public]\n      peers: [10.0.0.2]\n"}},
		{name: "a missing poolCR", dump: list(ad("ipAddressPools: [gone]"), peerCR), refused: "BGPAdvertisement metallb-system/adv: spec.ipAddressPools"},
		{name: "BGP without peers", dump: list(poolCR, ad("")), refused: "BGPAdvertisement metallb-system/adv: announces pools over BGP"},
		{name: "two advertisements that disagree", dump: list(poolCR, ad("localPref: 50"), strings.Replace(ad("localPref: 60"), "name: adv", "name: adv2", 1), peerCR),
			refused: "BGPAdvertisement metallb-system/adv2: spec: gives pool \"public\" other attributes"},
		{name: "a layer 2 poolCR", dump: list(poolCR, `
- apiVersion: metallb.io/v1beta1
  kind: L2Advertisement
  metadata: {name: l2, namespace: metallb-system}
  spec: {interfaces: [eth1]}
`), want: []string{"announce: l2\n      l2:\n        interface: eth1"}, note: "L2Advertisement metallb-system/l2: spec.interfaces"},
		{name: "a layer 2 poolCR without an interface", dump: list(poolCR, "\n- {apiVersion: metallb.io/v1beta1, kind: L2Advertisement, metadata: {name: l2, namespace: metallb-system}}\n"),
			refused: "L2Advertisement metallb-system/l2: spec.interfaces"},
		{name: "a layer 2 poolCR with --l2-interface", dump: list(poolCR, "\n- {apiVersion: metallb.io/v1beta1, kind: L2Advertisement, metadata: {name: l2, namespace: metallb-system}}\n"),
			opts: Options{L2Interface: "bond0"}, want: []string{"interface: bond0"}},
		{name: "layer 2 on two interfaces", dump: list(poolCR, "\n- {apiVersion: metallb.io/v1beta1, kind: L2Advertisement, metadata: {name: l2, namespace: metallb-system}, spec: {interfaces: [a, b]}}\n"),
			want: []string{"announce: l2\n      l2:\n        interfaces: [a, b]"}, note: "L2Advertisement metallb-system/l2: spec.interfaces"},
		{name: "two layer 2 advertisements that disagree on interfaces", dump: list(poolCR, "\n- {apiVersion: metallb.io/v1beta1, kind: L2Advertisement, metadata: {name: l2, namespace: metallb-system}, spec: {interfaces: [a, b]}}\n",
			"\n- {apiVersion: metallb.io/v1beta1, kind: L2Advertisement, metadata: {name: l2b, namespace: metallb-system}, spec: {interfaces: [a]}}\n"),
			refused: "L2Advertisement metallb-system/l2b: spec.interfaces: gives pool \"public\" other interfaces than L2Advertisement metallb-system/l2 does"},
		{name: "layer 2 node selectors", dump: list(poolCR, "\n- {apiVersion: metallb.io/v1beta1, kind: L2Advertisement, metadata: {name: l2, namespace: metallb-system}, spec: {interfaces: [a], nodeSelectors: [{matchLabels: {a: b}}]}}\n"),
			refused: "L2Advertisement metallb-system/l2: spec.nodeSelectors"},
		{name: "layer 2 preferred nodes", dump: list(poolCR, "\n- {apiVersion: metallb.io/v1beta1, kind: L2Advertisement, metadata: {name: l2, namespace: metallb-system}, spec: {interfaces: [a], preferredNodeSelectors: [{weight: 1, preference: {matchLabels: {a: b}}}]}}\n"),
			refused: "L2Advertisement metallb-system/l2: spec.preferredNodeSelectors"},
		{name: "a poolCR both ways", dump: list(poolCR, ad(""), peerCR, "\n- {apiVersion: metallb.io/v1beta1, kind: L2Advertisement, metadata: {name: l2, namespace: metallb-system}, spec: {interfaces: [a]}}\n"),
			want: []string{"announce: bgp\n      l2:\n        interface: a"}, note: "IPAddressPool metallb-system/public: announced both over BGP"},
		{name: "session options", dump: list(poolCR, ad(""), strings.Replace(peerCR, "enableGracefulRestart: true", "enableGracefulRestart: true, peerPort: 1179, holdTime: 9s, keepaliveTime: 3s, connectTime: 10s, ebgpMultiHop: true, password: s3cret, dualStackAddressFamily: true", 1)),
			want: []string{"port: 1179", "password: s3cret", "holdTime: 9s", "keepaliveTime: 3s", "connectRetryTime: 10s", "ebgpMultihop: 255", "addressFamilies: [ipv4-unicast, ipv6-unicast]"}},
		{name: "graceful restart off in MetalLB", dump: list(poolCR, ad(""), strings.Replace(peerCR, "enableGracefulRestart: true", "enableGracefulRestart: false", 1)),
			want: []string{"asn: 64500"}, note: "BGPPeer metallb-system/tor: spec.enableGracefulRestart"},
		{name: "routerID", dump: list(poolCR, ad(""), strings.Replace(peerCR, "enableGracefulRestart: true", "enableGracefulRestart: true, routerID: 10.0.0.9", 1)),
			want: []string{"asn: 64500"}, note: "BGPPeer metallb-system/tor: spec.routerID"},
		{name: "BFD", dump: list(poolCR, ad(""), strings.Replace(peerCR, "enableGracefulRestart: true", "enableGracefulRestart: true, bfdProfile: fast", 1), `
- apiVersion: metallb.io/v1beta1
  kind: BFDProfile
  metadata: {name: fast, namespace: metallb-system}
  spec: {receiveInterval: 200, transmitInterval: 150, detectMultiplier: 4, echoInterval: 50, echoMode: false, passiveMode: false, minimumTtl: 254}
`), want: []string{"bfd:\n        transmitInterval: 150ms\n        receiveInterval: 200ms\n        detectMultiplier: 4\n"}},
		{name: "multihop BFD", dump: list(poolCR, ad(""), strings.Replace(peerCR, "enableGracefulRestart: true", "enableGracefulRestart: true, ebgpMultiHop: true, bfdProfile: far", 1),
			"\n- {apiVersion: metallb.io/v1beta1, kind: BFDProfile, metadata: {name: far, namespace: metallb-system}, spec: {minimumTtl: 250}}\n"),
			want: []string{"ebgpMultihop: 255", "bfd:\n        minimumTTL: 250\n"}},
		{name: "multihop BFD at MetalLB's minimum TTL", dump: list(poolCR, ad(""), strings.Replace(peerCR, "enableGracefulRestart: true", "enableGracefulRestart: true, ebgpMultiHop: true, bfdProfile: far", 1),
			"\n- {apiVersion: metallb.io/v1beta1, kind: BFDProfile, metadata: {name: far, namespace: metallb-system}, spec: {}}\n"),
			want: []string{"bfd:\n        minimumTTL: 254\n"}},
		{name: "a minimum TTL on a single-hop session", dump: list(poolCR, ad(""), strings.Replace(peerCR, "enableGracefulRestart: true", "enableGracefulRestart: true, bfdProfile: near", 1),
			"\n- {apiVersion: metallb.io/v1beta1, kind: BFDProfile, metadata: {name: near, namespace: metallb-system}, spec: {minimumTtl: 250}}\n"),
			want: []string{"bfd: {}"}, note: "BGPPeer metallb-system/tor: spec.bfdProfile: BFDProfile near: minimumTtl 250 applies to multihop sessions only"},
		{name: "BFD echo mode", dump: list(poolCR, ad(""), strings.Replace(peerCR, "enableGracefulRestart: true", "enableGracefulRestart: true, bfdProfile: fast", 1),
			"\n- {apiVersion: metallb.io/v1beta1, kind: BFDProfile, metadata: {name: fast, namespace: metallb-system}, spec: {echoMode: true}}\n"),
			refused: "BGPPeer metallb-system/tor: spec.bfdProfile: BFDProfile fast: echoMode"},
		{name: "a missing BFD profile", dump: list(poolCR, ad(""), strings.Replace(peerCR, "enableGracefulRestart: true", "enableGracefulRestart: true, bfdProfile: gone", 1)),
			refused: "BGPPeer metallb-system/tor: spec.bfdProfile"},
		{name: "per-rack peers", dump: list(poolCR, ad(""), strings.Replace(peerCR, "enableGracefulRestart: true", "enableGracefulRestart: true, nodeSelectors: [{matchLabels: {rack: a}}]", 1)),
			want: []string{"inventory:\n  nodeLabels: [rack]", "nodeSelector:\n        matchLabels:\n          rack: a"}, note: "BGPPeer metallb-system/tor: spec.nodeSelectors: the Node label \"rack\" is read from the Nodes"},
		{name: "per-rack peers on a label kubelets cannot set", dump: list(poolCR, ad(""), strings.Replace(peerCR, "enableGracefulRestart: true", "enableGracefulRestart: true, nodeSelectors: [{matchExpressions: [{key: node-restriction.kubernetes.io/rack, operator: In, values: [a, b]}]}]", 1)),
			want: []string{"key: node-restriction.kubernetes.io/rack\n            operator: In\n            values: [a, b]"}, note: "BGPPeer metallb-system/tor: spec.nodeSelectors: the replicas peer"},
		{name: "two node selectors on a peer", dump: list(poolCR, ad(""), strings.Replace(peerCR, "enableGracefulRestart: true", "enableGracefulRestart: true, nodeSelectors: [{matchLabels: {rack: a}}, {matchLabels: {rack: b}}]", 1)),
			refused: "BGPPeer metallb-system/tor: spec.nodeSelectors: 2 selectors"},
		{name: "a source address", dump: list(poolCR, ad(""), strings.Replace(peerCR, "enableGracefulRestart: true", "enableGracefulRestart: true, sourceAddress: 10.0.0.5", 1)),
			refused: "BGPPeer metallb-system/tor: spec.sourceAddress"},
		{name: "a password Secret", dump: list(poolCR, ad(""), strings.Replace(peerCR, "enableGracefulRestart: true", "enableGracefulRestart: true, passwordSecret: {name: bgp}", 1)),
			want: []string{"passwordFile: /etc/baremetal-bgp/bgp"}, note: "BGPPeer metallb-system/tor: spec.passwordSecret: read from the file /etc/baremetal-bgp/bgp: put key password of Secret metallb-system/bgp"},
		{name: "a VRF", dump: list(poolCR, ad(""), strings.Replace(peerCR, "enableGracefulRestart: true", "enableGracefulRestart: true, vrf: red", 1)), refused: "BGPPeer metallb-system/tor: spec.vrf"},
		{name: "dynamic ASN", dump: list(poolCR, ad(""), strings.Replace(peerCR, "peerASN: 64500", "dynamicASN: external", 1)), refused: "BGPPeer metallb-system/tor: spec.dynamicASN"},
		{name: "unnumbered", dump: list(poolCR, ad(""), strings.Replace(peerCR, "peerAddress: 10.0.0.1", "interface: eth0", 1)), refused: "BGPPeer metallb-system/tor: spec.interface"},
		{name: "another local AS per peerCR", dump: list(poolCR, ad(""), strings.Replace(peerCR, "myASN: 64512", "myASN: 64512, localASN: 64999", 1)), refused: "BGPPeer metallb-system/tor: spec.localASN"},
		{name: "peers of two ASes", dump: list(poolCR, ad(""), peerCR, strings.Replace(strings.Replace(peerCR, "name: tor", "name: tor2", 1), "myASN: 64512", "myASN: 64513", 1)),
			refused: "BGPPeer metallb-system/tor2: spec.myASN"},
		{name: "another kind", dump: list(poolCR, "\n- {apiVersion: metallb.io/v1beta1, kind: Shiny, metadata: {name: x}}\n"), refused: "Shiny x: kind"},
		{name: "not MetalLB's", dump: list(poolCR, "\n- {apiVersion: v1, kind: Service, metadata: {name: web, namespace: default}}\n"), want: []string{"announce: none"}, note: "Service default/web: apiVersion"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := Convert([]byte(tc.dump), tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			if tc.refused != "" {
				if !has(res.Refused, tc.refused) {
					t.Fatalf("refused %v, want %q", res.Refused, tc.refused)
				}
				if res.Config != nil {
					t.Errorf("a config written with a refusal:\n%s", res.Config)
				}
				return
			}
			if len(res.Refused) > 0 {
				t.Fatalf("refused: %v", res.Refused)
			}
			for _, w := range tc.want {
				if !strings.Contains(string(res.Config), w) {
					t.Errorf("the config lacks %q:\n%s", w, res.Config)
				}
			}
			for _, a := range tc.absent {
				if strings.Contains(string(res.Config), a) {
					t.Errorf("the config has %q:\n%s", a, res.Config)
				}
			}
			if tc.note != "" && !has(res.Notes, tc.note) {
				t.Errorf("notes %v, want %q", res.Notes, tc.note)
			}
			if _, err := config.ParseWithoutSecrets(res.Config); err != nil {
				t.Errorf("the config does not load: %v", err)
			}
		})
	}
}

func has(fs []Finding, prefix string) bool {
	for _, f := range fs {
		if strings.HasPrefix(f.String(), prefix) {
			return true
		}
	}
	return false
}

// TestPartial: with Options.Partial what converts is written and each
// refusal is listed; a resource with a refused field is left out whole (a
// pool is never widened by losing a restriction, an advertisement never
// sent to every peer because its peers were left out).
func TestPartial(t *testing.T) {
	dump := list(poolCR,
		strings.Replace(strings.Replace(poolCR, "name: public", "name: teams", 1), "spec: {", "spec: {serviceAllocation: {namespaceSelectors: [{matchLabels: {team: a}}, {matchLabels: {team: b}}]}, ", 1),
		ad("peers: [red], ipAddressPools: [public]"),
		strings.Replace(ad("ipAddressPools: [public]"), "name: adv", "name: adv2", 1),
		peerCR,
		strings.Replace(strings.Replace(strings.Replace(peerCR, "name: tor", "name: red", 1), "10.0.0.1", "10.0.0.2", 1), "enableGracefulRestart: true", "enableGracefulRestart: true, vrf: red", 1))
	strict, err := Convert([]byte(dump), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if strict.Config != nil {
		t.Fatalf("without Partial a config was written:\n%s", strict.Config)
	}
	res, err := Convert([]byte(dump), Options{Partial: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"IPAddressPool metallb-system/teams: spec.serviceAllocation.namespaceSelectors", "BGPPeer metallb-system/red: spec.vrf"} {
		if !has(res.Refused, want) {
			t.Errorf("refused %v, want %q", res.Refused, want)
		}
	}
	cfg := string(res.Config)
	for _, absent := range []string{"teams", "10.0.0.2"} {
		if strings.Contains(cfg, absent) {
			t.Errorf("the partial config has %q, which was refused:\n%s", absent, cfg)
		}
	}
	// adv named only the refused peer: left out, not sent to every peer;
	// adv2, to every peer, is: to those converted.
	if want := "advertisements:\n    - pools: [public]\n"; !strings.Contains(cfg, want) || strings.Contains(cfg, "peers: [") {
		t.Errorf("the partial config lacks %q:\n%s", want, cfg)
	}
	if strings.Count(cfg, "- pools:") != 1 {
		t.Errorf("the partial config has other advertisements than adv2's:\n%s", cfg)
	}
	if _, err := config.ParseWithoutSecrets(res.Config); err != nil {
		t.Errorf("the partial config does not load: %v", err)
	}
}
