package provider

import (
	"context"
	"net/netip"
	"strings"
	"testing"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/annotations"
)

// MetalLB's Service annotations, in both its forms, mean what ours mean; a
// Service with two of one kind that disagree is refused, naming both.
func TestMetalLBAnnotationsAreAliases(t *testing.T) {
	for _, tc := range []struct {
		name        string
		annotations map[string]string
		pool, key   string
		requested   string
		err         string
	}{
		{name: "ours", annotations: map[string]string{annotations.AddressPool: "p", annotations.SharingKey: "k", annotations.LoadBalancerIPs: "10.1.0.3"},
			pool: "p", key: "k", requested: "10.1.0.3"},
		{name: "metallb.io", annotations: map[string]string{"metallb.io/address-pool": "p", "metallb.io/allow-shared-ip": "k", "metallb.io/loadBalancerIPs": "10.1.0.3,2001:db8::3"},
			pool: "p", key: "k", requested: "10.1.0.3 2001:db8::3"},
		{name: "metallb.universe.tf", annotations: map[string]string{"metallb.universe.tf/address-pool": "p", "metallb.universe.tf/allow-shared-ip": "k", "metallb.universe.tf/loadBalancerIPs": "10.1.0.3"},
			pool: "p", key: "k", requested: "10.1.0.3"},
		{name: "ours and an alias that agree", annotations: map[string]string{annotations.AddressPool: "p", "metallb.universe.tf/address-pool": "p"}, pool: "p", requested: "10.1.0.9"},
		{name: "the annotation over spec.loadBalancerIP", annotations: map[string]string{"metallb.io/loadBalancerIPs": "10.1.0.3"}, requested: "10.1.0.3"},
		{name: "pools that disagree", annotations: map[string]string{annotations.AddressPool: "p", "metallb.io/address-pool": "q"},
			err: `Service ns/s: annotations baremetal.cloudprovider.io/address-pool ("p") and metallb.io/address-pool ("q") disagree`},
		{name: "keys that disagree", annotations: map[string]string{"metallb.io/allow-shared-ip": "k", "metallb.universe.tf/allow-shared-ip": "j"},
			err: `annotations metallb.io/allow-shared-ip ("k") and metallb.universe.tf/allow-shared-ip ("j") disagree`},
		{name: "addresses that disagree", annotations: map[string]string{annotations.LoadBalancerIPs: "10.1.0.3", "metallb.universe.tf/loadBalancerIPs": "10.1.0.4"},
			err: `annotations baremetal.cloudprovider.io/load-balancer-ips ("10.1.0.3") and metallb.universe.tf/loadBalancerIPs ("10.1.0.4") disagree`},
		{name: "a bad alias is named", annotations: map[string]string{"metallb.io/loadBalancerIPs": "ten"},
			err: `annotation metallb.io/loadBalancerIPs: "ten" is not an IP address`},
		{name: "a bad pool alias is named", annotations: map[string]string{"metallb.universe.tf/address-pool": "Not_A_Name"},
			err: `annotation metallb.universe.tf/address-pool: "Not_A_Name" is not a pool name`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			svc := svcNamed("ns", "s")
			svc.Annotations = tc.annotations
			svc.Spec.LoadBalancerIP = "10.1.0.9"
			req, err := allocationRequest(svc)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var requested []string
			for _, a := range req.Requested {
				requested = append(requested, a.String())
			}
			if req.Pool != tc.pool || req.SharingKey != tc.key || strings.Join(requested, " ") != tc.requested {
				t.Errorf("pool %q key %q requested %v, want %q %q %q", req.Pool, req.SharingKey, requested, tc.pool, tc.key, tc.requested)
			}
		})
	}
}

// A Service whose annotations come to disagree keeps its address: the edit
// is refused, with both annotations named, and nothing moves.
func TestDisagreeingAnnotationsMoveNothing(t *testing.T) {
	c, _ := lbCloud(t, `  - {name: other, addresses: ["10.2.0.0/28"], autoAssign: false}`)
	svc := svcNamed("ns", "web")
	svc.Annotations = map[string]string{"metallb.io/address-pool": "other"}
	got := ensure(t, c, svc)
	if len(got) != 1 || !netip.MustParsePrefix("10.2.0.0/28").Contains(netip.MustParseAddr(got[0])) {
		t.Fatalf("the Service of metallb.io/address-pool other got %v, want an address of pool other", got)
	}
	svc.Annotations[annotations.AddressPool] = "private"
	_, err := c.EnsureLoadBalancer(context.Background(), "", svc, nil)
	if err == nil || !strings.Contains(err.Error(), "baremetal.cloudprovider.io/address-pool") || !strings.Contains(err.Error(), "metallb.io/address-pool") {
		t.Fatalf("disagreeing annotations: %v, want an error naming both", err)
	}
	c.lb.mu.Lock()
	holds := c.lb.alloc.Addresses("ns/web")
	c.lb.mu.Unlock()
	if len(holds) != 1 || holds[0].String() != got[0] {
		t.Errorf("after the refused edit the Service holds %v, want %v", holds, got)
	}
	if p := pathTo(c, netip.MustParseAddr(got[0]).String()); !strings.Contains(p, "via [10.0.0.1]") {
		t.Errorf("its VIP after the refused edit: %s, want still announced", p)
	}
}
