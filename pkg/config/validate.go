package config

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// ProviderIDPrefix starts every provider ID this provider makes.
const ProviderIDPrefix = "baremetal://"

// DefaultISCSIPort is the port of an iSCSI portal given without one.
const DefaultISCSIPort = "3260"

// SetDefaults fills in the values a file may leave out.
func (c *Config) SetDefaults() {
	inv := &c.Inventory
	if inv.UnlistedNodes == "" {
		inv.UnlistedNodes = UnlistedReject
	}
	for i := range inv.Machines {
		m := &inv.Machines[i]
		if m.PowerState == "" {
			m.PowerState = PowerOn
		}
		if m.Zone == "" {
			m.Zone = inv.Defaults.Zone
		}
		if m.Region == "" {
			m.Region = inv.Defaults.Region
		}
		if m.InstanceType == "" {
			m.InstanceType = inv.Defaults.InstanceType
		}
	}
	for i := range inv.Storage {
		if inv.Storage[i].Region == "" {
			inv.Storage[i].Region = inv.Defaults.Region
		}
	}
	inv.setBMCDefaults()
	c.setNetworkDefaults()
}

// EffectiveProviderID is the provider ID a Node of this machine gets.
func (m *Machine) EffectiveProviderID() string {
	if m.ProviderID != "" {
		return m.ProviderID
	}
	return ProviderIDPrefix + m.Name
}

// Validate reports every problem of the config, each naming its field path.
func (c *Config) Validate() error { return c.validate(true) }

