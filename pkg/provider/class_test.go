package provider

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
)

// TestClassesView: what the service controller and this provider see of a
// Service, for each choice of classes. A Service this CCM serves appears
// class-less, as the upstream controller serves; any other LoadBalancer
// Service with a class. Nothing else changes: its finalizers stay.
func TestClassesView(t *testing.T) {
	const ours, metallb = "example.com/baremetal", "metallb.io/metallb"
	type view struct{ served bool }
	for _, tc := range []struct {
		name    string
		classes Classes
		svcType v1.ServiceType
		class   *string
		want    view
	}{
		{"class mode: ours", Classes{Class: ours}, v1.ServiceTypeLoadBalancer, ptr(ours), view{true}},
		{"class mode: class-less still served", Classes{Class: ours}, v1.ServiceTypeLoadBalancer, nil, view{true}},
		{"class mode: another class", Classes{Class: ours}, v1.ServiceTypeLoadBalancer, ptr(metallb), view{false}},
		{"beside MetalLB: ours", Classes{Class: ours, IgnoreClassLess: true}, v1.ServiceTypeLoadBalancer, ptr(ours), view{true}},
		{"beside MetalLB: class-less is MetalLB's", Classes{Class: ours, IgnoreClassLess: true}, v1.ServiceTypeLoadBalancer, nil, view{false}},
		{"beside MetalLB: another class", Classes{Class: ours, IgnoreClassLess: true}, v1.ServiceTypeLoadBalancer, ptr(metallb), view{false}},
		{"not a load balancer: left as it is", Classes{Class: ours, IgnoreClassLess: true}, v1.ServiceTypeClusterIP, nil, view{false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			svc := &v1.Service{Spec: v1.ServiceSpec{Type: tc.svcType, LoadBalancerClass: tc.class}}
			svc.Finalizers = []string{"example.com/keep", "service.kubernetes.io/load-balancer-cleanup"}
			out, err := tc.classes.transform(svc)
			if err != nil {
				t.Fatal(err)
			}
			got := out.(*v1.Service)
			if managed(got) != tc.want.served {
				t.Errorf("served %v, want %v (class seen: %v)", managed(got), tc.want.served, got.Spec.LoadBalancerClass)
			}
			// client-go may transform an object twice (an informer's
			// first list): the view must not change again.
			again, err := tc.classes.transform(got)
			if err != nil {
				t.Fatal(err)
			}
			if managed(again.(*v1.Service)) != tc.want.served {
				t.Errorf("transformed twice: served %v, want %v (class seen: %v)", managed(again.(*v1.Service)), tc.want.served, again.(*v1.Service).Spec.LoadBalancerClass)
			}
			if len(got.Finalizers) != 2 {
				t.Errorf("finalizers seen %v, want both", got.Finalizers)
			}
		})
	}
}

func TestClassesValidate(t *testing.T) {
	for _, tc := range []struct {
		classes Classes
		wantErr string
	}{
		{Classes{}, ""},
		{Classes{Class: "example.com/baremetal"}, ""},
		{Classes{Class: "example.com/baremetal", IgnoreClassLess: true}, ""},
		{Classes{Class: "baremetal"}, "--load-balancer-class"},
		{Classes{Class: "example.com/bare metal"}, "--load-balancer-class"},
		{Classes{IgnoreClassLess: true}, "--ignore-class-less-services"},
	} {
		err := tc.classes.Validate()
		if (err == nil) != (tc.wantErr == "") || err != nil && !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("%+v: error %v, want one naming %q", tc.classes, err, tc.wantErr)
		}
	}
}
