package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/bgp"
	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/test/framework"
)

var (
	healthNodes  = flag.String("health-nodes", "100,500", "node counts the health-check scenario probes")
	healthWindow = flag.Duration("health-window", 30*time.Second, "how long the health-check scenario measures each size")
)

// healthScenarios measures what probing the nodes' health checks costs the
// CCM: for each size, Ready nodes at addresses in a network namespace (10.199.x.y), each
// with a kube-proxy-like /healthz, one LoadBalancer Service, the default
// interval; probes per second and CPU over the window.
func (b *bench) healthScenarios(run int) error {
	for _, f := range strings.Split(*healthNodes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > 60000 {
			return fmt.Errorf("--health-nodes: %q is not a node count", f)
		}
		if err := b.healthScenario(run, n); err != nil {
			return fmt.Errorf("health checks at %d nodes: %w", n, err)
		}
	}
	return nil
}

// healthIP is node i's address: in a network namespace of the bench's own
// (the CCM never probes or routes to loopback addresses).
func healthIP(i int) string { return fmt.Sprintf("10.199.%d.%d", i/250, i%250+1) }

// nodeNetwork is node addresses in a network namespace reached over a
// veth from this host, answering health checks like kube-proxy.
type nodeNetwork struct {
	ns      *framework.Netns
	hostEnd string
	srv     *http.Server

	mu sync.Mutex
	// frozen are the addresses whose probes get no answer, each with when
	// the first of them came (zero until one did).
	frozen map[string]time.Time
}

// serveHealthNodes puts n node addresses, addr(0) … addr(n-1) of a /16
// whose host end is hostAddr, in a network namespace of its own, answering
// on port. It needs root.
func serveHealthNodes(dir, name, hostAddr string, n, port int, addr func(int) string) (*nodeNetwork, error) {
	h := &nodeNetwork{hostEnd: name + "0", frozen: map[string]time.Time{}}
	ns, err := linkedNetns(name, h.hostEnd, hostAddr+"/16")
	if err != nil {
		return nil, err
	}
	return h, h.serve(dir, ns, name, n, port, addr)
}

// serveHealthNodesBehind is serveHealthNodes with the namespace linked to
// router (a namespace of the bench's) instead of this host: router's end
// is gateway, in the nodes' /16, and the nodes' default route.
func serveHealthNodesBehind(dir, name string, router *framework.Netns, gateway string, n, port int, addr func(int) string) (*nodeNetwork, error) {
	h := &nodeNetwork{frozen: map[string]time.Time{}}
	ns, err := framework.NewNetns(name)
	if err != nil {
		return nil, err
	}
	if err := framework.Veth(router, name, gateway+"/16", ns, "eth0", ""); err != nil {
		ns.Delete()
		return nil, err
	}
	if err := h.serve(dir, ns, name, n, port, addr); err != nil {
		return nil, err
	}
	if _, err := ns.IP("route", "add", "default", "via", gateway); err != nil {
		h.stop()
		return nil, err
	}
	return h, nil
}

// serve gives ns's eth0 the n addresses and answers probes on port; on
// error it stops h.
func (h *nodeNetwork) serve(dir string, ns *framework.Netns, name string, n, port int, addr func(int) string) (err error) {
	h.ns = ns
	defer func() {
		if err != nil {
			h.stop()
		}
	}()
	var batch strings.Builder
	for i := range n {
		fmt.Fprintf(&batch, "addr add %s/16 dev eth0\n", addr(i))
	}
	batch.WriteString("link set eth0 up\n")
	file := filepath.Join(dir, name+".batch")
	if err := os.WriteFile(file, []byte(batch.String()), 0o644); err != nil {
		return err
	}
	if _, err := h.ns.IP("-batch", file); err != nil {
		return err
	}
	l, err := h.ns.Listen("tcp", net.JoinHostPort("0.0.0.0", strconv.Itoa(port)))
	if err != nil {
		return err
	}
	h.srv = &http.Server{Handler: http.HandlerFunc(h.answer)}
	go h.srv.Serve(l)
	return nil
}

// linkedNetns is a new network namespace name with a veth to this host:
// eth0 inside, hostEnd here with hostCIDR. A leftover link of an aborted
// run is deleted first. On error the namespace is deleted.
func linkedNetns(name, hostEnd, hostCIDR string) (_ *framework.Netns, err error) {
	ns, err := framework.NewNetns(name)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			ns.Delete()
		}
	}()
	exec.Command("ip", "link", "del", hostEnd).Run()
	if out, err := exec.Command("ip", "link", "add", hostEnd, "type", "veth", "peer", "name", "eth0", "netns", ns.Name).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("ip link add %s: %w: %s", hostEnd, err, out)
	}
	for _, args := range [][]string{{"addr", "add", hostCIDR, "dev", hostEnd}, {"link", "set", hostEnd, "up"}} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			return nil, fmt.Errorf("ip %v: %w: %s", args, err, out)
		}
	}
	return ns, nil
}

