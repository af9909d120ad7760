package config

import (
	"strings"
	"testing"
	"time"
)

const validConfig = `
inventory:
  defaults:
    zone: rack-a
    region: dc-1
    instanceType: standard
  machines:
  - name: node-1
    hostnames: [node-1.lab.example]
    instanceType: big
    addresses:
    - {type: InternalIP, address: 10.0.0.1}
    - {type: InternalIP, address: "fd00::1"}
    - {type: Hostname, address: node-1.lab.example}
    labels:
      example.com/rack: "a1"
  - name: node-2
    providerID: custom://node-2
    zone: rack-b
    powerState: "off"
  storage:
  - name: nas
    zone: rack-a
    nfs:
      servers: [10.0.1.5, nas.lab.example]
    iscsi:
      targetPortals: ["10.0.1.6", "[fd00::6]:3261"]
    ceph:
      monitors: ["10.0.1.7:6789"]
    csi:
    - driver: nfs.csi.k8s.io
      volumeHandlePrefix: "10.0.1.5#"
`

func TestParseValid(t *testing.T) {
	cfg, err := Parse([]byte(validConfig))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	inv := cfg.Inventory
	if inv.UnlistedNodes != UnlistedReject {
		t.Errorf("unlistedNodes defaulted to %q, want reject", inv.UnlistedNodes)
	}
	m1, m2 := inv.Machines[0], inv.Machines[1]
	if m1.Zone != "rack-a" || m1.Region != "dc-1" || m1.InstanceType != "big" || m1.PowerState != PowerOn {
		t.Errorf("node-1 after defaults: %+v", m1)
	}
	if m2.Zone != "rack-b" || m2.InstanceType != "standard" || m2.PowerState != PowerOff {
		t.Errorf("node-2 after defaults: %+v", m2)
	}
	if got := m1.EffectiveProviderID(); got != "baremetal://node-1" {
		t.Errorf("node-1 provider ID %q", got)
	}
	if got := m2.EffectiveProviderID(); got != "custom://node-2" {
		t.Errorf("node-2 provider ID %q", got)
	}
	if inv.Storage[0].Region != "dc-1" {
		t.Errorf("storage region not defaulted: %q", inv.Storage[0].Region)
	}
}

