package provider

import (
	"fmt"
	"net/netip"

	v1 "k8s.io/api/core/v1"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/annotations"
)

// requestedIPs returns the addresses a Service asks for: the annotation (or
// an alias), or else the deprecated spec.loadBalancerIP.
func requestedIPs(svc *v1.Service) ([]netip.Addr, error) {
	if name, v, ok, err := annotations.Lookup(svc.Annotations, annotations.LoadBalancerIPs); err != nil || ok {
		if err != nil {
			return nil, err
		}
		return annotations.ParseLoadBalancerIPs(name, v)
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
