package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	cloudapi "k8s.io/cloud-provider/api"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/test/framework"
)

// lbService is a LoadBalancer Service without node ports: the CCM uses
// none (routers send to the nodes' kube-proxy by VIP), and 5,000 Services
// would exhaust the API server's node-port range.
func lbService(name string) *v1.Service {
	noNodePorts := false
	return &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer, Ports: []v1.ServicePort{{Protocol: v1.ProtocolTCP, Port: 80}},
			AllocateLoadBalancerNodePorts: &noNodePorts},
	}
}

// createServices creates the burst's Services in ns.
func (b *bench) createServices(ns string) error {
	fast := b.fastClient()
	return framework.Parallel(*services, 32, func(i int) error {
		_, err := fast.CoreV1().Services(ns).Create(context.Background(), lbService(fmt.Sprintf("svc-%d", i)), metav1.CreateOptions{})
		return err
	})
}

// addressed reports whether every Service of the burst in ns has an
// address.
func (b *bench) addressed(ns string) bool {
	list, err := b.fastClient().CoreV1().Services(ns).List(context.Background(), metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		return false
	}
	done := 0
	for _, s := range list.Items {
		if len(s.Status.LoadBalancer.Ingress) > 0 {
			done++
		}
	}
	return done == *services
}

func (b *bench) namespace(name string) error {
	_, err := b.cluster.Admin.CoreV1().Namespaces().Create(context.Background(), &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

// ccmRateLimitedClient has the CCM's client-side limits (its defaults are
// --kube-api-qps=20 --kube-api-burst=30).
func (b *bench) ccmRateLimitedClient() kubernetes.Interface {
	cfg := rest.CopyConfig(b.cluster.AdminConfig)
	cfg.QPS, cfg.Burst = 20, 30
	if *qps > 0 {
		cfg.QPS = float32(*qps)
	}
	if *burst > 0 {
		cfg.Burst = *burst
	}
	return kubernetes.NewForConfigOrDie(cfg)
}

func workers() int {
	if *syncs > 0 {
		return *syncs
	}
	return 1 // the CCM's default --concurrent-service-syncs
}

// floor times what any CCM must do for the burst: one status write per
// Service, at the CCM's client limits and concurrency.
func (b *bench) floor(run int) (time.Duration, error) {
	ctx := context.Background()
	ns := fmt.Sprintf("floor-%d", run)
	if err := b.namespace(ns); err != nil {
		return 0, err
	}
	fast := b.fastClient()
	if err := framework.Parallel(*services, 32, func(i int) error {
		_, err := fast.CoreV1().Services(ns).Create(ctx, lbService(fmt.Sprintf("svc-%d", i)), metav1.CreateOptions{})
		return err
	}); err != nil {
		return 0, err
	}
	limited := b.ccmRateLimitedClient()
	start := time.Now()
	if err := framework.Parallel(*services, workers(), func(i int) error {
		svc, err := fast.CoreV1().Services(ns).Get(ctx, fmt.Sprintf("svc-%d", i), metav1.GetOptions{})
		if err != nil {
			return err
		}
		svc.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: fmt.Sprintf("198.19.%d.%d", 16+i/250, i%250+1)}}
		_, err = limited.CoreV1().Services(ns).UpdateStatus(ctx, svc, metav1.UpdateOptions{})
		return err
	}); err != nil {
		return 0, err
	}
	took := time.Since(start)
	b.record("floor", fmt.Sprintf("%d Service status writes", *services), "s", took.Seconds())
	// No CCM runs to remove the cleanup finalizer the admission policy gave
	// them, so the bench does, once they are being deleted (before, the
	// policy would give it back). (The namespace stays: no namespace
	// controller runs here to empty it.)
	if err := framework.Parallel(*services, 32, func(i int) error {
		name := fmt.Sprintf("svc-%d", i)
		if err := fast.CoreV1().Services(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			return err
		}
		_, err := fast.CoreV1().Services(ns).Patch(ctx, name, types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
		if apierrors.IsNotFound(err) {
			return nil // it had none
		}
		return err
	}); err != nil {
		return 0, err
	}
	return took, waitFor(5*time.Minute, func() bool {
		list, err := fast.CoreV1().Services(ns).List(ctx, metav1.ListOptions{})
		return err == nil && len(list.Items) == 0
	})
}

func (b *bench) serviceScenarios(run int, floor time.Duration, cleanUp bool) error {
	ctx := context.Background()
	ns := fmt.Sprintf("bench-%d", run)
	if err := b.namespace(ns); err != nil {
		return err
	}
	if err := b.registerNodes("bn", *nodes, true); err != nil {
		return err
	}
	// The nodes (and the one that joins) answer health checks, probed at
	// the shipped defaults, as on a site.
	port, err := framework.FreePort()
	if err != nil {
		return err
	}
	hn, err := serveHealthNodes(b.dir, "bmbench-nodes", "198.18.255.254", *nodes+1, port, nodeIP)
	if err != nil {
		return err
	}
	defer hn.stop()
	cfg, err := b.config("")
	if err != nil {
		return err
	}
	if err := probeOn(cfg, port); err != nil {
		return err
	}
	ccm, err := b.startCCM(fmt.Sprintf("ccm-burst-%d", run), cfg)
	if err != nil {
		return err
	}
	defer ccm.Stop()
	fast := b.fastClient()

	// 1. Service burst.
	var profiled chan error
	if *cpuProfile != "" {
		profiled = make(chan error, 1)
		go func() { profiled <- b.saveProfile(ccm, "profile?seconds=20", *cpuProfile) }()
	}
	cpu0, err := cpuSeconds(ccm.PID())
	if err != nil {
		return err
	}
	machine0, err := machineCPUSeconds()
	if err != nil {
		return err
	}
	start := time.Now()
	if err := b.createServices(ns); err != nil {
		return err
	}
	if err := waitFor(*burstWait, func() bool { return b.addressed(ns) }); err != nil {
		return fmt.Errorf("burst: Services without an address: %w", err)
	}
	status := time.Since(start)
	b.record("burst", fmt.Sprintf("%d Services have an address", *services), "s", status.Seconds())
	b.record("burst", "ratio to the floor", "x", status.Seconds()/floor.Seconds())
	all := readyNodes(*nodes)
	took, err := b.waitPaths(start, *services, all)
	if err != nil {
		return fmt.Errorf("burst: the peer lacks VIPs: %w", err)
	}
	b.record("burst", fmt.Sprintf("peer has every VIP via its %d nodes (of %d)", all.n, *nodes), "s", took.Seconds())
	if _, err := b.routerHas(start, all, "burst", fmt.Sprintf("router (FRR) routes every VIP via its %d nodes", all.n)); err != nil {
		return err
	}
	if err := b.routerSize(); err != nil {
		return err
	}
	cpu1, err := cpuSeconds(ccm.PID())
	if err != nil {
		return err
	}
	machine1, err := machineCPUSeconds()
	if err != nil {
		return err
	}
	b.record("burst", "CPU the CCM used until then", "s", cpu1-cpu0)
	// Probes that failed while the machine was saturated: each verdict
	// they turn costs a convergence and an Event.
	if m, err := b.cluster.AdminGet(ccm, "/metrics", time.Minute); err == nil {
		failed, _ := metricValue(string(m), `baremetal_health_check_probes_total{result="failure"}`)
		b.record("burst", "health-check probes that failed meanwhile", "probes", failed)
	}
	// The rest is the control plane, its audit log, gobgpd and the bench's
	// own clients: near all the cores, the machine is the limit.
	b.record("burst", fmt.Sprintf("cores busy meanwhile, of %d", runtime.NumCPU()), "cores", (machine1-machine0)/time.Since(start).Seconds())
	if profiled != nil {
		if err := <-profiled; err != nil {
			return err
		}
	}
	if *heapProfile != "" {
		if err := b.saveProfile(ccm, "heap", *heapProfile); err != nil {
			return err
		}
	}

	// 3. Node churn.
	updates, err := b.receivedUpdates()
	if err != nil {
		return err
	}
	vips, err := b.ribVIPs()
	if err != nil {
		return err
	}
	joined := readyNodes(*nodes + 1)
	gains := changed(vips, all, joined)
	logFrom := ccm.LogSize()
	start = time.Now()
	if err := b.registerNodesFrom("bn", *nodes, 1, true); err != nil {
		return err
	}
	took, err = b.waitPaths(start, *services, joined)
	if err != nil {
		return fmt.Errorf("churn: the new node is not a next hop of the VIPs it carries: %w", err)
	}
	b.record("churn", fmt.Sprintf("new node (registered, initialised, Ready) a next hop of the %d VIPs (of %d) it carries", gains, *services), "s", took.Seconds())
	if _, err := b.recordSent(ccm, logFrom, start, fmt.Sprintf("added=%d ", gains), "the CCM had handed them to GoBGP"); err != nil {
		return err
	}
	if _, err := b.routerHas(start, joined, "churn", "… the router (FRR) routed them via it"); err != nil {
		return err
	}
	after, _ := b.receivedUpdates()
	b.record("churn", "BGP UPDATEs for the new node", "messages", float64(after-updates))
	left := readyNodes(*nodes+1, 0)
	if _, err := b.nodeLeaves(ccm, vips, joined, left, "NotReady", func() error { return setStatus(fast, "bn-0", false, nodeIP(0)) }); err != nil {
		return err
	}
	// A node goes silent (frozen): its health checks get no answer. The
	// first probe to fail is the first to reach it after its death, and
	// fails one timeout (the default 1 s) after it was sent: the figures
	// from then are the ones the docs state.
	out, err := b.nodeLeaves(ccm, vips, left, readyNodes(*nodes+1, 0, 1), "silent (no health-check answer)", func() error { return hn.freeze(nodeIP(1)) })
	if err != nil {
		return err
	}
	firstFailed, ok := hn.firstUnanswered(nodeIP(1))
	if !ok {
		return errors.New("churn: the silent node was never probed after its death")
	}
	firstFailed = firstFailed.Add(time.Second)
	b.record("churn", "silent node: from its first failed probe until the CCM had handed its withdrawals to GoBGP", "s", out.handed.Sub(firstFailed).Seconds())
	if !out.router.IsZero() {
		b.record("churn", "silent node: from its first failed probe until the router (FRR) routed its VIPs via others", "s", out.router.Sub(firstFailed).Seconds())
	}

	// 6. Steady state, then pods of other Services churning.
	var idleProfiled chan error
	if *idleProfile != "" {
		idleProfiled = make(chan error, 1)
		go func() { idleProfiled <- b.saveProfile(ccm, "profile?seconds=30", *idleProfile) }()
	}
	if err := b.steadyState(ccm); err != nil {
		return err
	}
	if idleProfiled != nil {
		if err := <-idleProfiled; err != nil {
			return err
		}
	}
	if *ccmLog != "" {
		if data, err := os.ReadFile(ccm.LogPath()); err == nil {
			os.WriteFile(*ccmLog, data, 0o644)
		}
	}
	if err := b.podChurn(ccm); err != nil {
		return err
	}

	if !cleanUp {
		return nil
	}
	// Clean up, with the CCM still running to remove its finalizers.
	if err := framework.Parallel(*services, 32, func(i int) error {
		return fast.CoreV1().Services(ns).Delete(ctx, fmt.Sprintf("svc-%d", i), metav1.DeleteOptions{})
	}); err != nil {
		return err
	}
	if err := waitFor(30*time.Minute, func() bool {
		list, err := fast.CoreV1().Services(ns).List(ctx, metav1.ListOptions{})
		return err == nil && len(list.Items) == 0
	}); err != nil {
		return fmt.Errorf("cleanup: %w", err)
	}
	// The withdrawals reach the peer before the CCM stops: paths left over
	// would stay at the peer as stale for the graceful-restart time, and
	// the routes scenario would time its table with them in it.
	if err := waitFor(5*time.Minute, func() bool {
		_, paths, err := b.peer.RIBCount("ipv4")
		return err == nil && paths == 0
	}); err != nil {
		return fmt.Errorf("cleanup: the peer still has paths: %w", err)
	}
	ccm.Stop()
	return b.deleteNodes("bn", *nodes+1)
}

// nodeLeaves times a node leaving the VIPs it carried, from what leave
// does until the peer has each VIP via the carriers after (before were the
// carriers until then); the CCM's own part is recorded too.
func (b *bench) nodeLeaves(ccm *framework.Process, vips []netip.Addr, before, after carriers, what string, leave func() error) (left leaving, err error) {
	losses := changed(vips, before, after)
	logFrom := ccm.LogSize()
	start := time.Now()
	if err := leave(); err != nil {
		return left, err
	}
	took, err := b.waitPaths(start, *services, after)
	if err != nil {
		return left, fmt.Errorf("churn: the %s node is still a next hop: %w", what, err)
	}
	b.record("churn", fmt.Sprintf("%s node gone from the %d VIPs (of %d) it carried", what, losses, *services), "s", took.Seconds())
	// Where other nodes are left to take its places, each of its paths is
	// replaced by another node's, not withdrawn.
	sent := fmt.Sprintf("withdrawn=%d ", losses)
	if after.n == before.n {
		sent = fmt.Sprintf("replaced=%d ", losses)
	}
	if left.handed, err = b.recordSent(ccm, logFrom, start, sent, "the CCM had handed the "+what+" node's withdrawals to GoBGP"); err != nil {
		return left, err
	}
	left.router, err = b.routerHas(start, after, "churn", "… the router (FRR) routed the "+what+" node's VIPs via others")
	return left, err
}

// leaving is when a leaving node's paths were handed to GoBGP, and when the
// router had routed its VIPs via others (zero without a router).
type leaving struct{ handed, router time.Time }

// recordSent records when, after start, the CCM logged the convergence
// whose log line has want: the part of a churn figure that is the CCM's
// own (informer, convergence, GoBGP taking the paths), the rest being
// GoBGP's sending and the peer taking them in.
func (b *bench) recordSent(ccm *framework.Process, logFrom int, start time.Time, want, name string) (time.Time, error) {
	for _, line := range strings.Split(ccm.Logs()[logFrom:], "\n") {
		if !strings.Contains(line, `"BGP paths converged"`) || !strings.Contains(line+" ", want) || len(line) < 21 {
			continue
		}
		// klog's header: I1202 22:30:01.123456, in local time.
		at, err := time.ParseInLocation("0102 15:04:05.000000", line[1:21], time.Local)
		if err != nil {
			return time.Time{}, fmt.Errorf("reading the time of %q: %w", line, err)
		}
		at = at.AddDate(start.Year(), 0, 0)
		b.record("churn", name, "s", at.Sub(start).Seconds())
		return at, nil
	}
	return time.Time{}, fmt.Errorf("churn: the CCM logged no convergence with %s", want)
}

func (b *bench) registerNodesFrom(prefix string, from, n int, ready bool) error {
	c := b.fastClient()
	return framework.Parallel(n, 32, func(i int) error {
		return registerNode(c, fmt.Sprintf("%s-%d", prefix, from+i), nodeIP(from+i), ready)
	})
}

// receivedUpdates is how many UPDATE messages gobgpd got from the CCM.
func (b *bench) receivedUpdates() (int64, error) {
	out, err := b.peer.CLI("neighbor", "127.0.0.1", "-j")
	if err != nil {
		return 0, err
	}
	var n struct {
		State struct {
			Messages struct {
				Received struct {
					Update int64 `json:"update"`
				} `json:"received"`
			} `json:"messages"`
		} `json:"state"`
	}
	if err := json.Unmarshal(out, &n); err != nil {
		return 0, err
	}
	return n.State.Messages.Received.Update, nil
}

// ccmWritesSince counts the CCM's API writes after from, Lease renewals
// aside, by verb, resource and user agent.
func (b *bench) ccmWritesSince(from time.Time) (int, map[string]int, error) {
	events, err := b.cluster.Writes(framework.CCMUser, from)
	if err != nil {
		return 0, nil, err
	}
	writes := 0
	byKind := map[string]int{}
	for _, ev := range events {
		// Renewing the leader Lease is the one write a leader must make.
		if ev.ObjectRef.Resource != "leases" {
			writes++
			byKind[ev.Verb+" "+ev.ObjectRef.Resource+"/"+ev.ObjectRef.Subresource+" by "+ev.UserAgent]++
		}
	}
	return writes, byKind, nil
}

// steadyState idles and measures what the converged CCM costs. It starts
// once the CCM has written nothing for 5 s (Events of the earlier work are
// sent with a delay), or after 2 minutes.
func (b *bench) steadyState(ccm *framework.Process) error {
	pid := ccm.PID()
	settle := time.Now().Add(2 * time.Minute)
	for time.Now().Before(settle) {
		n, _, err := b.ccmWritesSince(time.Now().Add(-5 * time.Second))
		if err != nil {
			return err
		}
		if n == 0 {
			break
		}
		time.Sleep(time.Second)
	}
	cpu0, err := cpuSeconds(pid)
	if err != nil {
		return err
	}
	from := time.Now()
	time.Sleep(*idle)
	cpu1, err := cpuSeconds(pid)
	if err != nil {
		return err
	}
	writes, byKind, err := b.ccmWritesSince(from)
	if err != nil {
		return err
	}
	b.record("idle", fmt.Sprintf("API writes in %s (besides the Lease)", *idle), "requests", float64(writes))
	if writes > 0 {
		fmt.Fprintf(os.Stderr, "writes while idle: %v\n", byKind)
	}
	b.record("idle", fmt.Sprintf("CPU used in %s", *idle), "s", cpu1-cpu0)
	mem, err := memory(pid)
	if err != nil {
		return err
	}
	b.record("idle", "RSS of the CCM", "MiB", mem["VmRSS"])
	b.record("idle", "… of which file-backed (the binary's pages)", "MiB", mem["RssFile"])
	b.record("idle", "peak RSS of the CCM", "MiB", mem["VmHWM"])
	metrics, err := b.cluster.AdminGet(ccm, "/metrics", time.Minute)
	if err != nil {
		return err
	}
	heap, err := metricValue(string(metrics), "go_memstats_heap_alloc_bytes")
	if err != nil {
		return err
	}
	b.record("idle", "Go heap allocated (go_memstats_heap_alloc_bytes)", "MiB", heap/(1<<20))
	return nil
}

// metricValue is the value of an unlabelled metric in a /metrics text.
func metricValue(metrics, name string) (float64, error) {
	for _, line := range strings.Split(metrics, "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			return strconv.ParseFloat(strings.TrimSpace(v), 64)
		}
	}
	return 0, fmt.Errorf("no metric %s", name)
}

