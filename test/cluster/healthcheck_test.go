package cluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/test/framework"
)

// stream connects to addr from the client's namespace every 50 ms until
// stop is closed and counts the connections that were answered and those
// that failed.
type stream struct {
	mu         sync.Mutex
	ok, failed int
	errors     []string // the first few failures, with their time
	done       chan struct{}
}

func startStream(addr string, stop <-chan struct{}) *stream {
	s := &stream{done: make(chan struct{})}
	go func() {
		defer close(s.done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			_, _, err := askWithin(addr, time.Second)
			s.mu.Lock()
			if err != nil {
				s.failed++
				if len(s.errors) < 5 {
					s.errors = append(s.errors, time.Now().Format("15:04:05.000")+" "+err.Error())
				}
			} else {
				s.ok++
			}
			s.mu.Unlock()
		}
	}()
	return s
}

func (s *stream) counts() (ok, failed int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ok, s.failed
}

// failover is one measured fault: how long the router kept the node as a
// next hop of the VIP, and what a client streaming to it saw meanwhile.
type failover struct {
	withdrawn  time.Duration
	ok, failed int
}

// measureFailover applies fault to victim while a client streams to the
// VIP and waits until the router's route no longer has the node (at most
// within); the client goes on until 2 s after that.
func measureFailover(t *testing.T, vip string, victim *Node, fault func(), within time.Duration) failover {
	t.Helper()
	stop := make(chan struct{})
	s := startStream(vip+":80", stop)
	time.Sleep(time.Second)
	if ok, failed := s.counts(); ok == 0 || failed > 0 {
		close(stop)
		t.Fatalf("before the fault the client got %d answers and %d failures", ok, failed)
	}
	s.mu.Lock()
	s.ok, s.failed = 0, 0
	s.mu.Unlock()
	start := time.Now()
	fault()
	var withdrawn time.Duration
	for withdrawn == 0 && time.Since(start) < within {
		if !slices.Contains(routerNextHops(vip), victim.IP) {
			withdrawn = time.Since(start)
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if withdrawn == 0 {
		close(stop)
		<-s.done
		t.Fatalf("%s is still a next hop of %s %v after the fault: %v", victim.Name, vip, within, routerNextHops(vip))
	}
	time.Sleep(2 * time.Second)
	close(stop)
	<-s.done
	ok, failed := s.counts()
	return failover{withdrawn: withdrawn, ok: ok, failed: failed}
}

// processesOf are the node's processes: those in its mount
// namespace (the kubelet, containerd, the shims) and those in its cgroups
// (the pods).
func (n *Node) processesOf() []int {
	pids := sharing(n.holder.PID(), "mnt")
	for _, d := range cgroupDirs(n.cgroupRoot()) {
		filepath.WalkDir(d, func(path string, e os.DirEntry, err error) error {
			if err == nil && !e.IsDir() && e.Name() == "cgroup.procs" {
				raw, _ := os.ReadFile(path)
				for _, f := range strings.Fields(string(raw)) {
					if pid, err := strconv.Atoi(f); err == nil && !slices.Contains(pids, pid) {
						pids = append(pids, pid)
					}
				}
			}
			return nil
		})
	}
	return pids
}

// kubeProxy is the node's kube-proxy process.
func (n *Node) kubeProxy(t *testing.T) int {
	t.Helper()
	for _, pid := range n.processesOf() {
		if isKubeProxy(pid, n) {
			return pid
		}
	}
	t.Fatalf("no kube-proxy runs on %s", n.Name)
	return 0
}

// isKubeProxy reports whether pid is a kube-proxy in the node's network.
func isKubeProxy(pid int, n *Node) bool {
	comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	ns, _ := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", pid))
	return strings.TrimSpace(string(comm)) == "kube-proxy" && ns == n.netnsID()
}

func (n *Node) netnsID() string {
	id, _ := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", n.holder.PID()))
	return id
}

// freezeTable drops every packet in the node's namespace: with its
// processes stopped, the node answers nothing, as a hung machine.
const freezeTable = "bmc-freeze"

// Freeze stops every process of the node and drops every packet it would
// receive or send; the returned function thaws it.
func (n *Node) Freeze(t *testing.T) (thaw func()) {
	t.Helper()
	rules := fmt.Sprintf(`table inet %s {
	chain dropin { type filter hook input priority -500; policy drop; }
	chain dropforward { type filter hook forward priority -500; policy drop; }
	chain dropout { type filter hook output priority -500; policy drop; }
}`, freezeTable)
	path := filepath.Join(n.Dir, "freeze.nft")
	if err := os.WriteFile(path, []byte(rules), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := n.NS.Exec("nft", "-f", path); err != nil {
		t.Fatalf("dropping the packets of %s: %v: %s", n.Name, err, out)
	}
	pids := n.processesOf()
	for _, pid := range pids {
		if pid != n.holder.PID() {
			syscall.Kill(pid, syscall.SIGSTOP)
		}
	}
	return func() {
		for _, pid := range pids {
			syscall.Kill(pid, syscall.SIGCONT)
		}
		if out, err := n.NS.Exec("nft", "delete", "table", "inet", freezeTable); err != nil {
			t.Errorf("thawing %s: %v: %s", n.Name, err, out)
		}
	}
}

// setHealthChecks switches the CCM's node health checks on or off.
func setHealthChecks(t *testing.T, on bool) {
	t.Helper()
	text := lab.CloudConfig()
	if !on {
		text = strings.Replace(text, "loadBalancer:\n", "loadBalancer:\n  healthCheck: {enabled: false}\n", 1)
	}
	setCloudConfig(t, text)
}

// setCloudConfig edits the CCM's ConfigMap, and waits until the running
// replica has reloaded it (the kubelet updates a mounted ConfigMap within
// its sync period).
func setCloudConfig(t *testing.T, text string) {
	t.Helper()
	ctx := context.Background()
	pods, err := lab.Admin.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{LabelSelector: ccmSelector, FieldSelector: "status.phase=Running"})
	if err != nil || len(pods.Items) == 0 {
		t.Fatalf("no running CCM replica: %v", err)
	}
	pod := pods.Items[0].Name
	reloads := func() int { return strings.Count(ccmLogs(t, pod), "Reloaded cloud config") }
	before := reloads()
	cms := lab.Admin.CoreV1().ConfigMaps("kube-system")
	cm, err := cms.Get(ctx, "baremetal-cloud-config", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Data["cloud.yaml"] = text
	if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 3*time.Minute, pod+" reloaded its cloud config", func() (bool, string) {
		return reloads() > before, ""
	})
}

// ccmSelector selects the CCM's Pods of deploy/deployment.yaml.
const ccmSelector = "app.kubernetes.io/name=baremetal-cloud-controller-manager"

// healthCheckedNextHops measures how long a failed node stays a next hop
// of an externalTrafficPolicy Local VIP (one pod on every worker, so that
// every failed connection is one the router sent to the failed node): with
// kube-proxy stopped, with the node frozen, and frozen with the health
// checks off, as the CCM was before it had them.
func healthCheckedNextHops(t *testing.T, ns string) {
	vip := serviceFor(t, ns, "echo-local", "echo", true)
	defer lab.Admin.CoreV1().Services(ns).Delete(context.Background(), "echo-local", metav1.DeleteOptions{})
	victim := lab.Nodes[len(lab.Nodes)-1]
	allWorkers := func(within time.Duration) {
		t.Helper()
		framework.Eventually(t, within, "the VIP via every worker", func() (bool, string) {
			hops := routerNextHops(vip)
			return slices.Equal(hops, nodeIPs(workerNames()...)), fmt.Sprintf("%s via %v", vip, hops)
		})
	}
	allWorkers(time.Minute)
	answers(t, vip, 1)
	report := func(fault string, f failover) {
		t.Logf("| %s | %v | %d of %d |", fault, f.withdrawn.Round(10*time.Millisecond), f.failed, f.ok+f.failed)
	}

	pid := victim.kubeProxy(t)
	f := measureFailover(t, vip, victim, func() { syscall.Kill(pid, syscall.SIGSTOP) }, 30*time.Second)
	syscall.Kill(pid, syscall.SIGCONT)
	report("kube-proxy stopped on "+victim.Name, f)
	if f.withdrawn > 3*time.Second {
		t.Errorf("%s stayed a next hop %v after its kube-proxy stopped, want under 3 s", victim.Name, f.withdrawn)
	}
	allWorkers(30 * time.Second)

	var thaw func()
	f = measureFailover(t, vip, victim, func() { thaw = victim.Freeze(t) }, 30*time.Second)
	thaw()
	report(victim.Name+" frozen", f)
	if f.withdrawn > 3*time.Second {
		t.Errorf("%s stayed a next hop %v after it froze, want under 3 s", victim.Name, f.withdrawn)
	}
	allWorkers(30 * time.Second)

	// Without health checks a node leaves only when its Node turns
	// NotReady: kube-controller-manager's --node-monitor-grace-period.
	setHealthChecks(t, false)
	defer setHealthChecks(t, true)
	allWorkers(time.Minute)
	thaw = nil
	defer func() {
		if thaw != nil {
			thaw()
		}
	}()
	f = measureFailover(t, vip, victim, func() { thaw = victim.Freeze(t) }, 3*time.Minute)
	thaw()
	thaw = nil
	report(victim.Name+" frozen, health checks off", f)
	nodesInitialised(t, victim.Name)
	allWorkers(time.Minute)
}
