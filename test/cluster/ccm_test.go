package cluster

import (
	"context"
	"fmt"
	"net"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/test/framework"
)

const echoImage = "baremetal.test/echo:v1"

// echoDeployment runs the test server on the workers, spread over them.
func echoDeployment(t *testing.T, ns, name string, replicas int32) {
	t.Helper()
	labels := map[string]string{"app": name}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: v1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: v1.PodSpec{
					Containers: []v1.Container{{Name: "echo", Image: echoImage,
						Ports:          []v1.ContainerPort{{ContainerPort: 8080}},
						ReadinessProbe: &v1.Probe{ProbeHandler: v1.ProbeHandler{TCPSocket: &v1.TCPSocketAction{Port: intstr.FromInt32(8080)}}, PeriodSeconds: 1}}},
					TopologySpreadConstraints: []v1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: "kubernetes.io/hostname",
						WhenUnsatisfiable: v1.DoNotSchedule, LabelSelector: &metav1.LabelSelector{MatchLabels: labels}}},
				},
			},
		},
	}
	if _, err := lab.Admin.AppsV1().Deployments(ns).Create(context.Background(), d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 2*time.Minute, name+" ready", func() (bool, string) {
		d, err := lab.Admin.AppsV1().Deployments(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return d.Status.ReadyReplicas == replicas, fmt.Sprintf("%d of %d ready", d.Status.ReadyReplicas, replicas)
	})
}

// echoPods is where each pod of the app runs: pod name → node name, and
// pod name → pod IPs, one per family.
func echoPods(t *testing.T, ns, app string) (nodes map[string]string, ips map[string][]string) {
	t.Helper()
	pods, err := lab.Admin.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "app=" + app})
	if err != nil {
		t.Fatal(err)
	}
	nodes, ips = map[string]string{}, map[string][]string{}
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			nodes[p.Name] = p.Spec.NodeName
			for _, ip := range p.Status.PodIPs {
				ips[p.Name] = append(ips[p.Name], ip.IP)
			}
		}
	}
	return nodes, ips
}

// ask connects from the client's namespace, behind the router, and reads
// the server's line: the pod that answered and the address it saw.
func ask(addr string) (pod, source string, err error) { return askWithin(addr, 3*time.Second) }

// askWithin is ask with a timeout for the connection and the answer.
func askWithin(addr string, timeout time.Duration) (pod, source string, err error) {
	return askFrom(lab.Client, addr, timeout)
}

// askFrom asks from the namespace ns.
func askFrom(ns *framework.Netns, addr string, timeout time.Duration) (pod, source string, err error) {
	c, err := ns.Dial("tcp", addr, timeout)
	if err != nil {
		return "", "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(timeout))
	buf := make([]byte, 256)
	n, err := c.Read(buf)
	if err != nil {
		return "", "", err
	}
	f := strings.Fields(string(buf[:n]))
	if len(f) != 2 {
		return "", "", fmt.Errorf("answer %q", buf[:n])
	}
	host, _, err := net.SplitHostPort(f[1])
	if err != nil {
		return "", "", fmt.Errorf("answer %q: %w", buf[:n], err)
	}
	return f[0], host, nil
}

// routerNextHops is what FRR installed in the router's kernel for prefix,
// of either family.
func routerNextHops(prefix string) []string {
	family := "-4"
	if strings.Contains(prefix, ":") {
		family = "-6"
	}
	out, err := lab.Router.IP(family, "route", "show", prefix)
	if err != nil {
		return nil
	}
	var hops []string
	f := strings.Fields(out)
	for i := 0; i+1 < len(f); i++ {
		if f[i] == "via" {
			hops = append(hops, f[i+1])
		}
	}
	sort.Strings(hops)
	return hops
}

// nodeIPs are the named nodes' IPv4 addresses, sorted.
func nodeIPs(names ...string) []string { return nodeAddrs(false, names...) }

// nodeIPs6 are their IPv6 addresses, sorted.
func nodeIPs6(names ...string) []string { return nodeAddrs(true, names...) }

func nodeAddrs(v6 bool, names ...string) []string {
	var out []string
	for _, n := range lab.Nodes {
		if slices.Contains(names, n.Name) {
			out = append(out, map[bool]string{false: n.IP, true: n.IP6}[v6])
		}
	}
	sort.Strings(out)
	return out
}

func nodeNames() []string {
	var out []string
	for _, n := range lab.Nodes {
		out = append(out, n.Name)
	}
	return out
}

func workerNames() []string { return nodeNames()[1:] }

// ccmLogs is what the CCM's container printed, read from the pod log
// files on the control-plane node (the API server is not asked to dial
// the kubelet for it).
func ccmLogs(t *testing.T, podPrefix string) string {
	t.Helper()
	return ccmLogsOn(lab.Nodes[0], podPrefix)
}

// noForbidden checks that the CCM was never refused by the API server:
// the shipped RBAC covers what it does.
func noForbidden(t *testing.T, logs string) {
	t.Helper()
	if logs == "" {
		t.Error("the CCM's pod log is empty")
	}
	for _, line := range strings.Split(logs, "\n") {
		if strings.Contains(line, "forbidden") {
			t.Errorf("the CCM was refused: %s", line)
		}
	}
}

// serviceFor exposes the app as a LoadBalancer on port 80.
func serviceFor(t *testing.T, ns, name, app string, local bool) string {
	t.Helper()
	svc := framework.LBService(ns, name)
	svc.Spec.Selector = map[string]string{"app": app}
	svc.Spec.Ports = []v1.ServicePort{{Name: "echo", Protocol: v1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(8080)}}
	if local {
		svc.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
	}
	if _, err := lab.Admin.CoreV1().Services(ns).Create(context.Background(), svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return framework.WaitIngress(t, lab.Admin, ns, name, 1)[0]
}

// answers asks the VIP n times and counts who answered and what source
// address they saw.
func answers(t *testing.T, vip string, n int) (pods, sources map[string]int) {
	t.Helper()
	pods, sources = map[string]int{}, map[string]int{}
	addr := net.JoinHostPort(vip, "80") // either family
	// Each node's kube-proxy takes up a new VIP on its own time; until it
	// has, a connection hashed to that node loops back to the router.
	framework.Eventually(t, time.Minute, "the VIP answers 10 connections in a row", func() (bool, string) {
		for i := range 10 {
			if _, _, err := ask(addr); err != nil {
				return false, fmt.Sprintf("connection %d: %v", i+1, err)
			}
		}
		return true, ""
	})
	for range n {
		pod, src, err := ask(addr)
		if err != nil {
			t.Errorf("connecting to %s: %v", addr, err)
			continue
		}
		pods[pod]++
		sources[src]++
	}
	return pods, sources
}
