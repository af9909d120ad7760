package metallb

import (
	"strings"
	"testing"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/config"
)

// frrCR is a site's own FRRConfiguration: a neighbour of rack 1's nodes
// sent pool public's addresses, multihop with BFD and a password Secret.
const frrCR = `
- apiVersion: frrk8s.metallb.io/v1beta1
  kind: FRRConfiguration
  metadata: {name: rack1, namespace: frr-k8s-system}
  spec:
    nodeSelector: {matchLabels: {rack: r1}}
    bgp:
      bfdProfiles: [{name: slow, receiveInterval: 300, transmitInterval: 300, detectMultiplier: 3}]
      routers:
      - asn: 64512
        prefixes: [192.0.2.0/28]
        neighbors:
        - address: 10.1.0.1
          asn: 64601
          ebgpMultiHop: true
          bfdProfile: slow
          passwordSecret: {name: rack1-tor, namespace: frr-k8s-system}
          holdTime: 9s
          toAdvertise: {allowed: {mode: all}}
`

// frr edits frrCR: each pair replaces its first with its second.
func frr(pairs ...string) string {
	s := frrCR
	for i := 0; i+1 < len(pairs); i += 2 {
		s = strings.Replace(s, pairs[i], pairs[i+1], 1)
	}
	return s
}

