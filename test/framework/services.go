package framework

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// WaitTimeout bounds what the tests wait for the CCM to do.
const WaitTimeout = 60 * time.Second

// CreateNamespace creates a namespace unless it exists.
func CreateNamespace(t testing.TB, c kubernetes.Interface, name string) {
	t.Helper()
	_, err := c.CoreV1().Namespaces().Create(context.Background(), &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// LBService is a LoadBalancer Service with one TCP port.
func LBService(ns, name string) *v1.Service {
	return &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1.ServiceSpec{
			Type:     v1.ServiceTypeLoadBalancer,
			Selector: map[string]string{"app": name},
			Ports:    []v1.ServicePort{{Name: "http", Protocol: v1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(8080)}},
		},
	}
}

// CreateLBService creates LBService(ns, name), changed by mutate, deletes
// it when the test ends, and returns it as created.
func CreateLBService(t testing.TB, c kubernetes.Interface, ns, name string, mutate func(*v1.Service)) *v1.Service {
	t.Helper()
	svc := LBService(ns, name)
	if mutate != nil {
		mutate(svc)
	}
	created, err := c.CoreV1().Services(ns).Create(context.Background(), svc, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating Service %s/%s: %v", ns, name, err)
	}
	// Runs before the CCM is stopped (cleanups run last-in first-out), so
	// that the CCM removes its finalizer.
	t.Cleanup(func() { ForgetService(c, ns, name) })
	return created
}

// ForgetService deletes a Service even when no CCM runs any more to
// remove its finalizer.
func ForgetService(c kubernetes.Interface, ns, name string) {
	ctx := context.Background()
	services := c.CoreV1().Services(ns)
	if err := services.Delete(ctx, name, metav1.DeleteOptions{}); apierrors.IsNotFound(err) {
		return
	}
	time.Sleep(200 * time.Millisecond)
	if svc, err := services.Get(ctx, name, metav1.GetOptions{}); err == nil && len(svc.Finalizers) > 0 {
		svc.Finalizers = nil
		services.Update(ctx, svc, metav1.UpdateOptions{})
	}
}

// PatchService applies a JSON merge patch to a Service.
func PatchService(t testing.TB, c kubernetes.Interface, ns, name, patch string) {
	t.Helper()
	if _, err := c.CoreV1().Services(ns).Patch(context.Background(), name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatalf("patching Service %s/%s with %s: %v", ns, name, patch, err)
	}
}

// DeleteService deletes a Service and waits until the CCM has let it go.
func DeleteService(t testing.TB, c kubernetes.Interface, ns, name string) {
	t.Helper()
	ctx := context.Background()
	err := c.CoreV1().Services(ns).Delete(ctx, name, metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		return
	}
	if err != nil {
		t.Errorf("deleting Service %s/%s: %v", ns, name, err)
	}
	Eventually(t, WaitTimeout, "Service "+ns+"/"+name+" deleted", func() (bool, string) {
		_, err := c.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
}

// Ingress is the addresses in a Service's status.
func Ingress(t testing.TB, c kubernetes.Interface, ns, name string) []string {
	t.Helper()
	svc, err := c.CoreV1().Services(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return IngressIPs(svc)
}

// IngressIPs is the addresses in svc's status.
func IngressIPs(svc *v1.Service) []string {
	var ips []string
	for _, in := range svc.Status.LoadBalancer.Ingress {
		ips = append(ips, in.IP)
	}
	return ips
}

// WaitIngress waits until a Service has count addresses and returns them.
func WaitIngress(t testing.TB, c kubernetes.Interface, ns, name string, count int) []string {
	t.Helper()
	var ips []string
	Eventually(t, WaitTimeout, "Service "+ns+"/"+name+" has an external IP", func() (bool, string) {
		ips = Ingress(t, c, ns, name)
		return len(ips) == count, fmt.Sprintf("ingress %v", ips)
	})
	return ips
}

// WriteEndpointSlice makes the Service's one EndpointSlice hold a ready
// endpoint on each of nodes, as the EndpointSlice controller would.
func WriteEndpointSlice(t testing.TB, c kubernetes.Interface, ns, svc string, nodes ...string) {
	t.Helper()
	ctx := context.Background()
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: svc + "-1", Labels: map[string]string{discoveryv1.LabelServiceName: svc}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080), Protocol: ptr.To(v1.ProtocolTCP)}},
	}
	for i, n := range nodes {
		slice.Endpoints = append(slice.Endpoints, discoveryv1.Endpoint{
			Addresses: []string{fmt.Sprintf("10.244.%d.10", i+1)}, NodeName: ptr.To(n),
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)},
		})
	}
	client := c.DiscoveryV1().EndpointSlices(ns)
	old, err := client.Get(ctx, slice.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = client.Create(ctx, slice, metav1.CreateOptions{})
	} else if err == nil {
		slice.ResourceVersion = old.ResourceVersion
		_, err = client.Update(ctx, slice, metav1.UpdateOptions{})
	}
	if err != nil {
		t.Fatalf("writing the EndpointSlice of %s/%s: %v", ns, svc, err)
	}
}

// Events returns the Events about an object with the given reason.
func Events(t testing.TB, c kubernetes.Interface, namespace, name, reason string) []v1.Event {
	t.Helper()
	sel := fields.Set{"involvedObject.name": name, "reason": reason}.AsSelector().String()
	list, err := c.CoreV1().Events(namespace).List(context.Background(), metav1.ListOptions{FieldSelector: sel})
	if err != nil {
		t.Fatal(err)
	}
	return list.Items
}

// WaitRoute waits until the peer has exactly these next hops for prefix
// (none: the prefix is withdrawn).
func WaitRoute(t testing.TB, peer *GoBGPD, prefix string, nextHops ...string) {
	t.Helper()
	family := "ipv4"
	if strings.Contains(prefix, ":") {
		family = "ipv6"
	}
	slices.Sort(nextHops)
	Eventually(t, WaitTimeout, fmt.Sprintf("gobgpd has %s via %v", prefix, nextHops), func() (bool, string) {
		rib, err := peer.RIB(family)
		if err != nil {
			return false, err.Error()
		}
		got := rib[prefix]
		slices.Sort(got)
		return slices.Equal(got, nextHops), fmt.Sprintf("%s via %v", prefix, got)
	})
}
