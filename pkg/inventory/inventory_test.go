package inventory

import (
	"testing"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/config"
)

func mustParse(t *testing.T, s string) *Inventory {
	t.Helper()
	cfg, err := config.Parse([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return New(cfg.Inventory)
}

func TestFindMachine(t *testing.T) {
	inv := mustParse(t, `
inventory:
  machines:
  - name: a
    hostnames: [a.lab.example]
    addresses: [{type: InternalIP, address: 10.0.0.1}, {type: InternalDNS, address: a.internal}]
  - name: b
    providerID: vendor://serial-42
    addresses: [{type: InternalIP, address: "fd00::2"}]
`)
	tests := []struct {
		name string
		keys NodeKeys
		want string // "" for no machine
	}{
		{"by provider ID", NodeKeys{ProviderID: "baremetal://a", Name: "other"}, "a"},
		{"by own provider ID", NodeKeys{ProviderID: "vendor://serial-42", Name: "x"}, "b"},
		{"by name", NodeKeys{Name: "b"}, "b"},
		{"by hostname", NodeKeys{Name: "A.lab.example"}, "a"},
		{"by IP", NodeKeys{Name: "x", Addresses: []string{"192.0.2.9", "10.0.0.1"}}, "a"},
		{"by IPv6 in another spelling", NodeKeys{Name: "x", Addresses: []string{"fd00:0:0::2"}}, "b"},
		{"by DNS address", NodeKeys{Name: "x", Addresses: []string{"a.internal"}}, "a"},
		{"provider ID wins over name", NodeKeys{ProviderID: "baremetal://a", Name: "b"}, "a"},
		{"unknown", NodeKeys{ProviderID: "baremetal://c", Name: "c", Addresses: []string{"10.0.0.3"}}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, ok := inv.FindMachine(tt.keys)
			got := ""
			if ok {
				got = m.Name
			}
			if got != tt.want {
				t.Errorf("FindMachine(%+v) = %q, want %q", tt.keys, got, tt.want)
			}
		})
	}
}

func TestFindStorage(t *testing.T) {
	inv := mustParse(t, `
inventory:
  storage:
  - name: nas
    zone: z1
    nfs: {servers: [10.0.1.5, NAS.lab.example], pathPrefix: /export}
  - name: san
    zone: z2
    iscsi: {targetPortals: ["10.0.1.6"], iqnPrefix: iqn.2026-01.example}
  - name: ceph
    zone: z3
    ceph: {monitors: ["10.0.1.7"]}
    csi:
    - driver: rbd.csi.ceph.com
      volumeAttributes: {clusterID: c1}
  - name: nfs-csi
    zone: z4
    csi:
    - {driver: nfs.csi.k8s.io, volumeHandlePrefix: "nas#"}
`)
	tests := []struct {
		name string
		v    Volume
		want string
	}{
		{"nfs by IP", Volume{NFSServer: "10.0.1.5", NFSPath: "/export/a"}, "nas"},
		{"nfs by name, any case", Volume{NFSServer: "nas.lab.example", NFSPath: "/export/b"}, "nas"},
		{"nfs outside the path prefix", Volume{NFSServer: "10.0.1.5", NFSPath: "/other"}, ""},
		{"iscsi default port", Volume{ISCSIPortals: []string{"10.0.1.6:3260"}, ISCSIIQN: "iqn.2026-01.example:t1"}, "san"},
		{"iscsi second portal", Volume{ISCSIPortals: []string{"10.9.9.9", "10.0.1.6"}, ISCSIIQN: "iqn.2026-01.example:t1"}, "san"},
		{"iscsi other port", Volume{ISCSIPortals: []string{"10.0.1.6:3261"}, ISCSIIQN: "iqn.2026-01.example:t1"}, ""},
		{"iscsi other IQN", Volume{ISCSIPortals: []string{"10.0.1.6"}, ISCSIIQN: "iqn.2020-01.other:t"}, ""},
		{"ceph monitor with port", Volume{CephMonitors: []string{"10.0.1.8:6789", "10.0.1.7:6789"}}, "ceph"},
		{"ceph csi by cluster ID", Volume{CSIDriver: "rbd.csi.ceph.com", CSIHandle: "0001-x", CSIAttrs: map[string]string{"clusterID": "c1", "pool": "p"}}, "ceph"},
		{"ceph csi other cluster", Volume{CSIDriver: "rbd.csi.ceph.com", CSIAttrs: map[string]string{"clusterID": "c2"}}, ""},
		{"csi handle prefix", Volume{CSIDriver: "nfs.csi.k8s.io", CSIHandle: "nas#share#x"}, "nfs-csi"},
		{"csi other driver", Volume{CSIDriver: "hostpath.csi.k8s.io", CSIHandle: "nas#x"}, ""},
		{"nothing", Volume{}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, ok := inv.FindStorage(tt.v)
			got := ""
			if ok {
				got = s.Name
			}
			if got != tt.want {
				t.Errorf("FindStorage(%+v) = %q, want %q", tt.v, got, tt.want)
			}
		})
	}
}