func TestParseErrors(t *testing.T) {
	machine := func(body string) string {
		return "inventory:\n  machines:\n  - name: a\n  - name: b\n" + body
	}
	tests := []struct {
		name string
		in   string
		want []string // every one must appear in the error
	}{
		{"empty", "", []string{"empty"}},
		{"not yaml", "inventory: [", []string{"not valid YAML"}},
		{"unknown top-level field", "inventory: {}\nloadbalancer: {}\n", []string{`loadbalancer: unknown field "loadbalancer"`}},
		{"unknown nested field", machine("  - name: c\n    adresses: []\n"), []string{`inventory.machines[2].adresses: unknown field "adresses"`}},
		{"bad IP", machine("  - name: c\n  - name: d\n    addresses:\n    - {type: InternalIP, address: 10.0.0.300}\n"),
			[]string{`inventory.machines[3].addresses[0].address: "10.0.0.300" is not an IP`}},
		{"loopback address", machine("  - name: c\n    addresses:\n    - {type: InternalIP, address: 127.0.0.1}\n    - {type: InternalIP, address: \"fe80::1\"}\n"),
			[]string{`inventory.machines[2].addresses[0].address: "127.0.0.1" is a loopback, link-local, multicast or unspecified address`, `inventory.machines[2].addresses[1].address: "fe80::1" is a loopback`}},
		{"bad address type", machine("  - name: c\n    addresses:\n    - {type: PublicIP, address: 10.0.0.3}\n"),
			[]string{`inventory.machines[2].addresses[0].type: "PublicIP" is not one of`}},
		{"duplicate name", machine("  - name: a\n"), []string{`inventory.machines[2].name: "a" is already used by machine "a"`}},
		{"duplicate provider ID", machine("  - name: c\n    providerID: baremetal://a\n"),
			[]string{`inventory.machines[2].providerID: provider ID "baremetal://a" is already used by machine "a"`}},
		{"duplicate address", "inventory:\n  machines:\n  - name: a\n    addresses: [{type: InternalIP, address: 10.0.0.1}]\n  - name: b\n    addresses: [{type: ExternalIP, address: 10.0.0.1}]\n",
			[]string{`inventory.machines[1].addresses[0].address: "10.0.0.1" is already an address of machine "a"`}},
		{"bad power state", machine("  - name: c\n    powerState: standby\n"), []string{`inventory.machines[2].powerState: "standby" is not one of on, off`}},
		{"missing name", machine("  - zone: x\n"), []string{"inventory.machines[2].name: is required"}},
		{"bad name", machine("  - name: Node_C\n"), []string{`inventory.machines[2].name: "Node_C" is not a valid Node name`}},
		{"bad unlisted policy", "inventory:\n  unlistedNodes: maybe\n", []string{`inventory.unlistedNodes: "maybe" is not one of reject, allow`}},
		{"kubernetes label", machine("  - name: c\n    labels: {node-role.kubernetes.io/worker: \"\"}\n"),
			[]string{`inventory.machines[2].labels[node-role.kubernetes.io/worker]`, "kubernetes.io"}},
		{"bad zone", machine("  - name: c\n    zone: \"rack a\"\n"), []string{`inventory.machines[2].zone: "rack a" is not a valid label value`}},
		{"wrong type", "inventory:\n  machines: {name: a}\n", []string{"inventory.machines (line 2): must be a list"}},
		{"list where string", "inventory:\n  machines:\n  - name: [a]\n", []string{"inventory.machines[0].name (line 3): must be a single value"}},
		{"several errors at once", machine("  - name: a\n    powerState: x\n"), []string{"inventory.machines[2].name", "inventory.machines[2].powerState"}},
		{"storage without matcher", "inventory:\n  storage:\n  - name: s\n    zone: z\n", []string{"inventory.storage[0]: needs at least one of nfs, iscsi, ceph, csi"}},
		{"storage without zone", "inventory:\n  storage:\n  - name: s\n    nfs: {servers: [nas]}\n", []string{"inventory.storage[0]: needs a zone or a region"}},
		{"storage bad portal", "inventory:\n  storage:\n  - name: s\n    zone: z\n    iscsi: {targetPortals: [\"10.0.0.1:99999\"]}\n",
			[]string{`inventory.storage[0].iscsi.targetPortals[0]: "10.0.0.1:99999" has an invalid port`}},
		{"storage duplicate", "inventory:\n  storage:\n  - {name: s, zone: z, nfs: {servers: [a]}}\n  - {name: s, zone: z, nfs: {servers: [b]}}\n",
			[]string{`inventory.storage[1].name: "s" is already used`}},
		{"csi without driver", "inventory:\n  storage:\n  - {name: s, zone: z, csi: [{volumeHandlePrefix: x}]}\n", []string{"inventory.storage[0].csi[0].driver: is required"}},
		{"pool bad range", "loadBalancer:\n  pools:\n  - {name: p, addresses: [\"192.0.2.20-192.0.2.10\"]}\n", []string{`loadBalancer.pools[0].addresses[0]: "192.0.2.20-192.0.2.10" ends before it starts`}},
		{"pool host bits", "loadBalancer:\n  pools:\n  - {name: p, addresses: [192.0.2.1/28]}\n", []string{`loadBalancer.pools[0].addresses[0]: "192.0.2.1/28" has host bits set`}},
		{"pools overlap", "loadBalancer:\n  announce: none\n  pools:\n  - {name: a, addresses: [192.0.2.0/28]}\n  - {name: b, addresses: [192.0.2.8-192.0.2.30]}\n",
			[]string{`loadBalancer.pools[1].addresses[0]: "192.0.2.8-192.0.2.30" overlaps 192.0.2.0-192.0.2.15 of pool "a"`}},
		{"bgp without ASN", "loadBalancer:\n  pools:\n  - {name: a, addresses: [192.0.2.0/28]}\n", []string{"bgp.localASN: is required"}},
		{"bad shared key", "loadBalancer:\n  announce: none\n  pools:\n  - {name: a, addresses: [192.0.2.0/28], sharedAcrossNamespaces: [\"two words\"]}\n",
			[]string{`loadBalancer.pools[0].sharedAcrossNamespaces[0]: "two words" is not a sharing key`}},
		{"bad router ID", "bgp:\n  localASN: 64512\n  routerID: 2001:db8::1\n", []string{`bgp.routerID: "2001:db8::1" is not an IPv4 address`}},
		{"bad community", "loadBalancer:\n  announce: none\n  pools:\n  - {name: a, addresses: [192.0.2.0/28], bgp: {communities: [\"70000:1\"]}}\n",
			[]string{`loadBalancer.pools[0].bgp.communities[0]: "70000:1" is not a community`}},
		{"bad peer", "bgp:\n  localASN: 64512\n  routerID: 192.0.2.1\n  peers:\n  - {address: 192.0.2.300, holdTime: 2s, addressFamilies: [l2vpn-evpn]}\n",
			[]string{`bgp.peers[0].address: "192.0.2.300" is not an IP`, "bgp.peers[0].asn: is required", "bgp.peers[0].holdTime: 2s must be", `bgp.peers[0].addressFamilies[0]: "l2vpn-evpn"`}},
		{"connect retry", "bgp:\n  localASN: 64512\n  routerID: 192.0.2.1\n  peers:\n  - {address: 192.0.2.1, asn: 1, connectRetryTime: -1s}\n  - {address: 192.0.2.2, asn: 1, connectRetryTime: 500ms}\n",
			[]string{"bgp.peers[0].connectRetryTime: -1s must be whole seconds from 1s to 65535s", "bgp.peers[1].connectRetryTime: 500ms must be whole seconds"}},
		{"bad path selection", "bgp:\n  localASN: 64512\n  routerID: 192.0.2.1\n  peers:\n  - {address: 192.0.2.1, asn: 1, maximumPaths: 256}\n  - {address: 192.0.2.2, asn: 1, maximumPaths: -1, nodeSelector: {matchExpressions: [{key: topology.kubernetes.io/zone, operator: Near}]}}\n",
			[]string{"bgp.peers[0].maximumPaths: 256 must be from 1 to 255", "bgp.peers[1].maximumPaths: -1 must be from 1 to 255", `bgp.peers[1].nodeSelector.matchExpressions[0].operator: "Near" is not one of`}},
		{"maxRemovals neither a count nor a share", "inventory:\n  maxRemovals: 120%\n", []string{`inventory.maxRemovals: "120%" is neither a count (3) nor a share`}},
		{"selector values Kubernetes rejects", "bgp:\n  localASN: 64512\n  routerID: 192.0.2.1\n  peers:\n  - {address: 192.0.2.1, asn: 1, nodeSelector: {matchExpressions: [{key: rack, operator: In, values: [\"rack 1\", r2]}]}}\nloadBalancer:\n  pools:\n  - {name: a, addresses: [192.0.2.128/28], serviceSelector: {matchExpressions: [{key: team, operator: NotIn, values: [\"-x\"]}]}}\n",
			[]string{`bgp.peers[0].nodeSelector.matchExpressions[0].values[0]: "rack 1" is not a valid label value`, `loadBalancer.pools[0].serviceSelector.matchExpressions[0].values[0]: "-x" is not a valid label value`}},
		{"bad BFD", "bgp:\n  localASN: 64512\n  routerID: 192.0.2.1\n  peers:\n  - {address: 192.0.2.1, asn: 1, bfd: {transmitInterval: 5ms, receiveInterval: 1500us, detectMultiplier: 1}}\n  - {address: 192.0.2.2, asn: 1, ebgpMultihop: 2, bfd: {minimumTTL: 256}}\n  - {address: 192.0.2.3, asn: 1, bfd: {minimumTTL: 254}}\n",
			[]string{"bgp.peers[0].bfd.transmitInterval: 5ms must be whole milliseconds from 10ms to 1m0s", "bgp.peers[0].bfd.receiveInterval: 1.5ms must be whole milliseconds", "bgp.peers[0].bfd.detectMultiplier: 1 must be from 2 to 255",
				"bgp.peers[1].bfd.minimumTTL: 256 must be from 1 to 255", "bgp.peers[2].bfd.minimumTTL: is for a multihop session (a peer with ebgpMultihop); a single-hop one takes only TTL 255"}},
		{"listening with two selections", "bgp:\n  localASN: 64512\n  routerID: 192.0.2.1\n  listenPort: 179\n  peers:\n  - {address: 192.0.2.1, asn: 1}\n  - {address: 192.0.2.2, asn: 1, maximumPaths: 4}\n",
			[]string{"bgp.listenPort: sessions can be accepted only when every peer has the same maximumPaths, nodeSelector and advertisements (bgp.peers[1] differs from bgp.peers[0])"}},
		{"bad duration", "bgp:\n  peers:\n  - {address: 192.0.2.1, asn: 1, holdTime: soon}\n", []string{`bgp.peers[0].holdTime (line 3): "soon" is not a duration`}},
		{"missing password file", "bgp:\n  localASN: 1\n  routerID: 192.0.2.1\n  peers:\n  - {address: 192.0.2.1, asn: 2, passwordFile: /nonexistent/pw}\n", []string{"bgp.peers[0].passwordFile: reading the password"}},
		{"two documents", "inventory: {}\n---\ninventory: {}\n", []string{"more than one YAML document"}},
		{"advertisements", "loadBalancer:\n  pools:\n  - {name: a, addresses: [10.1.0.0/24]}\n  - {name: lan, addresses: [10.2.0.0/24], announce: l2, l2: {interface: eth0}}\nbgp:\n  localASN: 64512\n  routerID: 192.0.2.1\n  peers:\n  - {address: 192.0.2.1, asn: 64500}\n  - {address: 192.0.2.2, asn: 64512}\n  advertisements:\n  - {pools: [a, lan, gone], peers: [192.0.2.1, 192.0.2.9], localPreference: 200, asPathPrepend: 11, communities: [bad]}\n  - {pools: [a], asPathPrepend: 2}\n  - {pools: []}\n",
			[]string{`bgp.advertisements[0].pools[1]: pool "lan" is not announced over BGP`, `bgp.advertisements[0].pools[2]: "gone" is no pool of loadBalancer.pools`,
				`bgp.advertisements[0].peers[1]: "192.0.2.9" is no peer of bgp.peers`, "bgp.advertisements[0].communities[0]:", "bgp.advertisements[0].asPathPrepend: 11 must be from 1 to 10",
				"bgp.advertisements[0].localPreference: is sent to iBGP peers only: bgp.peers[0] (192.0.2.1, asn 64500) is eBGP (localASN 64512)",
				"bgp.advertisements[1].asPathPrepend: is for eBGP peers only: bgp.peers[1] (192.0.2.2) is iBGP",
				`bgp.advertisements[1]: pool "a" goes to 192.0.2.1 by bgp.advertisements[0] already`, "bgp.advertisements[2].pools: names no pool"}},
		{"maximum load", "bgp:\n  localASN: 64512\n  routerID: 192.0.2.1\n  peers:\n  - {address: 192.0.2.1, asn: 1, maximumLoad: 0.9}\n  - {address: 192.0.2.2, asn: 1, maximumLoad: 3}\n",
			[]string{"bgp.peers[0].maximumLoad: 0.9 must be from 1 to 2", "bgp.peers[1].maximumLoad: 3 must be from 1 to 2"}},
		{"node labels", "inventory:\n  nodeLabels: [\"bad key!\", topology.kubernetes.io/zone]\n",
			[]string{`inventory.nodeLabels[0]: "bad key!" is not a label key`, `inventory.nodeLabels[1]: "topology.kubernetes.io/zone" is the machine's zone or region, which the inventory gives`}},
		{"health check", "loadBalancer:\n  healthCheck: {path: healthz, interval: 10ms, timeout: 2m, unhealthyThreshold: -1, healthyThreshold: 101}\n",
			[]string{`loadBalancer.healthCheck.path: "healthz" is not a URL path`, "loadBalancer.healthCheck.interval: 10ms is below the least interval, 100ms",
				"loadBalancer.healthCheck.timeout: 2m0s is above the greatest timeout, 1m", "loadBalancer.healthCheck.unhealthyThreshold: -1 is not between 1 and 100",
				"loadBalancer.healthCheck.healthyThreshold: 101 is not between 1 and 100"}},
		{"health check port", "loadBalancer:\n  healthCheck: {port: 70000}\n", []string{"loadBalancer.healthCheck.port"}},
		{"l2 without interface", "loadBalancer:\n  announce: none\n  pools:\n  - {name: a, addresses: [192.0.2.0/28], announce: l2}\n",
			[]string{"loadBalancer.pools[0].l2.interface: is required with announce: l2"}},
		{"l2 bad interface", "loadBalancer:\n  announce: none\n  pools:\n  - {name: a, addresses: [192.0.2.0/28], announce: l2, l2: {interface: eth0/1}}\n",
			[]string{`loadBalancer.pools[0].l2.interface: "eth0/1" is not a network interface name`}},
		{"l2 interface and interfaces", "loadBalancer:\n  announce: none\n  pools:\n  - {name: a, addresses: [192.0.2.0/28], announce: l2, l2: {interface: eth0, interfaces: [eth1]}}\n",
			[]string{"loadBalancer.pools[0].l2.interfaces: is given with l2.interface: give one interface, or the list"}},
		{"l2 interfaces bad and twice", "loadBalancer:\n  announce: none\n  pools:\n  - {name: a, addresses: [192.0.2.0/28], announce: l2, l2: {interfaces: [eth1, eth1, \"a b\"]}}\n",
			[]string{`loadBalancer.pools[0].l2.interfaces[1]: "eth1" is listed twice`, `loadBalancer.pools[0].l2.interfaces[2]: "a b" is not a network interface name`}},
		{"l2 on a pool announced by none", "loadBalancer:\n  announce: none\n  pools:\n  - {name: a, addresses: [192.0.2.0/28], announce: none, l2: {interface: eth0}}\n",
			[]string{"loadBalancer.pools[0].l2: is only read with announce: l2, or bgp (answered on layer 2 too); this pool's VIPs are announced by none"}},
		{"l2 on a bgp pool: its interface checked", "loadBalancer:\n  announce: none\n  pools:\n  - {name: a, addresses: [192.0.2.0/28], announce: bgp, l2: {interface: eth0/1}}\nbgp: {localASN: 64512, routerID: 192.0.2.1}\n",
			[]string{`loadBalancer.pools[0].l2.interface: "eth0/1" is not a network interface name`}},
		{"pool announce", "loadBalancer:\n  announce: none\n  pools:\n  - {name: a, addresses: [192.0.2.0/28], announce: arp}\n",
			[]string{`loadBalancer.pools[0].announce: "arp" is not one of bgp, l2, none`}},
		{"l2 for every pool", "loadBalancer:\n  announce: l2\n", []string{"loadBalancer.announce: l2 is set per pool"}},
		{"bad MAC", machine("  - name: c\n    macAddresses: [\"52:54:00:12:34\", \"00:00:00:00:fe:80:00:00:00:00:00:00:02:00:5e:10:00:00:00:01\"]\n"),
			[]string{`inventory.machines[2].macAddresses[0]: "52:54:00:12:34" is not an Ethernet (EUI-48) address`, "inventory.machines[2].macAddresses[1]"}},
		{"bgp pool beside l2 needs an ASN", "loadBalancer:\n  pools:\n  - {name: a, addresses: [192.0.2.0/28], announce: l2, l2: {interface: eth0}}\n  - {name: b, addresses: [192.0.2.16/28]}\n",
			[]string{"bgp.localASN: is required"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.in))
			if err == nil {
				t.Fatalf("Parse succeeded, want an error with %q", tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\n does not contain %q", err, w)
				}
			}
		})
	}
}

