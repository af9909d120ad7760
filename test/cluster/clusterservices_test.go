package cluster

import (
	"context"
	"fmt"
	"net"
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/test/framework"
)

// clusterServicesAfterKubeProxyRestarts restarts kube-proxy on every node
// (its Pods deleted; the DaemonSet makes new ones, as an upgrade or a
// crash does), then asks from each node for the kubernetes Service and
// the cluster's DNS. A new kube-proxy reads back the rules of the old one:
// the lab's must keep the Services' elements it finds, or Pods started
// afterwards (CoreDNS, a new CCM replica) cannot reach the API.
func clusterServicesAfterKubeProxyRestarts(t *testing.T) {
	ctx := context.Background()
	pods := lab.Admin.CoreV1().Pods("kube-system")
	const selector = "k8s-app=kube-proxy"
	old, err := pods.List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		t.Fatal(err)
	}
	var oldUIDs []types.UID
	for _, p := range old.Items {
		oldUIDs = append(oldUIDs, p.UID)
		if err := pods.Delete(ctx, p.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	framework.Eventually(t, 2*time.Minute, "a new kube-proxy Ready on every node", func() (bool, string) {
		list, err := pods.List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return false, err.Error()
		}
		ready := 0
		for _, p := range list.Items {
			if !slices.Contains(oldUIDs, p.UID) && podReady(&p) {
				ready++
			}
		}
		return ready == len(lab.Nodes), fmt.Sprintf("%d of %d", ready, len(lab.Nodes))
	})

	dns, err := lab.Admin.CoreV1().Services("kube-system").Get(ctx, "kube-dns", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	kubernetes, err := lab.Admin.CoreV1().Services("default").Get(ctx, "kubernetes", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range lab.Nodes {
		api := net.JoinHostPort(kubernetes.Spec.ClusterIP, "443")
		framework.Eventually(t, 30*time.Second, "the kubernetes Service ("+api+") from "+n.Name, func() (bool, string) {
			c, err := n.NS.Dial("tcp", api, 2*time.Second)
			if err != nil {
				return false, err.Error()
			}
			c.Close()
			return true, ""
		})
		framework.Eventually(t, time.Minute, "kubernetes.default from the cluster's DNS ("+dns.Spec.ClusterIP+") on "+n.Name, func() (bool, string) {
			r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
				return n.NS.Dial(network, net.JoinHostPort(dns.Spec.ClusterIP, "53"), 2*time.Second)
			}}
			ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			addrs, err := r.LookupHost(ctx, "kubernetes.default.svc.cluster.local")
			if err != nil {
				return false, err.Error()
			}
			return slices.Equal(addrs, []string{kubernetes.Spec.ClusterIP}), fmt.Sprintf("answered %v", addrs)
		})
	}
}

func podReady(p *v1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == v1.PodReady {
			return c.Status == v1.ConditionTrue && p.DeletionTimestamp == nil
		}
	}
	return false
}
