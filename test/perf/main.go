// Command perf is the benchmark suite (`make bench`): how fast the CCM
// converges, what it costs, how it scales, on the same real kube-apiserver,
// etcd and gobgpd peer as the integration tests. It prints a table and
// writes the same figures as JSON. Sizes are flags.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/netip"
	"os"
	osexec "os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/config"
	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/rendezvous"
	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/test/framework"
)

var (
	nodes       = flag.Int("nodes", 100, "Nodes for the service burst and node churn")
	services    = flag.Int("services", 1000, "LoadBalancer Services in the burst")
	maxPaths    = flag.Int("maximum-paths", 0, "the peer's bgp.peers[].maximumPaths (0: the default, 255)")
	joins       = flag.Int("join-nodes", 500, "Nodes registered at once for the node-join and routes scenarios")
	runs        = flag.Int("runs", 3, "runs of each scenario; figures are the median, with min and max")
	idle        = flag.Duration("idle", 5*time.Minute, "how long the steady-state scenario idles")
	burstWait   = flag.Duration("burst-timeout", 30*time.Minute, "how long the service burst, or the peer taking a change in, may take before the bench fails")
	qps         = flag.Float64("kube-api-qps", 0, "the CCM's --kube-api-qps (0: its default)")
	burst       = flag.Int("kube-api-burst", 0, "the CCM's --kube-api-burst (0: its default)")
	syncs       = flag.Int("concurrent-service-syncs", 0, "the CCM's --concurrent-service-syncs (0: its default)")
	scenarios   = flag.String("scenarios", "services,join,health", "the scenario groups to run: services (burst, churn, idle, pod churn), join (node join, routes), health (health checks); power (BMC questions at --bmc-machines, IPMI and Redfish: not run unless named); fabric (the leaf-spine site of docs/network/topologies.md at --racks, --tors-per-rack, --replicas: not run unless named)")
	out         = flag.String("out", "bench.json", "where to write the figures as JSON")
	heapProfile = flag.String("heap-profile", "", "if set, where to save the CCM's heap profile after the service burst")
	cpuProfile  = flag.String("cpu-profile", "", "if set, where to save a CPU profile of the CCM's first 20 s of the service burst")
	idleProfile = flag.String("idle-cpu-profile", "", "if set, where to save a CPU profile of the CCM's first 30 s after the node churn (the idle scenario's start)")
	ccmLog      = flag.String("ccm-log", "", "if set, where to copy the service scenarios' CCM log after the idle scenario")
)

// figure is one measured quantity over the runs.
type figure struct {
	Scenario string    `json:"scenario"`
	Name     string    `json:"name"`
	Unit     string    `json:"unit"`
	Values   []float64 `json:"values"`
	Median   float64   `json:"median"`
	Min      float64   `json:"min"`
	Max      float64   `json:"max"`
}

type report struct {
	Machine  string    `json:"machine"`
	Versions string    `json:"versions"`
	Flags    []string  `json:"flags"`
	Figures  []*figure `json:"figures"`
}

func main() {
	flag.Parse()
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "perf:", err)
		os.Exit(1)
	}
}

type bench struct {
	cluster    *framework.Cluster
	binary     string
	kubeconfig string
	peer       *framework.GoBGPD
	router     *router // with -frr
	dir        string
	rep        report
	figs       map[string]*figure
}

func (b *bench) record(scenario, name, unit string, v float64) {
	key := scenario + "/" + name
	f, ok := b.figs[key]
	if !ok {
		f = &figure{Scenario: scenario, Name: name, Unit: unit}
		b.figs[key] = f
		b.rep.Figures = append(b.rep.Figures, f)
	}
	f.Values = append(f.Values, v)
	// As it is measured: a long run's figures are seen before its end.
	fmt.Fprintf(os.Stderr, "figure: %s / %s: %.3f %s\n", scenario, name, v, unit)
	s := slices.Sorted(slices.Values(f.Values))
	f.Min, f.Max, f.Median = s[0], s[len(s)-1], s[len(s)/2]
}