func TestNormalizeHostPort(t *testing.T) {
	tests := []struct{ in, def, want string }{
		{"10.0.0.1", "3260", "10.0.0.1:3260"},
		{"10.0.0.1:3261", "3260", "10.0.0.1:3261"},
		{"[fd00::1]:3260", "3260", "[fd00::1]:3260"},
		{"fd00:0::1", "3260", "[fd00::1]:3260"},
		{"NAS.example", "", "nas.example"},
	}
	for _, tt := range tests {
		got, err := NormalizeHostPort(tt.in, tt.def)
		if err != nil || got != tt.want {
			t.Errorf("NormalizeHostPort(%q, %q) = %q, %v; want %q", tt.in, tt.def, got, err, tt.want)
		}
	}
	for _, bad := range []string{"", "a b", "10.0.0.1:0", "host:port"} {
		if got, err := NormalizeHostPort(bad, "3260"); err == nil {
			t.Errorf("NormalizeHostPort(%q) = %q, want an error", bad, got)
		}
	}
}

// An announce: l2 pool needs no BGP; a pool's announce overrides the load
// balancer's.
func TestLayer2PoolsNeedNoBGP(t *testing.T) {
	cfg, err := Parse([]byte(`inventory:
  machines:
  - name: n1
    macAddresses: ["52:54:00:AA:bb:01"]
loadBalancer:
  pools:
  - {name: lan, addresses: [192.0.2.0/28], announce: l2, l2: {interface: eth0}}
  - {name: off, addresses: [192.0.2.16/28], announce: none}
`))
	if err != nil {
		t.Fatal(err)
	}
	lb := &cfg.LoadBalancer
	if got := lb.Pools[0].Announced(lb); got != AnnounceL2 {
		t.Errorf("pool lan announced by %q, want l2", got)
	}
	if got := lb.Pools[1].Announced(lb); got != AnnounceNone {
		t.Errorf("pool off announced by %q, want none", got)
	}
	if lb.AnnouncesBGP() {
		t.Error("AnnouncesBGP is true with no pool announced by BGP")
	}
}