// validate is Validate; without readSecrets, the peers' password files are
// not read.
func (c *Config) validate(readSecrets bool) error {
	var errs []error
	add := func(p *field.Path, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", p, fmt.Sprintf(format, args...)))
	}
	inv := &c.Inventory
	root := field.NewPath("inventory")

	switch inv.UnlistedNodes {
	case UnlistedReject, UnlistedAllow:
	default:
		add(root.Child("unlistedNodes"), "%q is not one of reject, allow", inv.UnlistedNodes)
	}
	for i, k := range inv.NodeLabels {
		if msgs := validation.IsQualifiedName(k); len(msgs) > 0 {
			add(root.Child("nodeLabels").Index(i), "%q is not a label key: %s", k, strings.Join(msgs, "; "))
		} else if k == "topology.kubernetes.io/zone" || k == "topology.kubernetes.io/region" {
			add(root.Child("nodeLabels").Index(i), "%q is the machine's zone or region, which the inventory gives", k)
		}
	}
	if v := strings.TrimSpace(inv.MaxRemovals); v != "" {
		if _, _, ok := countOrShare(v); !ok {
			add(root.Child("maxRemovals"), "%q is neither a count (3) nor a share of the machines (10%%)", inv.MaxRemovals)
		}
	}
	d := root.Child("defaults")
	checkLabelValue(add, d.Child("zone"), inv.Defaults.Zone)
	checkLabelValue(add, d.Child("region"), inv.Defaults.Region)
	checkLabelValue(add, d.Child("instanceType"), inv.Defaults.InstanceType)

	// Every key a Node is matched by must point at one machine only.
	names := map[string]string{}       // name or hostname -> machine
	providerIDs := map[string]string{} // provider ID -> machine
	addresses := map[string]string{}   // address -> machine
	for i := range inv.Machines {
		m := &inv.Machines[i]
		p := root.Child("machines").Index(i)
		if m.Name == "" {
			add(p.Child("name"), "is required")
		} else if msgs := validation.IsDNS1123Subdomain(m.Name); len(msgs) > 0 {
			add(p.Child("name"), "%q is not a valid Node name: %s", m.Name, strings.Join(msgs, "; "))
		} else if other, dup := names[m.Name]; dup {
			add(p.Child("name"), "%q is already used by machine %q", m.Name, other)
		} else {
			names[m.Name] = m.Name
		}
		for j, h := range m.Hostnames {
			hp := p.Child("hostnames").Index(j)
			if msgs := validation.IsDNS1123Subdomain(h); len(msgs) > 0 {
				add(hp, "%q is not a valid hostname: %s", h, strings.Join(msgs, "; "))
			} else if other, dup := names[h]; dup && other != m.Name {
				add(hp, "%q is already used by machine %q", h, other)
			} else {
				names[h] = m.Name
			}
		}
		if m.ProviderID != "" && strings.TrimSpace(m.ProviderID) != m.ProviderID {
			add(p.Child("providerID"), "%q has leading or trailing spaces", m.ProviderID)
		}
		if m.Name != "" {
			id := m.EffectiveProviderID()
			if other, dup := providerIDs[id]; dup {
				add(p.Child("providerID"), "provider ID %q is already used by machine %q", id, other)
			} else {
				providerIDs[id] = m.Name
			}
		}
		checkLabelValue(add, p.Child("zone"), m.Zone)
		checkLabelValue(add, p.Child("region"), m.Region)
		checkLabelValue(add, p.Child("instanceType"), m.InstanceType)
		for j, mac := range m.MACAddresses {
			if hw, err := net.ParseMAC(mac); err != nil || len(hw) != 6 {
				add(p.Child("macAddresses").Index(j), "%q is not an Ethernet (EUI-48) address such as 52:54:00:12:34:56", mac)
			}
		}
		for j, a := range m.Addresses {
			ap := p.Child("addresses").Index(j)
			switch a.Type {
			case AddressInternalIP, AddressExternalIP:
				ip, err := netip.ParseAddr(a.Address)
				if err != nil || ip.Zone() != "" {
					add(ap.Child("address"), "%q is not an IP", a.Address)
					continue
				}
				if u := ip.Unmap(); u.IsLoopback() || u.IsLinkLocalUnicast() || u.IsMulticast() || u.IsUnspecified() {
					add(ap.Child("address"), "%q is a loopback, link-local, multicast or unspecified address: no traffic may be sent to it", a.Address)
					continue
				}
				key := ip.String()
				if other, dup := addresses[key]; dup && other != m.Name {
					add(ap.Child("address"), "%q is already an address of machine %q", a.Address, other)
				}
				addresses[key] = m.Name
			case AddressHostname, AddressInternalDNS, AddressExternalDNS:
				if msgs := validation.IsDNS1123Subdomain(a.Address); len(msgs) > 0 {
					add(ap.Child("address"), "%q is not a valid DNS name: %s", a.Address, strings.Join(msgs, "; "))
				}
			case "":
				add(ap.Child("type"), "is required (one of InternalIP, ExternalIP, Hostname, InternalDNS, ExternalDNS)")
			default:
				add(ap.Child("type"), "%q is not one of InternalIP, ExternalIP, Hostname, InternalDNS, ExternalDNS", a.Type)
			}
		}
		for k, v := range m.Labels {
			lp := p.Child("labels").Key(k)
			if msgs := validation.IsQualifiedName(k); len(msgs) > 0 {
				add(lp, "%q is not a valid label key: %s", k, strings.Join(msgs, "; "))
			} else if isKubernetesLabel(k) {
				add(lp, "%q is in a kubernetes.io or k8s.io namespace, which the cloud node controller does not set", k)
			}
			checkLabelValue(add, lp, v)
		}
		switch m.PowerState {
		case PowerOn, PowerOff:
		default:
			add(p.Child("powerState"), "%q is not one of on, off", m.PowerState)
		}
	}

	inv.validateBMCs(add, root, readSecrets)

	storageNames := map[string]bool{}
	for i := range inv.Storage {
		s := &inv.Storage[i]
		p := root.Child("storage").Index(i)
		if s.Name == "" {
			add(p.Child("name"), "is required")
		} else if storageNames[s.Name] {
			add(p.Child("name"), "%q is already used by another storage system", s.Name)
		}
		storageNames[s.Name] = true
		if s.Zone == "" && s.Region == "" {
			add(p, "needs a zone or a region")
		}
		checkLabelValue(add, p.Child("zone"), s.Zone)
		checkLabelValue(add, p.Child("region"), s.Region)
		if s.NFS == nil && s.ISCSI == nil && s.Ceph == nil && len(s.CSI) == 0 {
			add(p, "needs at least one of nfs, iscsi, ceph, csi to match volumes by")
		}
		if s.NFS != nil {
			if len(s.NFS.Servers) == 0 {
				add(p.Child("nfs", "servers"), "needs at least one server")
			}
			for j, srv := range s.NFS.Servers {
				checkHost(add, p.Child("nfs", "servers").Index(j), srv)
			}
		}
		if s.ISCSI != nil {
			if len(s.ISCSI.TargetPortals) == 0 {
				add(p.Child("iscsi", "targetPortals"), "needs at least one portal")
			}
			for j, portal := range s.ISCSI.TargetPortals {
				pp := p.Child("iscsi", "targetPortals").Index(j)
				if _, err := NormalizePortal(portal); err != nil {
					add(pp, "%v", err)
				}
			}
		}
		if s.Ceph != nil {
			if len(s.Ceph.Monitors) == 0 {
				add(p.Child("ceph", "monitors"), "needs at least one monitor")
			}
			for j, mon := range s.Ceph.Monitors {
				if _, err := NormalizeHostPort(mon, ""); err != nil {
					add(p.Child("ceph", "monitors").Index(j), "%v", err)
				}
			}
		}
		for j, c := range s.CSI {
			cp := p.Child("csi").Index(j)
			if c.Driver == "" {
				add(cp.Child("driver"), "is required")
			} else if msgs := validation.IsDNS1123Subdomain(strings.ToLower(c.Driver)); len(msgs) > 0 {
				add(cp.Child("driver"), "%q is not a valid CSI driver name: %s", c.Driver, strings.Join(msgs, "; "))
			}
		}
	}
	c.validateNetwork(add, readSecrets)
	return errors.Join(errs...)
}

