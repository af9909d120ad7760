package config

import (
	"errors"
	"fmt"
	"net/netip"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Site is what only the cluster knows of the addresses a cloud config must
// stay clear of: the pod network (--cluster-cidr) and the Services'
// (--service-cluster-ip-range). The CCM cannot see them in the file, so
// these checks are the validate command's, on top of Validate.
type Site struct {
	ClusterCIDRs, ServiceCIDRs []netip.Prefix
}

// CheckSite reports, by field path, every pool address range that overlaps
// the pod or Service CIDRs or holds an address of a listed machine (a VIP
// equal to a node's address would take that node's traffic), and the pod
// and Service CIDRs overlapping each other. The config must have passed
// Validate.
func (c *Config) CheckSite(s Site) error {
	var errs []error
	add := func(p *field.Path, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", p, fmt.Sprintf(format, args...)))
	}
	for i, pool := range c.LoadBalancer.Pools {
		for j, a := range pool.Addresses {
			r, err := ParseAddressRange(a)
			if err != nil {
				continue
			}
			ap := field.NewPath("loadBalancer", "pools").Index(i).Child("addresses").Index(j)
			for _, p := range s.ClusterCIDRs {
				if r.Overlaps(prefixRange(p)) {
					add(ap, "%q overlaps the pod CIDR %s (--cluster-cidr)", a, p)
				}
			}
			for _, p := range s.ServiceCIDRs {
				if r.Overlaps(prefixRange(p)) {
					add(ap, "%q overlaps the Service CIDR %s (--service-cluster-ip-range)", a, p)
				}
			}
			for _, m := range c.Inventory.Machines {
				for _, na := range m.Addresses {
					if ip, err := netip.ParseAddr(na.Address); err == nil && r.Contains(ip) {
						add(ap, "%q holds %s, an address of machine %q", a, ip, m.Name)
					}
				}
			}
		}
	}
	for _, p := range s.ClusterCIDRs {
		for _, q := range s.ServiceCIDRs {
			if p.Overlaps(q) {
				errs = append(errs, fmt.Errorf("--cluster-cidr %s overlaps --service-cluster-ip-range %s", p, q))
			}
		}
	}
	return errors.Join(errs...)
}

func prefixRange(p netip.Prefix) AddressRange {
	p = p.Masked()
	return AddressRange{First: p.Addr(), Last: lastAddr(p)}
}
