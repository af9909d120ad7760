package provider

import (
	"context"

	v1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/inventory"
)

var _ cloudprovider.PVLabeler = &Cloud{}

// GetLabelsForVolume returns the zone and region labels of the storage
// system that backs pv. A local or hostPath volume pinned to one node gets
// the labels of that node's machine. A volume nothing matches gets none.
func (c *Cloud) GetLabelsForVolume(_ context.Context, pv *v1.PersistentVolume) (map[string]string, error) {
	inv := c.inventory()
	if s, ok := inv.FindStorage(volumeOf(pv)); ok {
		return topologyLabels(s.Zone, s.Region), nil
	}
	if host, ok := pinnedHost(pv); ok {
		if m, ok := inv.MachineByName(host); ok {
			return topologyLabels(m.Zone, m.Region), nil
		}
	}
	return nil, nil
}

func topologyLabels(zone, region string) map[string]string {
	labels := map[string]string{}
	if zone != "" {
		labels[v1.LabelTopologyZone] = zone
	}
	if region != "" {
		labels[v1.LabelTopologyRegion] = region
	}
	if len(labels) == 0 {
		return nil
	}
	return labels
}

func volumeOf(pv *v1.PersistentVolume) inventory.Volume {
	var v inventory.Volume
	src := pv.Spec.PersistentVolumeSource
	switch {
	case src.NFS != nil:
		v.NFSServer, v.NFSPath = src.NFS.Server, src.NFS.Path
	case src.ISCSI != nil:
		v.ISCSIPortals = append([]string{src.ISCSI.TargetPortal}, src.ISCSI.Portals...)
		v.ISCSIIQN = src.ISCSI.IQN
	case src.RBD != nil:
		v.CephMonitors = src.RBD.CephMonitors
	case src.CephFS != nil:
		v.CephMonitors = src.CephFS.Monitors
	case src.CSI != nil:
		v.CSIDriver, v.CSIHandle, v.CSIAttrs = src.CSI.Driver, src.CSI.VolumeHandle, src.CSI.VolumeAttributes
	}
	return v
}

// pinnedHost returns the one node a local or hostPath volume's node
// affinity allows, by its kubernetes.io/hostname label.
func pinnedHost(pv *v1.PersistentVolume) (string, bool) {
	if pv.Spec.Local == nil && pv.Spec.HostPath == nil {
		return "", false
	}
	na := pv.Spec.NodeAffinity
	if na == nil || na.Required == nil || len(na.Required.NodeSelectorTerms) != 1 {
		return "", false
	}
	for _, e := range na.Required.NodeSelectorTerms[0].MatchExpressions {
		if e.Key == v1.LabelHostname && e.Operator == v1.NodeSelectorOpIn && len(e.Values) == 1 {
			return e.Values[0], true
		}
	}
	return "", false
}
