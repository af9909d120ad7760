package provider

import (
	"fmt"
	"net/netip"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Annotations a Service of type LoadBalancer may carry. Each is documented
// in the README.
const (
	annotationPrefix = "baremetal.cloudprovider.io/"
	// AnnotationLoadBalancerIPs requests addresses: a comma-separated list,
	// at most one per IP family.
	AnnotationLoadBalancerIPs = annotationPrefix + "load-balancer-ips"
	// AnnotationAddressPool names the pool to allocate from.
	AnnotationAddressPool = annotationPrefix + "address-pool"
	// AnnotationSharingKey lets Services with the same key and no port in
	// common share one address.
	AnnotationSharingKey = annotationPrefix + "sharing-key"
)

// MetalLB's Service annotations, read as aliases of ours with the same
// meaning, so that a site moving from MetalLB keeps its Services as they
// are (docs/migration/metallb.md): its current metallb.io/ form and its
// older metallb.universe.tf/ one.
var aliases = map[string][]string{
	AnnotationLoadBalancerIPs: {"metallb.io/loadBalancerIPs", "metallb.universe.tf/loadBalancerIPs"},
	AnnotationAddressPool:     {"metallb.io/address-pool", "metallb.universe.tf/address-pool"},
	AnnotationSharingKey:      {"metallb.io/allow-shared-ip", "metallb.universe.tf/allow-shared-ip"},
}

// annotation reads one of our annotations or its aliases: the name set and
// its value. Names set to different values are an error naming them all,
// and then the Service is left as it is.
func annotation(svc *v1.Service, ours string) (name, value string, ok bool, err error) {
	for _, n := range append([]string{ours}, aliases[ours]...) {
		v, set := svc.Annotations[n]
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

// ParseLoadBalancerIPs reads the value of AnnotationLoadBalancerIPs.
func ParseLoadBalancerIPs(value string) ([]netip.Addr, error) {
	return parseLoadBalancerIPs(AnnotationLoadBalancerIPs, value)
}

func parseLoadBalancerIPs(name, value string) ([]netip.Addr, error) {
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

// ParsePoolName reads the value of AnnotationAddressPool.
func ParsePoolName(value string) (string, error) { return parsePoolName(AnnotationAddressPool, value) }

func parsePoolName(name, value string) (string, error) {
	if msgs := validation.IsDNS1123Label(value); len(msgs) > 0 {
		return "", fmt.Errorf("annotation %s: %q is not a pool name: %s", name, value, strings.Join(msgs, "; "))
	}
	return value, nil
}

// ParseSharingKey reads the value of AnnotationSharingKey.
func ParseSharingKey(value string) (string, error) {
	return parseSharingKey(AnnotationSharingKey, value)
}

func parseSharingKey(name, value string) (string, error) {
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

// requestedIPs returns the addresses a Service asks for: the annotation (or
// an alias), or else the deprecated spec.loadBalancerIP.
func requestedIPs(svc *v1.Service) ([]netip.Addr, error) {
	if name, v, ok, err := annotation(svc, AnnotationLoadBalancerIPs); err != nil || ok {
		if err != nil {
			return nil, err
		}
		return parseLoadBalancerIPs(name, v)
	}
	if svc.Spec.LoadBalancerIP != "" {
		ip, err := netip.ParseAddr(svc.Spec.LoadBalancerIP)
		if err != nil {
			return nil, fmt.Errorf("spec.loadBalancerIP: %q is not an IP address", svc.Spec.LoadBalancerIP)
		}
		return []netip.Addr{ip.Unmap()}, nil
	}
	return nil, nil
}