func cpuSeconds(pid int) (float64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// Fields after the command name, which is in parentheses.
	f := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+2:]))
	utime, _ := strconv.ParseFloat(f[11], 64)
	stime, _ := strconv.ParseFloat(f[12], 64)
	return (utime + stime) / 100, nil // USER_HZ is 100 on Linux
}

// machineCPUSeconds is the CPU time all processes have used, from the
// first line of /proc/stat (user, nice, system, idle, iowait, irq,
// softirq, steal, in USER_HZ): all but idle, iowait and steal.
func machineCPUSeconds() (float64, error) {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, err
	}
	f := strings.Fields(strings.SplitN(string(data), "\n", 2)[0])
	if len(f) < 9 || f[0] != "cpu" {
		return 0, fmt.Errorf("/proc/stat: unexpected first line %q", f)
	}
	busy := 0.0
	for i, v := range f[1:9] {
		if i == 3 || i == 4 || i == 7 { // idle, iowait, steal
			continue
		}
		n, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/stat: %w", err)
		}
		busy += n
	}
	return busy / 100, nil
}

// memory is the process's memory figures from /proc/PID/status, in MiB:
// VmRSS, VmHWM (the peak RSS), RssFile and the rest, by name.
func memory(pid int) (map[string]float64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) == 3 && f[2] == "kB" {
			kb, _ := strconv.ParseFloat(f[1], 64)
			out[strings.TrimSuffix(f[0], ":")] = kb / 1024
		}
	}
	return out, nil
}

