package inventory

import (
	"net"
	"net/netip"
	"strings"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/config"
)

// Volume is what a storage system is matched on: the source of a
// PersistentVolume, with only the fields that say where it lives.
type Volume struct {
	NFSServer string
	NFSPath   string
	// ISCSIPortals are the target portal and any further portals.
	ISCSIPortals []string
	ISCSIIQN     string
	CephMonitors []string
	CSIDriver    string
	CSIHandle    string
	CSIAttrs     map[string]string
}

// FindStorage returns the first storage system, in file order, that backs v.
func (inv *Inventory) FindStorage(v Volume) (*config.StorageSystem, bool) {
	for i := range inv.cfg.Storage {
		s := &inv.cfg.Storage[i]
		if matchNFS(s.NFS, v) || matchISCSI(s.ISCSI, v) || matchCeph(s.Ceph, v) || matchCSI(s.CSI, v) {
			return s, true
		}
	}
	return nil, false
}

func matchNFS(m *config.NFSMatch, v Volume) bool {
	if m == nil || v.NFSServer == "" || !strings.HasPrefix(v.NFSPath, m.PathPrefix) {
		return false
	}
	for _, s := range m.Servers {
		if sameHost(s, v.NFSServer) {
			return true
		}
	}
	return false
}

func matchISCSI(m *config.ISCSIMatch, v Volume) bool {
	if m == nil || len(v.ISCSIPortals) == 0 || !strings.HasPrefix(v.ISCSIIQN, m.IQNPrefix) {
		return false
	}
	for _, want := range m.TargetPortals {
		w, err := config.NormalizePortal(want)
		if err != nil {
			continue
		}
		for _, got := range v.ISCSIPortals {
			if g, err := config.NormalizePortal(got); err == nil && g == w {
				return true
			}
		}
	}
	return false
}

func matchCeph(m *config.CephMatch, v Volume) bool {
	if m == nil {
		return false
	}
	for _, want := range m.Monitors {
		for _, got := range v.CephMonitors {
			if sameMonitor(want, got) {
				return true
			}
		}
	}
	return false
}

// sameMonitor compares Ceph monitors by host and, where both give one, port.
func sameMonitor(want, got string) bool {
	wh, wp := splitHostPort(want)
	gh, gp := splitHostPort(got)
	return sameHost(wh, gh) && (wp == "" || gp == "" || wp == gp)
}

func splitHostPort(s string) (host, port string) {
	if h, p, err := net.SplitHostPort(s); err == nil {
		return h, p
	}
	return strings.Trim(s, "[]"), ""
}

func matchCSI(ms []config.CSIMatch, v Volume) bool {
	if v.CSIDriver == "" {
		return false
	}
	for _, m := range ms {
		if m.Driver != v.CSIDriver || !strings.HasPrefix(v.CSIHandle, m.VolumeHandlePrefix) {
			continue
		}
		all := true
		for k, want := range m.VolumeAttributes {
			if got, ok := v.CSIAttrs[k]; !ok || got != want {
				all = false
				break
			}
		}
		if all {
			return true
		}
	}
	return false
}

// sameHost compares hosts: IPs by value, names case-insensitively.
func sameHost(a, b string) bool {
	ia, errA := netip.ParseAddr(strings.Trim(a, "[]"))
	ib, errB := netip.ParseAddr(strings.Trim(b, "[]"))
	if errA == nil && errB == nil {
		return ia == ib
	}
	return strings.EqualFold(a, b)
}