// Each row is one FRR-K8s field, as TestConvert's are MetalLB's.
func TestConvertFRRK8s(t *testing.T) {
	generated := `
- apiVersion: frrk8s.metallb.io/v1beta1
  kind: FRRConfiguration
  metadata: {name: metallb-node1, namespace: frr-k8s-system}
  spec:
    nodeSelector: {matchLabels: {kubernetes.io/hostname: node1}}
    bgp: {routers: [{asn: 64512, prefixes: [192.0.2.1/32], neighbors: [{address: 10.0.0.1, asn: 64500, toAdvertise: {allowed: {prefixes: [192.0.2.1/32]}}}]}]}
`
	for _, tc := range []struct {
		name    string
		dump    string
		want    []string
		absent  []string
		refused string
		note    string
	}{
		{name: "MetalLB's own, per node", dump: list(poolCR, ad(""), peerCR, generated),
			want: []string{"- address: 10.0.0.1\n"}, absent: []string{"advertisements"}, note: "FRRConfiguration frr-k8s-system/metallb-node1: written by MetalLB for node node1"},
		{name: "a site's neighbour sent a pool", dump: list(poolCR, ad(""), peerCR, frrCR),
			want: []string{"- address: 10.1.0.1\n      asn: 64601", "ebgpMultihop: 255", "minimumTTL: 254", "transmitInterval: 300ms", "holdTime: 9s",
				"passwordFile: /etc/baremetal-bgp/rack1-tor", "nodeSelector:\n        matchLabels:\n          rack: r1",
				// MetalLB's advertisement to its BGPPeer only; the
				// neighbour its pool.
				"- pools: [public]\n      peers: [10.0.0.1]", "- pools: [public]\n      peers: [10.1.0.1]"},
			note: "FRRConfiguration frr-k8s-system/rack1: spec.bgp.routers[0].neighbors[0]: peer 10.1.0.1, sent the VIPs of pools [public]"},
		{name: "advertised prefixes of a pool", dump: list(poolCR, peerCR, frr("mode: all", "prefixes: [192.0.2.0/28]")),
			want: []string{"- pools: [public]\n      peers: [10.1.0.1]"}},
		{name: "a prefix in no pool", dump: list(poolCR, frr("prefixes: [192.0.2.0/28]", "prefixes: [198.51.100.0/24]")),
			refused: "FRRConfiguration frr-k8s-system/rack1: spec.bgp.routers[0].prefixes[0]: 198.51.100.0/24 is in no IPAddressPool"},
		{name: "advertising a prefix the router lacks", dump: list(poolCR, frr("mode: all", "prefixes: [192.0.2.0/30]")),
			refused: "FRRConfiguration frr-k8s-system/rack1: spec.bgp.routers[0].neighbors[0].toAdvertise.allowed.prefixes[0]"},
		{name: "advertising nothing", dump: list(poolCR, frr("          toAdvertise: {allowed: {mode: all}}\n", "")),
			refused: "FRRConfiguration frr-k8s-system/rack1: spec.bgp.routers[0].neighbors[0].toAdvertise: advertises nothing"},
		{name: "receiving", dump: list(poolCR, frr("allowed: {mode: all}}", "allowed: {mode: all}}\n          toReceive: {allowed: {prefixes: [{prefix: 0.0.0.0/0}]}}")),
			refused: "FRRConfiguration frr-k8s-system/rack1: spec.bgp.routers[0].neighbors[0].toReceive"},
		{name: "local preference per prefix", dump: list(poolCR, frr("{allowed: {mode: all}}", "{allowed: {mode: all}, withLocalPref: [{prefixes: [192.0.2.0/28], localPref: 50}]}")),
			refused: "FRRConfiguration frr-k8s-system/rack1: spec.bgp.routers[0].neighbors[0].toAdvertise.withLocalPref"},
		{name: "communities per prefix", dump: list(poolCR, frr("{allowed: {mode: all}}", "{allowed: {mode: all}, withCommunity: [{prefixes: [192.0.2.0/28], community: '1:1'}]}")),
			refused: "FRRConfiguration frr-k8s-system/rack1: spec.bgp.routers[0].neighbors[0].toAdvertise.withCommunity"},
		{name: "raw configuration", dump: list(poolCR, frr("    nodeSelector:", "    raw: {rawConfig: 'router bgp 64512'}\n    nodeSelector:")),
			refused: "FRRConfiguration frr-k8s-system/rack1: spec.raw.rawConfig"},
		{name: "a VRF", dump: list(poolCR, frr("- asn: 64512\n", "- asn: 64512\n        vrf: red\n")),
			refused: "FRRConfiguration frr-k8s-system/rack1: spec.bgp.routers[0].vrf"},
		{name: "imports", dump: list(poolCR, frr("- asn: 64512\n", "- asn: 64512\n        imports: [{vrf: red}]\n")),
			refused: "FRRConfiguration frr-k8s-system/rack1: spec.bgp.routers[0].imports"},
		{name: "a router ID", dump: list(poolCR, frr("- asn: 64512\n", "- asn: 64512\n        id: 10.9.9.9\n")),
			want: []string{"address: 10.1.0.1"}, absent: []string{"10.9.9.9"}, note: "FRRConfiguration frr-k8s-system/rack1: spec.bgp.routers[0].id"},
		{name: "another local AS than MetalLB's", dump: list(poolCR, peerCR, frr("- asn: 64512", "- asn: 64513")),
			refused: "FRRConfiguration frr-k8s-system/rack1: spec.bgp.routers[0].asn: 64513"},
		{name: "a BGPPeer's address", dump: list(poolCR, peerCR, frr("address: 10.1.0.1", "address: 10.0.0.1")),
			refused: "FRRConfiguration frr-k8s-system/rack1: spec.bgp.routers[0].neighbors[0].address: 10.0.0.1 is also a BGPPeer's"},
		{name: "unnumbered", dump: list(poolCR, frr("address: 10.1.0.1", "interface: eth0")),
			refused: "FRRConfiguration frr-k8s-system/rack1: spec.bgp.routers[0].neighbors[0].interface"},
		{name: "a BFD profile it lacks", dump: list(poolCR, frr("bfdProfile: slow", "bfdProfile: fast")),
			refused: "FRRConfiguration frr-k8s-system/rack1: spec.bgp.routers[0].neighbors[0].bfdProfile"},
		{name: "a port and dual stack", dump: list(poolCR, frr("holdTime: 9s", "holdTime: 9s\n          port: 1179\n          dualStackAddressFamily: true")),
			want: []string{"port: 1179", "addressFamilies: [ipv4-unicast, ipv6-unicast]"}},
		{name: "a field FRR-K8s v0.0.25 lacks", dump: list(poolCR, frr("holdTime: 9s", "holdTime: 9s\n          bogus: 1")),
			refused: "FRRConfiguration frr-k8s-system/rack1: spec"},
		{name: "status resources", dump: list(poolCR, "\n- {apiVersion: frrk8s.metallb.io/v1beta1, kind: FRRNodeState, metadata: {name: node1}}\n- {apiVersion: frrk8s.metallb.io/v1beta1, kind: BGPSessionState, metadata: {name: s, namespace: frr-k8s-system}}\n"),
			want: []string{"name: public"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := Convert([]byte(tc.dump), Options{})
			if err != nil {
				t.Fatal(err)
			}
			if tc.refused != "" {
				if !has(res.Refused, tc.refused) {
					t.Fatalf("refused %v, want %q", res.Refused, tc.refused)
				}
				return
			}
			if len(res.Refused) > 0 {
				t.Fatalf("refused: %v", res.Refused)
			}
			cfg := string(res.Config)
			for _, w := range tc.want {
				if !strings.Contains(cfg, w) {
					t.Errorf("the config lacks %q:\n%s", w, cfg)
				}
			}
			for _, a := range tc.absent {
				if strings.Contains(cfg, a) {
					t.Errorf("the config has %q:\n%s", a, cfg)
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

// A refused neighbour leaves its FRRConfiguration out whole in a partial
// conversion: its other neighbours are not peers either.
func TestPartialFRRK8s(t *testing.T) {
	two := frr("          toAdvertise: {allowed: {mode: all}}\n", "          toAdvertise: {allowed: {mode: all}}\n        - {address: 10.1.0.2, asn: 64601, toReceive: {allowed: {mode: all}}, toAdvertise: {allowed: {mode: all}}}\n")
	res, err := Convert([]byte(list(poolCR, ad(""), peerCR, two)), Options{Partial: true})
	if err != nil {
		t.Fatal(err)
	}
	if !has(res.Refused, "FRRConfiguration frr-k8s-system/rack1: spec.bgp.routers[0].neighbors[1].toReceive") {
		t.Errorf("refused %v", res.Refused)
	}
	cfg := string(res.Config)
	if strings.Contains(cfg, "10.1.0.") || !strings.Contains(cfg, "10.0.0.1") {
		t.Errorf("the partial config keeps a neighbour of the refused FRRConfiguration, or lacks the BGPPeer:\n%s", cfg)
	}
}