func run() error {
	b := &bench{figs: map[string]*figure{}}
	var err error
	if b.dir, err = os.MkdirTemp("", "baremetal-perf-"); err != nil {
		return err
	}
	defer os.RemoveAll(b.dir)
	if b.binary, err = framework.BuildCCM(); err != nil {
		return err
	}
	if b.cluster, err = framework.StartCluster(); err != nil {
		return err
	}
	defer b.cluster.Stop()
	if err := b.cluster.Install(); err != nil {
		return err
	}
	if b.kubeconfig, err = b.cluster.ServiceAccountKubeconfig(context.Background(), "kube-system", "baremetal-cloud-controller-manager"); err != nil {
		return err
	}
	if b.peer, err = framework.StartGoBGPD(b.dir, "gobgpd", "127.0.0.1", 64500, []framework.GoBGPNeighbor{{Address: "127.0.0.1", ASN: 64512, AddPath: true}}); err != nil {
		return err
	}
	defer b.peer.Stop()
	if *withFRR {
		if b.router, err = startRouter(pathsPerVIP()); err != nil {
			return err
		}
		defer b.router.stop()
	}
	b.rep.Machine = fmt.Sprintf("%d cores, %s/%s, %s", runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, runtime.Version())
	b.rep.Versions = strings.Join([]string{
		versionOf(b.binary, "--version"),
		"kube-apiserver " + versionOf(filepath.Join(framework.ToolsBin(), "kube-apiserver"), "--version"),
		versionOf("gobgpd", "--version"),
	}, "; ")
	if b.router != nil {
		b.rep.Versions += "; " + versionOf("/usr/lib/frr/bgpd", "--version")
	}
	b.rep.Flags = os.Args[1:]

	for i := 0; i < *runs; i++ {
		fmt.Fprintf(os.Stderr, "run %d of %d\n", i+1, *runs)
		if selected("services") {
			floor, err := b.floor(i)
			if err != nil {
				return err
			}
			// The last scenario of the bench leaves its Services to the
			// teardown: at 255 paths a VIP and 1,000 nodes, deleting them
			// one withdrawal at a time would take longer than the rest.
			cleanUp := i < *runs-1 || selected("join") || selected("health") || selected("power") || selected("fabric")
			if err := b.serviceScenarios(i, floor, cleanUp); err != nil {
				return err
			}
		}
		if selected("join") {
			if err := b.joinScenarios(i); err != nil {
				return err
			}
		}
		if selected("health") {
			if err := b.healthScenarios(i); err != nil {
				return err
			}
		}
		if selected("power") {
			if err := b.powerScenarios(i); err != nil {
				return err
			}
		}
		if selected("fabric") {
			if err := b.fabricScenario(i); err != nil {
				return err
			}
		}
	}
	b.print()
	data, _ := json.MarshalIndent(b.rep, "", "  ")
	return os.WriteFile(*out, data, 0o644)
}

func selected(group string) bool {
	return slices.Contains(strings.Split(*scenarios, ","), group)
}

func versionOf(cmd string, args ...string) string {
	out, err := osexec.Command(cmd, args...).CombinedOutput()
	if err != nil {
		return cmd + ": unknown"
	}
	return strings.TrimSpace(strings.SplitN(string(out), "\n", 2)[0])
}

// ccmArgs are the flags under test.
func ccmArgs() []string {
	var a []string
	if *qps > 0 {
		a = append(a, fmt.Sprintf("--kube-api-qps=%g", *qps))
	}
	if *burst > 0 {
		a = append(a, fmt.Sprintf("--kube-api-burst=%d", *burst))
	}
	if *syncs > 0 {
		a = append(a, fmt.Sprintf("--concurrent-service-syncs=%d", *syncs))
	}
	return a
}

func (b *bench) config(extra string) (string, error) {
	path := filepath.Join(b.dir, fmt.Sprintf("cloud-%d.yaml", time.Now().UnixNano()))
	cfg := fmt.Sprintf(`inventory:
  unlistedNodes: allow
loadBalancer:
  # Off unless the nodes' addresses are in a network namespace of the
  # bench's (probeOn switches them on): nothing may dial others.
  healthCheck: {enabled: false}
  pools:
  - name: bench
    addresses: [198.19.0.0/18]
bgp:
  localASN: 64512
  routerID: 127.0.0.2
  peers:
  - {address: 127.0.0.1, port: %d, asn: 64500, holdTime: 30s, connectRetryTime: 1s, maximumPaths: %d}
%s%s`, b.peer.Port, pathsPerVIP(), b.routerPeer(), extra)
	return path, os.WriteFile(path, []byte(cfg), 0o644)
}

func (b *bench) startCCM(name, cloudConfig string, extra ...string) (*framework.Process, error) {
	p, err := framework.CCM{Binary: b.binary, Dir: b.dir, Name: name, Kubeconfig: b.kubeconfig, CloudConfig: cloudConfig,
		Args: append(append([]string{"--v=1"}, ccmArgs()...), extra...)}.Start()
	if err != nil {
		return nil, err
	}
	return p, waitFor(2*time.Minute, func() bool { return p.LogContains("Successfully acquired lease") })
}

// waitFor polls cond every 100 ms, the resolution of the bench's timings.
func waitFor(timeout time.Duration, cond func() bool) error {
	return framework.Poll(timeout, 100*time.Millisecond, func() (bool, string) { return cond(), "" })
}

func nodeIP(i int) string { return fmt.Sprintf("198.18.%d.%d", i/250, i%250+1) }

// fastClient is a client without client-side rate limits, for set-up.
func (b *bench) fastClient() kubernetes.Interface {
	cfg := rest.CopyConfig(b.cluster.AdminConfig)
	cfg.QPS, cfg.Burst = 5000, 10000
	return kubernetes.NewForConfigOrDie(cfg)
}

func (b *bench) registerNodes(prefix string, n int, ready bool) error {
	return b.registerNodesFrom(prefix, 0, n, ready)
}

