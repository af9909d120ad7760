package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/controllers/pvlabel"
	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/test/framework"
)

func createPV(t *testing.T, name string, labels map[string]string, src v1.PersistentVolumeSource, affinity *v1.VolumeNodeAffinity) {
	t.Helper()
	pv := &v1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec: v1.PersistentVolumeSpec{
			Capacity:               v1.ResourceList{v1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes:            []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
			PersistentVolumeSource: src,
			NodeAffinity:           affinity,
		},
	}
	if _, err := suite.Cluster.Admin.CoreV1().PersistentVolumes().Create(context.Background(), pv, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating PersistentVolume %s: %v", name, err)
	}
	t.Cleanup(func() {
		suite.Cluster.Admin.CoreV1().PersistentVolumes().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
}

func getPV(t *testing.T, name string) *v1.PersistentVolume {
	t.Helper()
	pv, err := suite.Cluster.Admin.CoreV1().PersistentVolumes().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return pv
}

func pvLabels(t *testing.T, name string) map[string]string { t.Helper(); return getPV(t, name).Labels }

func waitPVLabels(t *testing.T, name string, want map[string]string) {
	t.Helper()
	framework.Eventually(t, waitTimeout, "PersistentVolume "+name+" labelled", func() (bool, string) {
		got := pvLabels(t, name)
		for k, v := range want {
			if got[k] != v {
				return false, fmt.Sprintf("labels %v", got)
			}
		}
		return true, ""
	})
}

func TestPersistentVolumesGetStorageZones(t *testing.T) {
	const cfg = `
inventory:
  defaults: {region: dc-1}
  machines:
  - name: pv-node-1
    zone: rack-n
  storage:
  - name: nas
    zone: rack-a
    nfs: {servers: [192.0.2.50]}
    csi:
    - {driver: nfs.csi.k8s.io, volumeHandlePrefix: "192.0.2.50#"}
  - name: san
    zone: rack-b
    region: dc-2
    iscsi: {targetPortals: ["192.0.2.60"]}
`
	zone, region := v1.LabelTopologyZone, v1.LabelTopologyRegion
	nfs := func(server string) v1.PersistentVolumeSource {
		return v1.PersistentVolumeSource{NFS: &v1.NFSVolumeSource{Server: server, Path: "/export/x"}}
	}
	// Existing before the CCM starts: labelled at start.
	createPV(t, "pv-nfs-early", nil, nfs("192.0.2.50"), nil)

	s := newSite(t, cfg)
	s.startCCM("ccm")

	createPV(t, "pv-csi", nil, v1.PersistentVolumeSource{CSI: &v1.CSIPersistentVolumeSource{Driver: "nfs.csi.k8s.io", VolumeHandle: "192.0.2.50#export#vol-1"}}, nil)
	createPV(t, "pv-iscsi", nil, v1.PersistentVolumeSource{ISCSI: &v1.ISCSIPersistentVolumeSource{TargetPortal: "192.0.2.60:3260", IQN: "iqn.2026-01.example:t1", Lun: 0}}, nil)
	createPV(t, "pv-user-zone", map[string]string{zone: "chosen-by-user"}, nfs("192.0.2.50"), nil)
	createPV(t, "pv-unmatched", map[string]string{"app": "x"}, nfs("198.51.100.9"), nil)
	createPV(t, "pv-local", nil, v1.PersistentVolumeSource{Local: &v1.LocalVolumeSource{Path: "/mnt/disk1"}}, &v1.VolumeNodeAffinity{
		Required: &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{{MatchExpressions: []v1.NodeSelectorRequirement{{
			Key: v1.LabelHostname, Operator: v1.NodeSelectorOpIn, Values: []string{"pv-node-1"},
		}}}}},
	})

	waitPVLabels(t, "pv-nfs-early", map[string]string{zone: "rack-a", region: "dc-1"})
	waitPVLabels(t, "pv-csi", map[string]string{zone: "rack-a", region: "dc-1"})
	waitPVLabels(t, "pv-iscsi", map[string]string{zone: "rack-b", region: "dc-2"})
	waitPVLabels(t, "pv-local", map[string]string{zone: "rack-n", region: "dc-1"})
	// The user's zone stays; only the missing region is added.
	waitPVLabels(t, "pv-user-zone", map[string]string{zone: "chosen-by-user", region: "dc-1"})

	framework.Consistently(t, 3*time.Second, "the unmatched PersistentVolume is left alone", func() (bool, string) {
		got := pvLabels(t, "pv-unmatched")
		return len(got) == 1 && got["app"] == "x", fmt.Sprintf("labels %v", got)
	})

	// The CCM marks what it labelled.
	if got := getPV(t, "pv-csi").Annotations[pvlabel.LabelledAnnotation]; got != region+","+zone {
		t.Errorf("pv-csi annotation %s=%q, want the keys it set", pvlabel.LabelledAnnotation, got)
	}
	// A user takes the zone off a volume the CCM labelled (say it is
	// replicated to every zone).
	if _, err := suite.Cluster.Admin.CoreV1().PersistentVolumes().Patch(context.Background(), "pv-csi", types.MergePatchType,
		[]byte(`{"metadata":{"labels":{"`+zone+`":null}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}

	// A storage system added to the config labels the volumes it backs.
	s.writeConfig(cfg + "  - name: far\n    zone: rack-f\n    nfs: {servers: [198.51.100.9]}\n")
	waitPVLabels(t, "pv-unmatched", map[string]string{zone: "rack-f", region: "dc-1", "app": "x"})

	// Neither that reload nor a new leader puts the removed label back.
	s.ccms[0].Stop()
	s.startCCM("ccm-next")
	framework.Consistently(t, 4*time.Second, "the zone label the user removed stays removed", func() (bool, string) {
		got := pvLabels(t, "pv-csi")
		_, has := got[zone]
		return !has && got[region] == "dc-1", fmt.Sprintf("labels %v", got)
	})

	// Removing the annotation asks for the labels again, at once: no
	// restart, failover or reload needed.
	if _, err := suite.Cluster.Admin.CoreV1().PersistentVolumes().Patch(context.Background(), "pv-csi", types.MergePatchType,
		[]byte(`{"metadata":{"annotations":{"`+pvlabel.LabelledAnnotation+`":null}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPVLabels(t, "pv-csi", map[string]string{zone: "rack-a", region: "dc-1"})
}
