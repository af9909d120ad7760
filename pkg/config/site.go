package config

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Site is what only the cluster knows of the addresses a cloud config must
// stay clear of: the pod network (--cluster-cidr) and the Services'
// (--service-cluster-ip-range). The CCM cannot see them in the file, so
// these checks are the validate command's, on top of Validate.
type Site struct {
	ClusterCIDRs, ServiceCIDRs []netip.Prefix
}

// CheckSite reports, by field path, what the CCM cannot check when it
// loads a config because it is the site's, or across fields: errors for
// what can never work (a pool address range that overlaps the pod or
// Service CIDRs or holds an address of a listed machine, where a VIP
// would take that node's traffic; a family of a BGP pool no peer takes; a
// peer sent nothing; a peer inside a pool), warnings for what may be
// meant (a nodeSelector that matches no machine of the inventory today).
// The config must have passed Validate.
func (c *Config) CheckSite(s Site) (problems error, warnings []error) {
	var errs []error
	add := func(p *field.Path, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", p, fmt.Sprintf(format, args...)))
	}
	warn := func(p *field.Path, format string, args ...any) {
		warnings = append(warnings, fmt.Errorf("%s: %s", p, fmt.Sprintf(format, args...)))
	}
	lb := &c.LoadBalancer
	takes := map[string]bool{} // address family -> some peer takes it
	for _, p := range c.BGP.Peers {
		for _, f := range p.AddressFamilies {
			takes[f] = true
		}
	}
	bgpFamilies := map[string]bool{} // families of the pools announced over BGP
	for i, pool := range lb.Pools {
		overBGP := pool.Announced(lb) == AnnounceBGP
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
			for k, p := range c.BGP.Peers {
				if ip, err := netip.ParseAddr(p.Address); err == nil && r.Contains(ip) {
					add(field.NewPath("bgp", "peers").Index(k).Child("address"), "%q is in pool %q (%s): a VIP would be the router's own address", p.Address, pool.Name, ap)
				}
			}
			family := familyOf(r.First)
			if overBGP {
				bgpFamilies[family] = true
				if len(c.BGP.Peers) > 0 && !takes[family] {
					add(ap, "%q is announced over BGP, but no peer in bgp.peers takes %s", a, family)
				}
			}
		}
	}
	sels, peerIdx := c.BGP.Selections()
	given := map[int]bool{} // peers some BGP pool goes to
	for k, sel := range sels {
		for i := range c.LoadBalancer.Pools {
			pool := &c.LoadBalancer.Pools[i]
			if _, ok := sel.Announces(pool.Name); ok && pool.Announced(&c.LoadBalancer) == AnnounceBGP {
				for _, j := range peerIdx[k] {
					given[j] = true
				}
			}
		}
	}
	for k, p := range c.BGP.Peers {
		pp := field.NewPath("bgp", "peers").Index(k)
		sent := c.Routes != nil
		for _, f := range p.AddressFamilies {
			sent = sent || bgpFamilies[f]
		}
		switch {
		case !sent:
			add(pp.Child("addressFamilies"), "%s only, and no pool announced over BGP has an address of that family and there is no routes section: the peer is sent nothing", strings.Join(p.AddressFamilies, ", "))
		case c.Routes == nil && len(bgpFamilies) > 0 && !given[k]:
			add(pp, "bgp.advertisements name every pool announced over BGP and give %s none, and there is no routes section: the peer is sent nothing", p.Address)
		}
		if p.NodeSelector != nil && !readsNodeLabels(p.NodeSelector, &c.Inventory) {
			sel := p.NodeSelector.Selector()
			matched := false
			for i := range c.Inventory.Machines {
				matched = matched || sel.Matches(labels.Set(c.Inventory.Machines[i].SelectorLabels()))
			}
			if !matched {
				warn(pp.Child("nodeSelector"), "matches no machine of the inventory (%s): the peer is sent no VIP", sel)
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
	return errors.Join(errs...), warnings
}

// familyOf is the BGP address family of an address.
func familyOf(a netip.Addr) string {
	if a.Is4() {
		return FamilyIPv4
	}
	return FamilyIPv6
}

func prefixRange(p netip.Prefix) AddressRange {
	p = p.Masked()
	return AddressRange{First: p.Addr(), Last: lastAddr(p)}
}

// readsNodeLabels is whether sel names a key read from the Nodes' own
// labels (inventory.nodeLabels), which validate cannot see.
func readsNodeLabels(sel *LabelSelector, inv *Inventory) bool {
	for k := range sel.MatchLabels {
		if inv.ReadsNodeLabel(k) {
			return true
		}
	}
	for _, e := range sel.MatchExpressions {
		if inv.ReadsNodeLabel(e.Key) {
			return true
		}
	}
	return false
}