// joinScenarios: 4. node join and 5. routes.
func (b *bench) joinScenarios(run int) error {
	ctx := context.Background()
	fast := b.fastClient()
	// The floor: one update per Node at the CCM's client limits.
	if err := b.registerNodes("floor", *joins, true); err != nil {
		return err
	}
	limited := b.ccmRateLimitedClient()
	start := time.Now()
	if err := framework.Parallel(*joins, 1, func(i int) error {
		n, err := fast.CoreV1().Nodes().Get(ctx, fmt.Sprintf("floor-%d", i), metav1.GetOptions{})
		if err != nil {
			return err
		}
		n.Labels = map[string]string{v1.LabelTopologyZone: "z"}
		_, err = limited.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
		return err
	}); err != nil {
		return err
	}
	floor := time.Since(start)
	b.record("join", fmt.Sprintf("floor: %d Node updates", *joins), "s", floor.Seconds())
	if err := b.deleteNodes("floor", *joins); err != nil {
		return err
	}

	if err := framework.Parallel(*joins, 32, func(i int) error {
		name := fmt.Sprintf("jn-%d", i)
		if err := registerNode(fast, name, nodeIP(i), true); err != nil {
			return err
		}
		cidr := fmt.Sprintf("10.%d.%d.0/24", 128+i/256, i%256)
		patch := fmt.Sprintf(`{"spec":{"podCIDR":%q,"podCIDRs":[%q]}}`, cidr, cidr)
		_, err := fast.CoreV1().Nodes().Patch(ctx, name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{})
		return err
	}); err != nil {
		return err
	}
	cfg, err := b.config("routes: {}\n")
	if err != nil {
		return err
	}
	ccm, err := b.startCCM(fmt.Sprintf("ccm-join-%d", run), cfg, "--configure-cloud-routes=true", "--cluster-cidr=10.128.0.0/9")
	if err != nil {
		return err
	}
	defer ccm.Stop()
	start = time.Now()
	initialised := func() bool {
		list, err := fast.CoreV1().Nodes().List(ctx, metav1.ListOptions{ResourceVersion: "0"})
		if err != nil {
			return false
		}
		done := 0
		for _, n := range list.Items {
			if strings.HasPrefix(n.Name, "jn-") && !slices.ContainsFunc(n.Spec.Taints, func(t v1.Taint) bool { return t.Key == cloudapi.TaintExternalCloudProvider }) {
				done++
			}
		}
		return done == *joins
	}
	var joined, routed time.Duration
	if err := waitFor(30*time.Minute, func() bool {
		if joined == 0 && initialised() {
			joined = time.Since(start)
		}
		if routed == 0 && b.ribComplete(*joins, 1, nil) {
			routed = time.Since(start)
		}
		return joined > 0 && routed > 0
	}); err != nil {
		return fmt.Errorf("join: %w", err)
	}
	b.record("join", fmt.Sprintf("%d Nodes initialised", *joins), "s", joined.Seconds())
	b.record("join", "ratio to the floor", "x", joined.Seconds()/floor.Seconds())
	b.record("routes", fmt.Sprintf("peer has all %d pod-CIDR routes", *joins), "s", routed.Seconds())
	ccm.Stop()
	return b.deleteNodes("jn", *joins)
}

// saveProfile fetches one of the CCM's pprof profiles (heap, or profile
// for CPU) as the cluster admin: pprof is served only to authorised clients.
func (b *bench) saveProfile(ccm *framework.Process, query, path string) error {
	data, err := b.cluster.AdminGet(ccm, "/debug/pprof/"+query, 5*time.Minute)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "profile %s: %s (go tool pprof -top %s)\n", query, path, path)
	return os.WriteFile(path, data, 0o644)
}
