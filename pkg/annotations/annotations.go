// Package annotations reads the annotations a Service of type LoadBalancer
// may carry, and MetalLB's, read as aliases of them. It stays small (no
// Kubernetes API types) so that its fuzz target builds in seconds.
package annotations

import (
	"fmt"
	"net/netip"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// Annotations a Service of type LoadBalancer may carry. Each is documented
// in docs/reference/annotations.md.
const (
	Prefix = "baremetal.cloudprovider.io/"
	// LoadBalancerIPs requests addresses: a comma-separated list,
	// at most one per IP family.
	LoadBalancerIPs = Prefix + "load-balancer-ips"
	// AddressPool names the pool to allocate from.
	AddressPool = Prefix + "address-pool"
	// SharingKey lets Services with the same key and no port in
	// common share one address.
	SharingKey = Prefix + "sharing-key"
)

// MetalLB's Service annotations, read as aliases of ours with the same
// meaning, so that a site moving from MetalLB keeps its Services as they
// are (docs/migration/metallb.md): its current metallb.io/ form and its
// older metallb.universe.tf/ one.
var aliases = map[string][]string{
	LoadBalancerIPs: {"metallb.io/loadBalancerIPs", "metallb.universe.tf/loadBalancerIPs"},
	AddressPool:     {"metallb.io/address-pool", "metallb.universe.tf/address-pool"},
	SharingKey:      {"metallb.io/allow-shared-ip", "metallb.universe.tf/allow-shared-ip"},
}

// Lookup reads one of our annotations or its aliases from a Service's
// annotations: the name set and its value. Names set to different values
// are an error naming them, and then the Service is left as it is.
func Lookup(annotations map[string]string, ours string) (name, value string, ok bool, err error) {
	for _, n := range append([]string{ours}, aliases[ours]...) {
		v, set := annotations[n]
		if !set {
			continue
		}
		if !ok {
			name, value, ok = n, v, true
			continue
		}
		if v != value {
			return "", "", false, fmt.Errorf("annotations %s (%q) and %s (%q) disagree; set one, or both to the same value", name, value, n, v)
		}
	}
	return name, value, ok, nil
}

// ParseLoadBalancerIPs reads the value of LoadBalancerIPs, or of its alias
// name.
func ParseLoadBalancerIPs(name, value string) ([]netip.Addr, error) {
	var out []netip.Addr
	seen := map[bool]bool{}
	for _, part := range strings.Split(value, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		ip, err := netip.ParseAddr(part)
		if err != nil || ip.Zone() != "" {
			return nil, fmt.Errorf("annotation %s: %q is not an IP address", name, part)
		}
		ip = ip.Unmap()
		if seen[ip.Is4()] {
			return nil, fmt.Errorf("annotation %s: %q gives more than one %s address", name, value, familyName(ip))
		}
		seen[ip.Is4()] = true
		out = append(out, ip)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("annotation %s: %q names no address", name, value)
	}
	return out, nil
}

// ParsePoolName reads the value of AddressPool, or of its alias name.
func ParsePoolName(name, value string) (string, error) {
	if msgs := validation.IsDNS1123Label(value); len(msgs) > 0 {
		return "", fmt.Errorf("annotation %s: %q is not a pool name: %s", name, value, strings.Join(msgs, "; "))
	}
	return value, nil
}

// ParseSharingKey reads the value of SharingKey, or of its alias name.
func ParseSharingKey(name, value string) (string, error) {
	if value == "" || len(value) > 253 || strings.ContainsAny(value, " \t\r\n") {
		return "", fmt.Errorf("annotation %s: %q must be 1 to 253 characters without spaces", name, value)
	}
	return value, nil
}

func familyName(ip netip.Addr) string {
	if ip.Is4() {
		return "IPv4"
	}
	return "IPv6"
}