// reporter records one problem at a field path.
type reporter func(p *field.Path, format string, args ...any)

func checkLabelValue(add reporter, p *field.Path, v string) {
	if msgs := validation.IsValidLabelValue(v); len(msgs) > 0 {
		add(p, "%q is not a valid label value: %s", v, strings.Join(msgs, "; "))
	}
}

func checkHost(add reporter, p *field.Path, h string) {
	if _, err := netip.ParseAddr(h); err == nil {
		return
	}
	if msgs := validation.IsDNS1123Subdomain(strings.ToLower(h)); len(msgs) > 0 {
		add(p, "%q is neither an IP nor a DNS name", h)
	}
}

func isKubernetesLabel(key string) bool {
	prefix, _, ok := strings.Cut(key, "/")
	if !ok {
		return false
	}
	for _, ns := range []string{"kubernetes.io", "k8s.io"} {
		if prefix == ns || strings.HasSuffix(prefix, "."+ns) {
			return true
		}
	}
	return false
}

// NormalizePortal returns an iSCSI portal as host:port, with the default
// port where none is given, so that portals compare equal however written.
func NormalizePortal(portal string) (string, error) {
	return NormalizeHostPort(portal, DefaultISCSIPort)
}

// NormalizeHostPort returns s as "host:port" (IPv6 hosts bracketed, names
// lower-cased). Without a port, defaultPort is used; an empty defaultPort
// leaves a portless host as it is.
func NormalizeHostPort(s, defaultPort string) (string, error) {
	host, port := s, defaultPort
	if h, p, err := net.SplitHostPort(s); err == nil {
		host, port = h, p
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return "", fmt.Errorf("%q has an invalid port", s)
		}
	} else {
		host = strings.TrimSuffix(strings.TrimPrefix(s, "["), "]")
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		host = ip.String()
	} else if msgs := validation.IsDNS1123Subdomain(strings.ToLower(host)); len(msgs) > 0 || host == "" {
		return "", fmt.Errorf("%q is not host or host:port", s)
	} else {
		host = strings.ToLower(host)
	}
	if port == "" {
		return host, nil
	}
	return net.JoinHostPort(host, port), nil
}
