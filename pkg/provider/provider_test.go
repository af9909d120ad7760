package provider

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func newCloud(t *testing.T, cfg string) *Cloud {
	t.Helper()
	path := filepath.Join(t.TempDir(), "cloud.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := New(path)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func node(name, providerID string, addrs ...v1.NodeAddress) *v1.Node {
	return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1.NodeSpec{ProviderID: providerID}, Status: v1.NodeStatus{Addresses: addrs}}
}

const instancesConfig = `
inventory:
  defaults: {zone: z0, region: r0, instanceType: t0}
  machines:
  - name: a
    zone: z1
    addresses: [{type: InternalIP, address: 10.0.0.1}]
    labels: {example.com/rack: r1}
  - name: b
    powerState: "off"
`

func TestInstances(t *testing.T) {
	ctx := context.Background()
	kubelet := v1.NodeAddress{Type: v1.NodeInternalIP, Address: "10.9.9.9"}
	for _, policy := range []string{"reject", "allow"} {
		c := newCloud(t, instancesConfig+"  unlistedNodes: "+policy+"\n")
		tests := []struct {
			node             *v1.Node
			exists, shutdown bool
			wantErr          bool
			providerID, zone string
			addresses        []v1.NodeAddress
			labels           map[string]string
		}{
			{node: node("a", ""), exists: true, providerID: "baremetal://a", zone: "z1",
				addresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "10.0.0.1"}}, labels: map[string]string{"example.com/rack": "r1"}},
			{node: node("renamed", "", v1.NodeAddress{Type: v1.NodeInternalIP, Address: "10.0.0.1"}), exists: true, providerID: "baremetal://a", zone: "z1",
				addresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "10.0.0.1"}}, labels: map[string]string{"example.com/rack": "r1"}},
			{node: node("b", "", kubelet), exists: true, shutdown: true, providerID: "baremetal://b", zone: "z0", addresses: []v1.NodeAddress{kubelet}},
			// Unlisted, never listed: it exists (a kubelet registers its
			// Node NotReady, and the lifecycle controller would delete it).
			{node: node("gone", "baremetal://gone", kubelet), exists: true, wantErr: policy == "reject",
				providerID: "baremetal://gone", zone: "z0", addresses: []v1.NodeAddress{kubelet}},
		}
		for _, tt := range tests {
			name := policy + "/" + tt.node.Name
			exists, err := c.InstanceExists(ctx, tt.node)
			if err != nil || exists != tt.exists {
				t.Errorf("%s: InstanceExists = %v, %v; want %v", name, exists, err, tt.exists)
			}
			shutdown, err := c.InstanceShutdown(ctx, tt.node)
			if err != nil || shutdown != tt.shutdown {
				t.Errorf("%s: InstanceShutdown = %v, %v; want %v", name, shutdown, err, tt.shutdown)
			}
			md, err := c.InstanceMetadata(ctx, tt.node)
			if tt.wantErr {
				if err == nil {
					t.Errorf("%s: InstanceMetadata succeeded for an unlisted Node under reject", name)
				}
				continue
			}
			if err != nil {
				t.Errorf("%s: InstanceMetadata: %v", name, err)
				continue
			}
			if md.ProviderID != tt.providerID || md.Zone != tt.zone || md.Region != "r0" || md.InstanceType != "t0" {
				t.Errorf("%s: metadata %+v", name, md)
			}
			if !reflect.DeepEqual(md.NodeAddresses, tt.addresses) {
				t.Errorf("%s: addresses %v, want %v", name, md.NodeAddresses, tt.addresses)
			}
			if len(tt.labels) > 0 && !reflect.DeepEqual(md.AdditionalLabels, tt.labels) {
				t.Errorf("%s: labels %v, want %v", name, md.AdditionalLabels, tt.labels)
			}
		}
	}
}