func TestShippedExampleLoads(t *testing.T) {
	cfg, err := Load("../../deploy/cloud-config.example.yaml")
	if err != nil {
		t.Fatalf("the example in deploy/ does not load: %v", err)
	}
	if len(cfg.Inventory.Machines) == 0 || len(cfg.Inventory.Storage) == 0 {
		t.Errorf("the example has %d machines and %d storage systems; it should show both", len(cfg.Inventory.Machines), len(cfg.Inventory.Storage))
	}
	if cfg.Inventory.Machines[2].PowerState != PowerOff {
		t.Errorf("an unquoted or quoted off must read as power state off, got %q", cfg.Inventory.Machines[2].PowerState)
	}
}

func TestUnquotedOff(t *testing.T) {
	cfg, err := Parse([]byte("inventory:\n  machines:\n  - name: a\n    powerState: off\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Inventory.Machines[0].PowerState; got != PowerOff {
		t.Errorf("powerState: off read as %q", got)
	}
}

// A hold time alone gets a keepalive BGP can send: whole seconds, a third
// of the hold time rounded down.
func TestKeepaliveDefaultsToWholeSeconds(t *testing.T) {
	for hold, want := range map[string]time.Duration{"10s": 3 * time.Second, "3s": time.Second, "4s": time.Second, "90s": 30 * time.Second} {
		cfg, err := Parse([]byte("bgp:\n  localASN: 64512\n  routerID: 192.0.2.1\n  peers:\n  - {address: 192.0.2.1, asn: 1, holdTime: " + hold + "}\n"))
		if err != nil {
			t.Errorf("holdTime %s alone: %v", hold, err)
			continue
		}
		if got := cfg.BGP.Peers[0].KeepaliveTime.Duration; got != want {
			t.Errorf("holdTime %s: keepalive %s, want %s", hold, got, want)
		}
	}
}

// bfd: {} is BFD at FRR's defaults; a peer without it has none.
func TestBFDDefaults(t *testing.T) {
	cfg, err := Parse([]byte("bgp:\n  localASN: 64512\n  routerID: 192.0.2.1\n  peers:\n  - {address: 192.0.2.1, asn: 1, bfd: {receiveInterval: 1s}}\n  - {address: 192.0.2.2, asn: 1}\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := BFD{TransmitInterval: Duration{300 * time.Millisecond}, ReceiveInterval: Duration{time.Second}, DetectMultiplier: 3}
	if got := cfg.BGP.Peers[0].BFD; got == nil || *got != want {
		t.Errorf("bfd: %+v, want %+v", got, want)
	}
	if got := cfg.BGP.Peers[1].BFD; got != nil {
		t.Errorf("a peer without bfd: %+v, want none", got)
	}
	// A multihop session takes the router's packets from as far as the
	// BGP session may reach, unless told.
	for _, tc := range []struct {
		bfd  string
		want int
	}{{"{}", 253}, {"{minimumTTL: 254}", 254}} {
		cfg, err := Parse([]byte("bgp:\n  localASN: 64512\n  routerID: 192.0.2.1\n  peers:\n  - {address: 192.0.2.1, asn: 1, ebgpMultihop: 3, bfd: " + tc.bfd + "}\n"))
		if err != nil {
			t.Fatal(err)
		}
		if got := cfg.BGP.Peers[0].BFD.MinimumTTL; got != tc.want {
			t.Errorf("ebgpMultihop 3, bfd %s: minimumTTL %d, want %d", tc.bfd, got, tc.want)
		}
	}
}

// The node health check is on by default and fails a dead node within 2 s:
// a round every interval, the first failing probe waiting out one timeout,
// and the next ones an interval apart (rounds do not wait for the last
// one's probes).
func TestHealthCheckDefaults(t *testing.T) {
	cfg, err := Parse([]byte("inventory: {}\n"))
	if err != nil {
		t.Fatal(err)
	}
	h := cfg.LoadBalancer.HealthCheck
	if !h.On() || h.Port != 10256 || h.Path != "/healthz" {
		t.Errorf("health check %+v, want kube-proxy's /healthz on 10256, on", h)
	}
	worst := h.Interval.Duration + h.Timeout.Duration + time.Duration(h.UnhealthyThreshold-1)*h.Interval.Duration
	if worst > 2*time.Second || h.HealthyThreshold < 1 {
		t.Errorf("defaults %+v take a dead node out only after %v", h, worst)
	}
	off, err := Parse([]byte("loadBalancer:\n  healthCheck: {enabled: false}\n"))
	if err != nil || off.LoadBalancer.HealthCheck.On() {
		t.Errorf("enabled: false: %v, on %v", err, off.LoadBalancer.HealthCheck.On())
	}
}

// inventory.maxRemovals as a count or a share of the machines listed, the
// share rounded up and at least one.
func TestRemovalLimit(t *testing.T) {
	for _, c := range []struct {
		value  string
		listed int
		want   int
	}{
		{"", 5, 1}, {"", 20, 2}, {"", 25, 3}, {"10%", 0, 1}, {"50%", 7, 4}, {"3", 100, 3}, {"0", 100, 0}, {"100%", 8, 8},
	} {
		inv := Inventory{MaxRemovals: c.value}
		if got := inv.RemovalLimit(c.listed); got != c.want {
			t.Errorf("maxRemovals %q of %d machines: %d, want %d", c.value, c.listed, got, c.want)
		}
	}
}
