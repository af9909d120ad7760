package cluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/test/framework"
)

// The release as the README installs it, on the new cluster (this file's
// test runs first: Go runs a package's tests in file-name order, and the
// lab's Nodes are still as their kubelets registered them):
//
//   - helm install of the previous commit's chart and image (make previous)
//     with k8sServiceHost set, as the README says for a new cluster: the
//     CCM's Pods start without a single restart and the Nodes are
//     initialised within seconds;
//   - helm upgrade to the chart of dist/ (make release), whose image is the
//     release's OCI index imported into containerd: the replicas roll one
//     at a time, the router's kernel never deletes a VIP or pod-CIDR route,
//     and a client connecting every 50 ms sees no failure;
//   - helm rollback to the first revision, the previous chart and its
//     values: the same, back on the previous image;
//   - the README's removal: the LoadBalancer Services first, then helm
//     uninstall, then the Lease; nothing of the release is left.
//
// The chart runs as shipped, two replicas on two control-plane nodes: the
// second is w1, labelled as kubeadm labels a control-plane node and peered
// with the router. It runs no second API server, which the CCM does not
// need; what the test needs is two replicas on two hosts at two addresses.
// maintenanceRouter is a router of the site that is down: an address on
// the lab's bridge that no one has.
const maintenanceRouter = "10.252.0.250"