func TestGetLabelsForVolume(t *testing.T) {
	c := newCloud(t, `
inventory:
  defaults: {region: r0}
  machines:
  - {name: n1, zone: z-n1}
  storage:
  - {name: nas, zone: z1, nfs: {servers: [10.0.1.5]}}
  - {name: ceph, region: r9, ceph: {monitors: ["10.0.1.7"]}}
`)
	pinned := &v1.VolumeNodeAffinity{Required: &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{{
		MatchExpressions: []v1.NodeSelectorRequirement{{Key: v1.LabelHostname, Operator: v1.NodeSelectorOpIn, Values: []string{"n1"}}},
	}}}}
	tests := []struct {
		name string
		spec v1.PersistentVolumeSpec
		want map[string]string
	}{
		{"nfs", v1.PersistentVolumeSpec{PersistentVolumeSource: v1.PersistentVolumeSource{NFS: &v1.NFSVolumeSource{Server: "10.0.1.5"}}},
			map[string]string{v1.LabelTopologyZone: "z1", v1.LabelTopologyRegion: "r0"}},
		{"rbd region only", v1.PersistentVolumeSpec{PersistentVolumeSource: v1.PersistentVolumeSource{RBD: &v1.RBDPersistentVolumeSource{CephMonitors: []string{"10.0.1.7:6789"}}}},
			map[string]string{v1.LabelTopologyRegion: "r9"}},
		{"cephfs", v1.PersistentVolumeSpec{PersistentVolumeSource: v1.PersistentVolumeSource{CephFS: &v1.CephFSPersistentVolumeSource{Monitors: []string{"10.0.1.7"}}}},
			map[string]string{v1.LabelTopologyRegion: "r9"}},
		{"local pinned to a machine", v1.PersistentVolumeSpec{PersistentVolumeSource: v1.PersistentVolumeSource{Local: &v1.LocalVolumeSource{Path: "/d"}}, NodeAffinity: pinned},
			map[string]string{v1.LabelTopologyZone: "z-n1", v1.LabelTopologyRegion: "r0"}},
		{"local without affinity", v1.PersistentVolumeSpec{PersistentVolumeSource: v1.PersistentVolumeSource{Local: &v1.LocalVolumeSource{Path: "/d"}}}, nil},
		{"unmatched", v1.PersistentVolumeSpec{PersistentVolumeSource: v1.PersistentVolumeSource{NFS: &v1.NFSVolumeSource{Server: "10.0.9.9"}}}, nil},
	}
	for _, tt := range tests {
		got, err := c.GetLabelsForVolume(context.Background(), &v1.PersistentVolume{Spec: tt.spec})
		if err != nil || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s: GetLabelsForVolume = %v, %v; want %v", tt.name, got, err, tt.want)
		}
	}
}

func TestNodeIPMustBeAnInventoryAddress(t *testing.T) {
	c := newCloud(t, instancesConfig)
	n := node("a", "")
	n.Annotations = map[string]string{"alpha.kubernetes.io/provided-node-ip": "10.0.0.1"}
	if _, err := c.InstanceMetadata(context.Background(), n); err != nil {
		t.Errorf("--node-ip among the machine's addresses refused: %v", err)
	}
	n.Annotations["alpha.kubernetes.io/provided-node-ip"] = "10.0.0.1,fd00::7"
	_, err := c.InstanceMetadata(context.Background(), n)
	if err == nil || !strings.Contains(err.Error(), `--node-ip fd00::7 is not among the addresses of its machine "a"`) {
		t.Errorf("--node-ip outside the inventory: error %v", err)
	}
	// A machine without addresses keeps the kubelet's, so any --node-ip goes.
	b := node("b", "")
	b.Annotations = map[string]string{"alpha.kubernetes.io/provided-node-ip": "10.7.7.7"}
	if _, err := c.InstanceMetadata(context.Background(), b); err != nil {
		t.Errorf("machine without addresses: %v", err)
	}
}
