package cluster

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/test/framework"
)

// The CCM as the README's kubeadm section installs it: deploy/rbac.yaml,
// the finalizer policy, the cloud config as a ConfigMap, and
// deploy/deployment.yaml with only the image name changed, on a cluster
// made by kubeadm with deploy/kubeadm/init.yaml and join.yaml. What a user
// checks afterwards, checked.
func TestCCMAsADeployment(t *testing.T) {
	ctx := context.Background()
	for _, n := range nodeNames() {
		registeredUninitialised(t, n)
	}
	for _, subnet := range []string{PodSubnet, PodSubnet6} {
		if hops := routerNextHops(subnet); len(hops) != 0 {
			t.Errorf("the router has pod routes in %s before the CCM runs: %v", subnet, hops)
		}
	}
	installed := time.Now()
	if err := lab.InstallDeployment(ccmImageName); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := lab.RemoveDeployment(); err != nil {
			t.Error(err)
		}
	})

	nodesInitialised(t, nodeNames()...)
	t.Logf("every Node initialised %s after the install", time.Since(installed).Round(time.Second))
	// One control-plane node: the second replica, which must not share a
	// node with the first, waits for another.
	framework.Eventually(t, time.Minute, "a CCM replica running", func() (bool, string) {
		d, err := lab.Admin.AppsV1().Deployments("kube-system").Get(ctx, "baremetal-cloud-controller-manager", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return d.Status.ReadyReplicas >= 1, fmt.Sprintf("%d ready", d.Status.ReadyReplicas)
	})
	noRestarts(t, "deploy/deployment.yaml on initialised Nodes")

	// Pod routes: every node's pod CIDRs at the router, via the node's
	// address of the CIDR's family.
	framework.Eventually(t, time.Minute, "each pod CIDR of both families routed via its node", func() (bool, string) {
		for _, n := range lab.Nodes {
			node, err := lab.Admin.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			if len(node.Spec.PodCIDRs) != 2 {
				return false, fmt.Sprintf("%s: pod CIDRs %v, want one of each family", n.Name, node.Spec.PodCIDRs)
			}
			for _, cidr := range node.Spec.PodCIDRs {
				via := n.IP
				if strings.Contains(cidr, ":") {
					via = n.IP6
				}
				if hops := routerNextHops(cidr); !slices.Equal(hops, []string{via}) {
					return false, fmt.Sprintf("%s (%s) via %v, want %s", cidr, n.Name, hops, via)
				}
			}
		}
		return true, ""
	})

	t.Run("the kubernetes Service and cluster DNS from every node, before and after kube-proxy crashes", func(t *testing.T) {
		clusterServicesAfterKubeProxyRestarts(t)
	})

	const ns = "default"
	echoDeployment(t, ns, "echo", int32(len(workerNames())))
	podNodes, podIPs := echoPods(t, ns, "echo")

	t.Run("pod to pod across nodes over the announced routes, in both families", func(t *testing.T) {
		var server, serverNode string
		for p, n := range podNodes {
			server, serverNode = p, n
			break
		}
		other := ""
		for _, n := range workerNames() {
			if n != serverNode {
				other = n
			}
		}
		if len(podIPs[server]) != 2 {
			t.Fatalf("pod %s has the addresses %v, want one of each family", server, podIPs[server])
		}
		for i, ip := range podIPs[server] {
			name := fmt.Sprintf("dial-%d", i)
			client := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
				Spec: v1.PodSpec{NodeName: other, RestartPolicy: v1.RestartPolicyNever,
					Containers: []v1.Container{{Name: "dial", Image: echoImage, Args: []string{"-dial", net.JoinHostPort(ip, "8080")}}}}}
			if _, err := lab.Admin.CoreV1().Pods(ns).Create(ctx, client, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			defer lab.Admin.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{})
			framework.Eventually(t, time.Minute, "the client pod finished", func() (bool, string) {
				p, err := lab.Admin.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					return false, err.Error()
				}
				if p.Status.Phase == v1.PodFailed {
					t.Fatalf("the pod on %s could not reach %s on %s", other, ip, serverNode)
				}
				return p.Status.Phase == v1.PodSucceeded, string(p.Status.Phase)
			})
			raw, err := lab.Admin.CoreV1().Pods(ns).GetLogs(name, &v1.PodLogOptions{}).DoRaw(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(string(raw), server+" ") {
				t.Errorf("the pod on %s got %q from %s, want an answer from %s", other, raw, ip, server)
			}
		}
	})

	t.Run("a VIP served by kube-proxy on every node to pods on others", func(t *testing.T) {
		vip := serviceFor(t, ns, "echo-cluster", "echo", false)
		// kubeadm labels its control-plane node to be left out of load
		// balancers; the workers carry the VIP.
		framework.Eventually(t, time.Minute, "the VIP at the router via every worker", func() (bool, string) {
			hops := routerNextHops(vip)
			return slices.Equal(hops, nodeIPs(workerNames()...)), fmt.Sprintf("%s via %v", vip, hops)
		})
		pods, _ := answers(t, vip, 40)
		if len(pods) < 2 {
			t.Errorf("40 connections to %s were answered by %v; want every pod of %v", vip, pods, podNodes)
		}
	})

	t.Run("the status page through kubectl port-forward, as troubleshooting shows", func(t *testing.T) { statusPage(t, ns) })

	t.Run("a dual-stack Service: a VIP of each family, each via the workers' addresses of its family, served by kube-proxy", func(t *testing.T) {
		dualStackService(t, ns)
	})

	t.Run("externalTrafficPolicy Local: only nodes with a pod, the client's address kept", func(t *testing.T) {
		// One pod, on one worker.
		scale(t, ns, "echo", 1)
		framework.PatchService(t, lab.Admin, ns, "echo-cluster", `{"spec":{"externalTrafficPolicy":"Local"}}`)
		podNodes, _ := echoPods(t, ns, "echo")
		var where []string
		for _, n := range podNodes {
			where = append(where, n)
		}
		vip := framework.Ingress(t, lab.Admin, ns, "echo-cluster")[0]
		framework.Eventually(t, time.Minute, "the VIP via the pod's node only", func() (bool, string) {
			hops := routerNextHops(vip)
			return slices.Equal(hops, nodeIPs(where...)), fmt.Sprintf("%s via %v, pods on %v", vip, hops, where)
		})
		// kube-proxy follows the policy change on its own time.
		framework.Eventually(t, 30*time.Second, "the pod seeing the client's address", func() (bool, string) {
			_, src, err := ask(vip + ":80")
			return err == nil && src == ClientIP, fmt.Sprintf("source %q, error %v", src, err)
		})
		_, sources := answers(t, vip, 10)
		if len(sources) != 1 || sources[ClientIP] != 10 {
			t.Errorf("the pod saw sources %v, want the client's %s every time", sources, ClientIP)
		}
		scale(t, ns, "echo", int32(len(workerNames())))
	})

	t.Run("a failed node leaves the VIP's next hops within 3 s", func(t *testing.T) { healthCheckedNextHops(t, ns) })

	t.Run("a node whose kubelet stops stops being a next hop", func(t *testing.T) {
		framework.PatchService(t, lab.Admin, ns, "echo-cluster", `{"spec":{"externalTrafficPolicy":"Cluster"}}`)
		vip := framework.Ingress(t, lab.Admin, ns, "echo-cluster")[0]
		framework.Eventually(t, time.Minute, "the VIP via every worker", func() (bool, string) {
			hops := routerNextHops(vip)
			return slices.Equal(hops, nodeIPs(workerNames()...)), fmt.Sprintf("%s via %v", vip, hops)
		})
		victim := lab.Nodes[len(lab.Nodes)-1]
		stopped := time.Now()
		victim.StopKubelet()
		defer func() {
			if err := victim.startKubelet(nil); err != nil {
				t.Error(err)
			}
			nodesInitialised(t, victim.Name)
		}()
		var rest []string
		for _, n := range workerNames() {
			if n != victim.Name {
				rest = append(rest, n)
			}
		}
		// The Node goes NotReady after kube-controller-manager's grace
		// period (50 s by default), then the CCM withdraws it.
		framework.Eventually(t, 2*time.Minute, "the VIP without "+victim.Name, func() (bool, string) {
			hops := routerNextHops(vip)
			return slices.Equal(hops, nodeIPs(rest...)), fmt.Sprintf("%s via %v", vip, hops)
		})
		t.Logf("%s left the VIP's next hops %s after its kubelet stopped", victim.Name, time.Since(stopped).Round(time.Second))
	})

	t.Run("upstream's LoadBalancer and dual-stack e2e specs", upstreamE2E)

	// Last: it patches the Deployment as the README says for layer 2 pools.
	t.Run("layer 2 VIPs answered with the MAC of a worker that serves them", func(t *testing.T) { layer2VIPs(t, ns) })

	noForbidden(t, ccmLogs(t, "baremetal-cloud-controller-manager-"))
}

func scale(t *testing.T, ns, name string, replicas int32) {
	t.Helper()
	if out, err := lab.Kubectl("-n", ns, "scale", "deployment", name, fmt.Sprintf("--replicas=%d", replicas)); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	framework.Eventually(t, 2*time.Minute, fmt.Sprintf("%s at %d ready pods", name, replicas), func() (bool, string) {
		pods, err := lab.Admin.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "app=" + name})
		if err != nil {
			return false, err.Error()
		}
		n := 0
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil {
				n++
			}
		}
		return n == int(replicas), fmt.Sprintf("%d pods", n)
	})
}