func TestReleasedChartInstallsUpgradesAndUninstalls(t *testing.T) {
	ctx := context.Background()
	for _, n := range nodeNames() {
		registeredUninitialised(t, n)
	}
	cp, second := lab.Nodes[0], lab.Nodes[1]
	const cpLabel = "node-role.kubernetes.io/control-plane"
	if out, err := lab.Kubectl("label", "node", second.Name, cpLabel+"="); err != nil {
		t.Fatal(out)
	}
	t.Cleanup(func() { lab.Kubectl("label", "node", second.Name, cpLabel+"-") })
	peer := func(add bool) {
		t.Helper()
		no := ""
		if !add {
			no = "no "
		}
		if out, err := lab.FRR.Vtysh("configure terminal", fmt.Sprintf("router bgp %d", RouterASN),
			fmt.Sprintf("%sneighbor %s remote-as %d", no, second.IP, CCMASN)); err != nil {
			t.Fatal(out)
		}
		if add {
			if out, err := lab.FRR.Vtysh("configure terminal", fmt.Sprintf("router bgp %d", RouterASN), fmt.Sprintf("neighbor %s timers 3 9", second.IP),
				"address-family ipv6 unicast", fmt.Sprintf("neighbor %s activate", second.IP)); err != nil {
				t.Fatal(out)
			}
		}
	}
	peer(true)
	t.Cleanup(func() { peer(false) })
	// BFD with both replicas' hosts, as the routers page recommends: a
	// replica's clean stop (each step of the upgrade) must tell the router
	// AdminDown, not let BFD time out and drop its paths.
	bfd := func(add bool) {
		t.Helper()
		no := map[bool]string{true: "", false: "no "}[add]
		for _, n := range []*Node{cp, second} {
			if out, err := lab.FRR.Vtysh("configure terminal", fmt.Sprintf("router bgp %d", RouterASN), fmt.Sprintf("%sneighbor %s bfd", no, n.IP)); err != nil {
				t.Fatal(out)
			}
		}
	}
	bfd(true)
	t.Cleanup(func() { bfd(false) })

	_, cidrs, err := DualStack()
	if err != nil {
		t.Fatal(err)
	}
	// The lab's config with BFD on its router, and a second router that is
	// in maintenance (configured, never up; its address is on the lab's
	// bridge and nobody answers for it): one router down must leave the
	// replicas ready, or helm upgrade --wait would stall.
	cloudConfig := strings.Replace(lab.CloudConfig(), "    gracefulRestart: {restartTime: 15s}\n",
		"    gracefulRestart: {restartTime: 15s}\n    bfd: {}\n  - {address: "+maintenanceRouter+", asn: 64500, holdTime: 9s, connectRetryTime: 1s}\n", 1)
	if cloudConfig == lab.CloudConfig() {
		t.Fatal("the lab's cloud config has no peer to give BFD to")
	}
	values := filepath.Join(t.TempDir(), "values.yaml")
	text := fmt.Sprintf("k8sServiceHost: %s\nk8sServicePort: 6443\nclusterCIDR: %s\ncloudConfig:\n  inline: |\n    %s\n", cp.IP, cidrs,
		strings.ReplaceAll(strings.TrimSpace(cloudConfig), "\n", "\n    "))
	if err := os.WriteFile(values, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	helm := func(args ...string) {
		t.Helper()
		if out, err := framework.Helm(t, lab.Kubeconfig, args...); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
	}
	previousChart := filepath.Join(framework.RepoRoot(), "bin", "previous", "src", "deploy", "chart", "baremetal-cloud-controller-manager")
	previousName, err := ImageName(previousImage)
	if err != nil {
		t.Fatal(err)
	}
	cut := strings.LastIndex(previousName, ":")
	installed := time.Now()
	helm("install", "ccm", previousChart, "--namespace", "kube-system", "--values", values,
		"--set", "image.repository="+previousName[:cut]+",image.tag="+previousName[cut+1:])
	uninstalled := false
	t.Cleanup(func() {
		if !uninstalled {
			framework.Helm(t, lab.Kubeconfig, "uninstall", "ccm", "--namespace", "kube-system", "--wait")
			lab.WaitCCMPodsGone()
		}
	})

	nodesInitialised(t, nodeNames()...)
	took := time.Since(installed)
	t.Logf("every Node initialised %s after helm install", took.Round(100*time.Millisecond))
	if took > 30*time.Second {
		t.Errorf("the Nodes were initialised %s after the install; with k8sServiceHost it takes seconds", took.Round(time.Second))
	}
	readyReplicas(t, 2, previousName)
	noRestarts(t, "after the first install")
	bfdUp := func(what string) {
		t.Helper()
		framework.Eventually(t, time.Minute, what, func() (bool, string) {
			up, out := lab.FRR.BFDUp(cp.IP, second.IP)
			return up == 2, out
		})
	}
	bfdUp("the router's BFD sessions with both replicas up")

	// Traffic and the router's kernel table, through the upgrade.
	const ns = "default"
	echoDeployment(t, ns, "echo-upgrade", int32(len(workerNames())))
	vip := serviceFor(t, ns, "echo-upgrade", "echo-upgrade", false)
	framework.Eventually(t, time.Minute, "the VIP at the router via every worker", func() (bool, string) {
		hops := routerNextHops(vip)
		return len(hops) == len(workerNames()), fmt.Sprintf("%s via %v", vip, hops)
	})
	answers(t, vip, 10)
	watched := []string{vip + "/32"}
	for _, n := range lab.Nodes {
		node, err := lab.Admin.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if hops := routerNextHops(node.Spec.PodCIDR); len(hops) != 1 {
			t.Fatalf("pod CIDR %s of %s at the router via %v before the upgrade", node.Spec.PodCIDR, n.Name, hops)
		}
		watched = append(watched, node.Spec.PodCIDR)
	}
	monitor := framework.MonitorRoutes(t, lab.Router)
	// The router's neighbour entries too: a client's "no route to host"
	// with every route in place would be a next hop that stopped answering
	// ARP.
	neighbours, err := framework.StartProcess("ip", t.TempDir(), "neigh-monitor", 0, nil, "netns", "exec", lab.Router.Name, "ip", "-ts", "monitor", "neigh")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(neighbours.Stop)
	// through runs a rollout (step) while a client connects to the VIP
	// every 50 ms, and checks what a site sees: no failed connection, a
	// ready replica at every moment, the Service's address kept, both
	// replicas on image at the end.
	through := func(what, image string, step func()) {
		t.Helper()
		stop := make(chan struct{})
		stream := startStream(vip+":80", stop)
		rollout := watchRollout(t)
		ingress := watchIngress(t, ns, "echo-upgrade")
		started := time.Now()
		t.Logf("%s started at %s", what, started.Format("15:04:05.000"))
		step()
		readyReplicas(t, 2, image)
		t.Logf("%s to %s rolled both replicas in %s, a router in maintenance and BFD on", what, image, time.Since(started).Round(100*time.Millisecond))
		bfdUp("the router's BFD sessions with both replicas up after " + what)
		time.Sleep(2 * time.Second)
		close(stop)
		<-stream.done
		minReady, seen := rollout()
		if statuses := ingress(); len(statuses) != 1 || statuses[0] != vip {
			t.Errorf("the Service's status.loadBalancer through %s went through %q; it must stay [%s]", what, statuses, vip)
		}
		ok, failed := stream.counts()
		t.Logf("through %s: %d connections answered, %d failed; at least %d replica ready at every moment; pods seen: %v", what, ok, failed, minReady, seen)
		if failed > 0 || ok == 0 {
			t.Errorf("a client connecting every 50 ms saw %d failures of %d through %s: %v\nthe router's kernel meanwhile:\n%s\nits neighbour entries:\n%s", failed, ok+failed, what, stream.errors, monitor.Logs(), neighbours.Logs())
		}
		if minReady < 1 {
			t.Errorf("%s left no ready replica at some moment (pods seen: %v)", what, seen)
		}
		if deleted := framework.RouteDeletions(monitor.Logs(), "", watched); len(deleted) > 0 {
			t.Errorf("the router's kernel deleted routes up to the end of %s:\n%s", what, strings.Join(deleted, "\n"))
		}
	}

	released := framework.ShippedImage()
	through("helm upgrade", released, func() {
		helm("upgrade", "ccm", filepath.Join(framework.RepoRoot(), "dist", "baremetal-cloud-controller-manager-"+strings.TrimPrefix(released[strings.LastIndex(released, ":")+1:], "v")+".tgz"),
			"--namespace", "kube-system", "--values", values, "--wait", "--timeout", "5m")
	})
	noRestarts(t, "after the upgrade")
	// Going back, as docs/operations/upgrade.md says: helm rollback to the
	// first revision, the previous chart with its values (its config).
	through("helm rollback", previousName, func() {
		helm("rollback", "ccm", "1", "--namespace", "kube-system", "--wait", "--timeout", "5m")
	})
	for _, n := range lab.Nodes[:2] {
		noForbidden(t, ccmLogsOn(n, "ccm-"))
	}

	// Removal, as the README says: the LoadBalancer Services first, while
	// the CCM runs to free their addresses and withdraw their VIPs.
	if err := lab.Admin.CoreV1().Services(ns).Delete(ctx, "echo-upgrade", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, time.Minute, "the Service gone (its finalizer removed by the CCM) and its VIP withdrawn", func() (bool, string) {
		_, err := lab.Admin.CoreV1().Services(ns).Get(ctx, "echo-upgrade", metav1.GetOptions{})
		hops := routerNextHops(vip)
		return err != nil && len(hops) == 0, fmt.Sprintf("Service: %v; %s via %v", err, vip, hops)
	})
	lab.Admin.AppsV1().Deployments(ns).Delete(ctx, "echo-upgrade", metav1.DeleteOptions{})
	helm("uninstall", "ccm", "--namespace", "kube-system", "--wait")
	uninstalled = true
	if err := lab.WaitCCMPodsGone(); err != nil {
		t.Fatal(err)
	}
	kinds := "deployments,replicasets,pods,services,configmaps,secrets,serviceaccounts,roles,rolebindings,clusterroles,clusterrolebindings,poddisruptionbudgets,mutatingadmissionpolicies,mutatingadmissionpolicybindings"
	if out, err := lab.Kubectl("get", kinds, "--all-namespaces", "-l", "app.kubernetes.io/instance=ccm", "-o", "name"); err != nil || strings.TrimSpace(out) != "" {
		t.Errorf("left after helm uninstall (%v):\n%s", err, out)
	}
	// What the README says stays: the Lease, which its last holder keeps
	// until it expires; the README's last step deletes it.
	if out, err := lab.Kubectl("-n", "kube-system", "delete", "lease", "cloud-controller-manager"); err != nil {
		t.Errorf("the Lease the README says is left: %v\n%s", err, out)
	}
	// The router drops the pod routes once its graceful-restart time for
	// the CCM's sessions has passed.
	framework.Eventually(t, time.Minute, "no pod route of either family left at the router", func() (bool, string) {
		out4, err4 := lab.Router.IP("-4", "route", "show", "root", PodSubnet)
		out6, err6 := lab.Router.IP("-6", "route", "show", "root", PodSubnet6)
		return err4 == nil && err6 == nil && strings.TrimSpace(out4+out6) == "", fmt.Sprintf("%v %v: %s%s", err4, err6, out4, out6)
	})
}

// readyReplicas waits for the CCM's Deployment to have n ready replicas,
// every Pod running image.
func readyReplicas(t *testing.T, n int, image string) {
	t.Helper()
	framework.Eventually(t, 3*time.Minute, fmt.Sprintf("%d CCM replicas ready on %s", n, image), func() (bool, string) {
		pods, err := lab.Admin.CoreV1().Pods("kube-system").List(context.Background(), metav1.ListOptions{LabelSelector: ccmSelector})
		if err != nil {
			return false, err.Error()
		}
		ready := 0
		var seen []string
		for _, p := range pods.Items {
			seen = append(seen, fmt.Sprintf("%s on %s (%s, ready %v)", p.Name, p.Spec.NodeName, p.Spec.Containers[0].Image, podReady(&p)))
			if podReady(&p) && p.Spec.Containers[0].Image == image && p.DeletionTimestamp == nil {
				ready++
			}
		}
		return ready == n && len(pods.Items) == n, strings.Join(seen, "; ")
	})
}

// noRestarts checks that no container of the CCM's Pods has restarted.
func noRestarts(t *testing.T, when string) {
	t.Helper()
	pods, err := lab.Admin.CoreV1().Pods("kube-system").List(context.Background(), metav1.ListOptions{LabelSelector: ccmSelector})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		for _, c := range p.Status.ContainerStatuses {
			if c.RestartCount != 0 {
				t.Errorf("%s: the CCM's Pod %s on %s restarted %d times (last: %+v)", when, p.Name, p.Spec.NodeName, c.RestartCount, c.LastTerminationState.Terminated)
			}
		}
	}
}

