package cluster

import (
	"context"
	"fmt"
	"net"
	"slices"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/test/framework"
)

// clusterServicesAfterKubeProxyRestarts asks from each node for the
// kubernetes Service and the cluster's DNS, kills kube-proxy on every node
// (as a crash does; the kubelet restarts its container) and asks again. A
// restarted kube-proxy reads back the rules of the one before and must
// keep the Services' elements it finds, or Pods started afterwards
// (CoreDNS, a new CCM replica) cannot reach the API. Asked before too: a
// kube-proxy that loses the elements at one restart puts them back at the
// next, and the lab's may have restarted once already (its first start
// gives up waiting for its Node's addresses when the CCM is slow).
func clusterServicesAfterKubeProxyRestarts(t *testing.T) {
	ctx := context.Background()
	dns, err := lab.Admin.CoreV1().Services("kube-system").Get(ctx, "kube-dns", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	kubernetes, err := lab.Admin.CoreV1().Services("default").Get(ctx, "kubernetes", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	clusterServicesFromEveryNode(t, kubernetes.Spec.ClusterIP, dns.Spec.ClusterIP)
	for _, n := range lab.Nodes {
		pid := n.kubeProxy(t)
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		framework.Eventually(t, time.Minute, "kube-proxy running again on "+n.Name, func() (bool, string) {
			for _, p := range n.processesOf() {
				if p != pid && isKubeProxy(p, n) {
					return true, ""
				}
			}
			return false, "not yet"
		})
	}
	framework.Eventually(t, 2*time.Minute, "kube-proxy Ready on every node", func() (bool, string) {
		list, err := lab.Admin.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{LabelSelector: "k8s-app=kube-proxy"})
		if err != nil {
			return false, err.Error()
		}
		ready := 0
		for _, p := range list.Items {
			if podReady(&p) {
				ready++
			}
		}
		return ready == len(lab.Nodes), fmt.Sprintf("%d of %d", ready, len(lab.Nodes))
	})
	clusterServicesFromEveryNode(t, kubernetes.Spec.ClusterIP, dns.Spec.ClusterIP)
}

// clusterServicesFromEveryNode connects to the kubernetes Service and
// resolves its name with the cluster's DNS, from each node.
func clusterServicesFromEveryNode(t *testing.T, apiIP, dnsIP string) {
	t.Helper()
	ctx := context.Background()
	for _, n := range lab.Nodes {
		api := net.JoinHostPort(apiIP, "443")
		framework.Eventually(t, 30*time.Second, "the kubernetes Service ("+api+") from "+n.Name, func() (bool, string) {
			c, err := n.NS.Dial("tcp", api, 2*time.Second)
			if err != nil {
				return false, err.Error()
			}
			c.Close()
			return true, ""
		})
		framework.Eventually(t, time.Minute, "kubernetes.default from the cluster's DNS ("+dnsIP+") on "+n.Name, func() (bool, string) {
			r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
				return n.NS.Dial(network, net.JoinHostPort(dnsIP, "53"), 2*time.Second)
			}}
			ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			addrs, err := r.LookupHost(ctx, "kubernetes.default.svc.cluster.local")
			if err != nil {
				return false, err.Error()
			}
			return slices.Equal(addrs, []string{apiIP}), fmt.Sprintf("answered %v", addrs)
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