func (b *bench) deleteNodes(prefix string, n int) error {
	c := b.fastClient()
	return framework.Parallel(n, 32, func(i int) error {
		return c.CoreV1().Nodes().Delete(context.Background(), fmt.Sprintf("%s-%d", prefix, i), metav1.DeleteOptions{})
	})
}

// pathsPerVIP is the peer's maximumPaths.
func pathsPerVIP() int {
	if *maxPaths > 0 {
		return *maxPaths
	}
	return config.DefaultMaximumPaths
}

// carriers is what the peer must have: each VIP via the Ready, healthy
// nodes rendezvous hashing gives it (all of them when they are no more than
// maximumPaths), nodes being bn-0 … by nodeIP. except are the nodes that
// are not Ready or fail their health checks.
type carriers struct {
	names []string
	ips   map[string]string
	n     int
}

func readyNodes(count int, except ...int) carriers {
	c := carriers{ips: map[string]string{}}
	for i := range count {
		if slices.Contains(except, i) {
			continue
		}
		name := fmt.Sprintf("bn-%d", i)
		c.names = append(c.names, name)
		c.ips[name] = nodeIP(i)
	}
	c.n = min(len(c.names), pathsPerVIP())
	return c
}

// of is a VIP's next hops, sorted.
func (c carriers) of(vip netip.Addr) []string {
	var out []string
	for _, i := range rendezvous.Top(vip, c.names, c.n) {
		out = append(out, c.ips[c.names[i]])
	}
	slices.Sort(out)
	return out
}

// changed counts the VIPs of rib whose next hops differ between a and b.
func changed(vips []netip.Addr, a, b carriers) int {
	n := 0
	for _, v := range vips {
		if !slices.Equal(a.of(v), b.of(v)) {
			n++
		}
	}
	return n
}

// waitPaths waits until the peer has want prefixes, each via the next
// hops of want, and returns when the count of paths first matched.
//
// When the count of paths was right from the first look (a node replacing
// another in VIPs' subsets changes no count), the time is when a dump of
// the table first showed the change: an upper bound, late by up to a dump.
func (b *bench) waitPaths(start time.Time, want int, c carriers) (time.Duration, error) {
	first := true
	countSaid := false
	for deadline := time.Now().Add(*burstWait); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		_, paths, err := b.peer.RIBCount("ipv4")
		if err != nil || paths != want*c.n {
			first = false
			continue
		}
		countSaid = countSaid || !first
		first = false
		at := time.Since(start)
		if b.ribComplete(want, c.n, c.of) {
			if !countSaid {
				at = time.Since(start)
			}
			return at, nil
		}
	}
	return 0, fmt.Errorf("not so after %s", *burstWait)
}

// ribVIPs are the VIPs the peer has.
func (b *bench) ribVIPs() ([]netip.Addr, error) {
	rib, err := b.peer.RIB("ipv4")
	if err != nil {
		return nil, err
	}
	var out []netip.Addr
	for prefix := range rib {
		p, err := netip.ParsePrefix(prefix)
		if err != nil {
			return nil, err
		}
		out = append(out, p.Addr())
	}
	return out, nil
}

// ribComplete reports whether the peer has want prefixes with hops next
// hops each, those of hopsOf when given.
func (b *bench) ribComplete(want, hops int, hopsOf func(netip.Addr) []string) bool {
	// Dumping a table of 100,000 paths takes gobgpd seconds: count first.
	if _, paths, err := b.peer.RIBCount("ipv4"); err != nil || paths < want*hops {
		return false
	}
	rib, err := b.peer.RIB("ipv4")
	if err != nil || len(rib) < want {
		return false
	}
	n := 0
	for prefix, nhs := range rib {
		if len(nhs) != hops {
			continue
		}
		if hopsOf != nil {
			p, err := netip.ParsePrefix(prefix)
			if err != nil || !slices.Equal(sortedCopy(nhs), hopsOf(p.Addr())) {
				continue
			}
		}
		n++
	}
	return n >= want
}

func sortedCopy(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

func (b *bench) print() {
	fmt.Printf("\nbaremetal-cloud-controller-manager benchmarks\nmachine: %s\nflags: %v\n\n", b.rep.Machine, b.rep.Flags)
	fmt.Printf("%-12s %-44s %10s %10s %10s  %s\n", "scenario", "figure", "median", "min", "max", "unit")
	for _, f := range b.rep.Figures {
		fmt.Printf("%-12s %-44s %10.3f %10.3f %10.3f  %s\n", f.Scenario, f.Name, f.Median, f.Min, f.Max, f.Unit)
	}
}

func registerNode(c kubernetes.Interface, name, ip string, ready bool) error {
	return framework.RegisterNode(context.Background(), c, name, "", ready, []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: ip}})
}

func setStatus(c kubernetes.Interface, name string, ready bool, ip string) error {
	return framework.SetNodeStatus(context.Background(), c, name, ready, []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: ip}})
}