// watchRollout polls the CCM's Pods every 100 ms until the returned
// function is called, which says the fewest ready replicas seen at once
// and every Pod seen.
func watchRollout(t *testing.T) func() (minReady int, seen []string) {
	t.Helper()
	stop, done := make(chan struct{}), make(chan struct{})
	var mu sync.Mutex
	minReady := 1 << 30
	names := map[string]bool{}
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			pods, err := lab.Admin.CoreV1().Pods("kube-system").List(context.Background(), metav1.ListOptions{LabelSelector: ccmSelector})
			if err != nil {
				continue
			}
			ready := 0
			mu.Lock()
			for _, p := range pods.Items {
				names[p.Name+" on "+p.Spec.NodeName] = true
				if podReady(&p) && p.DeletionTimestamp == nil {
					ready++
				}
			}
			minReady = min(minReady, ready)
			mu.Unlock()
		}
	}()
	return func() (int, []string) {
		close(stop)
		<-done
		mu.Lock()
		defer mu.Unlock()
		var seen []string
		for n := range names {
			seen = append(seen, n)
		}
		return minReady, seen
	}
}

// watchIngress polls the Service's status until the returned function is
// called, which gives every distinct value of its ingress IPs seen, in
// order.
func watchIngress(t *testing.T, ns, name string) func() []string {
	t.Helper()
	stop, done := make(chan struct{}), make(chan struct{})
	var seen []string
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			svc, err := lab.Admin.CoreV1().Services(ns).Get(context.Background(), name, metav1.GetOptions{})
			if err != nil {
				continue
			}
			var ips []string
			for _, in := range svc.Status.LoadBalancer.Ingress {
				ips = append(ips, in.IP)
			}
			if now := strings.Join(ips, ","); len(seen) == 0 || seen[len(seen)-1] != now {
				seen = append(seen, now)
			}
		}
	}()
	return func() []string {
		close(stop)
		<-done
		return seen
	}
}

// ccmLogsOn is what the CCM's containers on node n printed, from the
// node's pod log files.
func ccmLogsOn(n *Node, podPrefix string) string {
	files, _ := filepath.Glob(n.Path("/var/log/pods/kube-system_" + podPrefix + "*/cloud-controller-manager/*.log"))
	var b strings.Builder
	for _, f := range files {
		raw, _ := os.ReadFile(f)
		b.Write(raw)
	}
	return b.String()
}
