package main

import (
	"context"
	"flag"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/test/framework"
)

var otherServices = flag.Int("pod-churn-services", 100, "ClusterIP Services whose endpoints churn in the pod-churn scenario")

// podChurn measures what pods of other Services cost the converged CCM:
// ClusterIP Services whose endpoints turn ready and unready, 20 changes a
// second for the idle time. None of them can change a next hop.
func (b *bench) podChurn(ccm *framework.Process) error {
	ctx := context.Background()
	const ns = "bench-pods"
	if err := b.namespace(ns); err != nil {
		return err
	}
	client := b.cluster.Admin
	ready := func(r bool) discoveryv1.EndpointConditions { return discoveryv1.EndpointConditions{Ready: &r} }
	slices := make([]*discoveryv1.EndpointSlice, *otherServices)
	err := framework.Parallel(*otherServices, 16, func(i int) error {
		name := fmt.Sprintf("app-%d", i)
		svc := &v1.Service{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: v1.ServiceSpec{Selector: map[string]string{"app": name}, Ports: []v1.ServicePort{{Protocol: v1.ProtocolTCP, Port: 80}}}}
		if _, err := client.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
			return err
		}
		sl := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: name + "-1", Labels: map[string]string{discoveryv1.LabelServiceName: name}},
			AddressType: discoveryv1.AddressTypeIPv4}
		for j := range 3 {
			node := fmt.Sprintf("node-%d", j)
			sl.Endpoints = append(sl.Endpoints, discoveryv1.Endpoint{Addresses: []string{fmt.Sprintf("10.244.%d.%d", j, i%250+1)}, NodeName: &node, Conditions: ready(true)})
		}
		created, err := client.DiscoveryV1().EndpointSlices(ns).Create(ctx, sl, metav1.CreateOptions{})
		slices[i] = created
		return err
	})
	if err != nil {
		return fmt.Errorf("pod churn: %w", err)
	}
	defer framework.Parallel(*otherServices, 16, func(i int) error {
		name := fmt.Sprintf("app-%d", i)
		client.DiscoveryV1().EndpointSlices(ns).Delete(ctx, name+"-1", metav1.DeleteOptions{})
		return client.CoreV1().Services(ns).Delete(ctx, name, metav1.DeleteOptions{})
	})
	time.Sleep(5 * time.Second) // the creations are behind us
	cpu0, err := cpuSeconds(ccm.PID())
	if err != nil {
		return err
	}
	changes := 0
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for start := time.Now(); time.Since(start) < *idle; changes++ {
		<-tick.C
		sl := slices[changes%len(slices)]
		ep := &sl.Endpoints[changes%3]
		ep.Conditions = ready(!*ep.Conditions.Ready)
		updated, err := client.DiscoveryV1().EndpointSlices(ns).Update(ctx, sl, metav1.UpdateOptions{})
		if err != nil {
			return fmt.Errorf("pod churn: %w", err)
		}
		slices[changes%len(slices)] = updated
	}
	cpu1, err := cpuSeconds(ccm.PID())
	if err != nil {
		return err
	}
	b.record("pod churn", fmt.Sprintf("CPU used in %s while %d endpoint changes hit %d other Services", *idle, changes, *otherServices), "s", cpu1-cpu0)
	return nil
}