// freeze makes a node silent, as a frozen node is: its probes are taken
// in and never answered, and the first one's arrival is kept.
func (h *nodeNetwork) freeze(addr string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.frozen[addr] = time.Time{}
	return nil
}

// firstUnanswered is when the first probe of a frozen node came.
func (h *nodeNetwork) firstUnanswered(addr string) (time.Time, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	at := h.frozen[addr]
	return at, !at.IsZero()
}

// answer is kube-proxy's /healthz: 200, or nothing at all from a frozen
// node until the prober gives up.
func (h *nodeNetwork) answer(w http.ResponseWriter, r *http.Request) {
	local, _ := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	host := ""
	if local != nil {
		host, _, _ = net.SplitHostPort(local.String())
	}
	h.mu.Lock()
	first, frozen := h.frozen[host]
	if frozen && first.IsZero() {
		h.frozen[host] = time.Now()
	}
	h.mu.Unlock()
	if frozen {
		<-r.Context().Done()
	}
}

func (h *nodeNetwork) stop() {
	if h.srv != nil {
		h.srv.Close()
	}
	if h.hostEnd != "" {
		exec.Command("ip", "link", "del", h.hostEnd).Run()
	}
	h.ns.Delete()
}

func (b *bench) healthScenario(run, nodes int) error {
	port, err := framework.FreePort()
	if err != nil {
		return err
	}
	hn, err := serveHealthNodes(b.dir, "bmbench-health", "10.199.255.254", nodes, port, healthIP)
	if err != nil {
		return err
	}
	defer hn.stop()
	fast := b.fastClient()
	prefix := fmt.Sprintf("hc%d", nodes)
	if err := framework.Parallel(nodes, 32, func(i int) error {
		return registerNode(fast, fmt.Sprintf("%s-%d", prefix, i), healthIP(i), true)
	}); err != nil {
		return err
	}
	defer b.deleteNodes(prefix, nodes)
	cfg, err := b.config("")
	if err != nil {
		return err
	}
	if err := probeOn(cfg, port); err != nil {
		return err
	}
	ccm, err := b.startCCM(fmt.Sprintf("ccm-health-%d-%d", nodes, run), cfg)
	if err != nil {
		return err
	}
	defer ccm.Stop()
	const ns = "bench-health"
	if err := b.namespace(ns); err != nil {
		return err
	}
	svc := lbService("probed")
	if _, err := b.cluster.Admin.CoreV1().Services(ns).Create(context.Background(), svc, metav1.CreateOptions{}); err != nil {
		return err
	}
	defer b.cluster.Admin.CoreV1().Services(ns).Delete(context.Background(), "probed", metav1.DeleteOptions{})
	metric := func(name string) (float64, error) {
		m, err := b.cluster.AdminGet(ccm, "/metrics", time.Minute)
		if err != nil {
			return 0, err
		}
		return metricValue(string(m), name)
	}
	probes := func() (float64, error) { return metric(`baremetal_health_check_probes_total{result="success"}`) }
	// Every node probed and serving: the VIP via all of them (or as many
	// as a prefix may have).
	if err := waitFor(5*time.Minute, func() bool {
		paths, err1 := metric("baremetal_bgp_announced_paths")
		out, err2 := metric("baremetal_health_check_nodes_out")
		return err1 == nil && err2 == nil && int(paths) == min(nodes, bgp.MaxNextHops) && out == 0
	}); err != nil {
		return fmt.Errorf("every node serving: %w", err)
	}
	p0, err := probes()
	if err != nil {
		return err
	}
	cpu0, err := cpuSeconds(ccm.PID())
	if err != nil {
		return err
	}
	time.Sleep(*healthWindow)
	p1, err := probes()
	if err != nil {
		return err
	}
	cpu1, err := cpuSeconds(ccm.PID())
	if err != nil {
		return err
	}
	scenario := fmt.Sprintf("health/%d", nodes)
	b.record(scenario, "probes per second", "1/s", (p1-p0)/healthWindow.Seconds())
	b.record(scenario, "CCM CPU while probing", "cores", (cpu1-cpu0)/healthWindow.Seconds())
	return nil
}

// probeOn switches the health checks of a bench config on, at port, with
// the shipped defaults otherwise.
func probeOn(cfg string, port int) error {
	text, err := os.ReadFile(cfg)
	if err != nil {
		return err
	}
	on := strings.Replace(string(text), "healthCheck: {enabled: false}", fmt.Sprintf("healthCheck: {port: %d}", port), 1)
	if on == string(text) {
		return fmt.Errorf("%s: no health-check setting to switch on", cfg)
	}
	return os.WriteFile(cfg, []byte(on), 0o644)
}
