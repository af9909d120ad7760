package provider

import (
	"context"
	"errors"
	"fmt"
	"net/netip"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/klog/v2"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/annotations"
	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/ipam"
)

var _ cloudprovider.LoadBalancer = &Cloud{}

func serviceKey(svc *v1.Service) string { return svc.Namespace + "/" + svc.Name }

// GetLoadBalancerName implements cloudprovider.LoadBalancer.
func (c *Cloud) GetLoadBalancerName(_ context.Context, _ string, svc *v1.Service) string {
	return cloudprovider.DefaultLoadBalancerName(svc)
}

// GetLoadBalancer reports the addresses the Service holds.
func (c *Cloud) GetLoadBalancer(ctx context.Context, _ string, svc *v1.Service) (*v1.LoadBalancerStatus, bool, error) {
	if err := c.lb.waitReady(ctx); err != nil {
		return nil, false, err
	}
	c.lb.mu.Lock()
	defer c.lb.mu.Unlock()
	vips := c.lb.alloc.Addresses(serviceKey(svc))
	if len(vips) == 0 {
		return nil, false, nil
	}
	return lbStatus(vips), true, nil
}

// EnsureLoadBalancer gives the Service its addresses and announces them
// with the eligible nodes as next hops. An error leaves what the Service
// had in place; the service controller turns it into an Event.
//
// The next hops come from the provider's own Node informer, filtered as
// the service controller filters the nodes it passes (nodeEligible), so
// a Node change reaches the routers in one convergence instead of after
// the controller has called UpdateLoadBalancer for every Service.
func (c *Cloud) EnsureLoadBalancer(ctx context.Context, _ string, svc *v1.Service, _ []*v1.Node) (*v1.LoadBalancerStatus, error) {
	if err := c.lb.waitReady(ctx); err != nil {
		return nil, err
	}
	req, err := allocationRequest(svc)
	if err != nil {
		return nil, err
	}
	req.NamespaceLabels = c.lb.cluster.namespaceLabels(svc.Namespace)
	n := c.lb
	n.mu.Lock()
	n.noteElsewhere()
	vips, err := n.alloc.Allocate(req)
	if err != nil {
		n.mu.Unlock()
		return nil, fmt.Errorf("Service %s: %w", req.Service, err)
	}
	n.services[req.Service] = &lbService{namespace: svc.Namespace, name: svc.Name}
	refusals := n.alloc.ShareRefusals(req)
	n.countPools()
	n.mu.Unlock()
	if len(refusals) > 0 {
		c.eventf(svc, v1.EventTypeWarning, "SharingRefused", "sharing key %q: this Service got an address of its own, as it may not share: %v", req.SharingKey, errors.Join(refusals...))
	}
	klog.V(2).InfoS("Load balancer ensured", "service", klog.KObj(svc), "addresses", vips)
	n.announce()
	return lbStatus(vips), nil
}

// UpdateLoadBalancer is called when the service controller's node set
// changes; the provider has followed the Nodes already (see
// EnsureLoadBalancer), so this only refreshes the traffic policy. It never
// creates: the node sync works from the controller's own list of Services
// and may reach one whose load balancer was just deleted. Upstream then
// asks GetLoadBalancer and drops the error when there is none; a Service
// that never got one is ensured by its own sync.
func (c *Cloud) UpdateLoadBalancer(ctx context.Context, _ string, svc *v1.Service, _ []*v1.Node) error {
	if err := c.lb.waitReady(ctx); err != nil {
		return err
	}
	n := c.lb
	n.mu.Lock()
	_, ok := n.services[serviceKey(svc)]
	n.mu.Unlock()
	if !ok {
		return fmt.Errorf("Service %s has no load balancer to update", serviceKey(svc))
	}
	n.announce()
	return nil
}

// EnsureLoadBalancerDeleted withdraws the Service's paths and frees its
// addresses.
func (c *Cloud) EnsureLoadBalancerDeleted(ctx context.Context, _ string, svc *v1.Service) error {
	if err := c.lb.waitReady(ctx); err != nil {
		return err
	}
	n := c.lb
	key := serviceKey(svc)
	n.mu.Lock()
	vips := n.alloc.Addresses(key)
	n.alloc.Release(key)
	delete(n.services, key)
	n.countPools()
	n.mu.Unlock()
	if len(vips) > 0 {
		klog.InfoS("Load balancer deleted", "service", klog.KObj(svc), "addresses", vips)
	}
	n.announce()
	return nil
}

func allocationRequest(svc *v1.Service) (ipam.Request, error) {
	req := ipam.Request{Service: serviceKey(svc), Namespace: svc.Namespace, Labels: svc.Labels,
		TrafficLocal: svc.Spec.ExternalTrafficPolicy == v1.ServiceExternalTrafficPolicyLocal,
		Selector:     labels.SelectorFromSet(svc.Spec.Selector).String()}
	for _, f := range svc.Spec.IPFamilies {
		if f == v1.IPv6Protocol {
			req.Families = append(req.Families, ipam.IPv6)
		} else {
			req.Families = append(req.Families, ipam.IPv4)
		}
	}
	if len(req.Families) == 0 {
		req.Families = []ipam.Family{ipam.IPv4}
	}
	var err error
	if req.Requested, err = requestedIPs(svc); err != nil {
		return req, fmt.Errorf("Service %s: %w", req.Service, err)
	}
	for _, a := range []struct {
		ours  string
		parse func(name, value string) (string, error)
		into  *string
	}{{annotations.AddressPool, annotations.ParsePoolName, &req.Pool}, {annotations.SharingKey, annotations.ParseSharingKey, &req.SharingKey}} {
		name, v, ok, err := annotations.Lookup(svc.Annotations, a.ours)
		if err == nil && ok {
			*a.into, err = a.parse(name, v)
		}
		if err != nil {
			return req, fmt.Errorf("Service %s: %w", req.Service, err)
		}
	}
	for _, p := range svc.Spec.Ports {
		req.Ports = append(req.Ports, ipam.Port{Protocol: string(p.Protocol), Port: p.Port})
	}
	return req, nil
}

func lbStatus(vips []netip.Addr) *v1.LoadBalancerStatus {
	st := &v1.LoadBalancerStatus{}
	vip := v1.LoadBalancerIPModeVIP
	for _, a := range vips {
		st.Ingress = append(st.Ingress, v1.LoadBalancerIngress{IP: a.String(), IPMode: &vip})
	}
	return st
}

// statusAddresses reads the addresses a Service was given before, from its
// status.
func statusAddresses(svc *v1.Service) []netip.Addr {
	var out []netip.Addr
	for _, in := range svc.Status.LoadBalancer.Ingress {
		if ip, err := netip.ParseAddr(in.IP); err == nil {
			out = append(out, ip.Unmap())
		}
	}
	return out
}

// managed reports whether this provider serves the Service.
func managed(svc *v1.Service) bool {
	return svc.Spec.Type == v1.ServiceTypeLoadBalancer && svc.Spec.LoadBalancerClass == nil
}
