package main

import (
	"context"
	"flag"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cloudapi "k8s.io/cloud-provider/api"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/test/framework"
)

var (
	racks        = flag.Int("racks", 10, "fabric scenario: racks, each with --nodes/--racks nodes (at most 250) in a /24 of its own")
	torsPerRack  = flag.Int("tors-per-rack", 2, "fabric scenario: ToRs (FRR) per rack, each peered by multihop eBGP with every replica")
	replicaCount = flag.Int("replicas", 2, "fabric scenario: CCM replicas, each in a network namespace of its own address")
	fabricMemory = flag.String("fabric-memory-limit", "420MiB", "fabric scenario: the replicas' GOMEMLIMIT (deploy/'s by default; empty for none)")
	fabricBFD    = flag.Bool("fabric-bfd", true, "fabric scenario: peers with bfd: {}, as docs/network/topologies.md recommends")
)

const fabricNodePrefix = "fn"

// The fabric of docs/network/topologies.md at a site's size: racks of
// nodes, each rack behind its ToRs (the page's ToR block, FRR), CCM
// replicas on hosts of their own addresses two hops from every ToR
// (replica, the fabric's core, the ToR), each replica peering with every
// ToR's loopback by multihop eBGP with BFD, the ToRs of a rack selecting
// its nodes (the page's peers). The core is a plain Linux router; the
// nodes' addresses are one namespace behind it answering health checks.
// No traffic crosses the fabric: what is measured is what the replicas
// and the routers hold.
type fabric struct {
	core     *framework.Netns
	tors     [][]*router // per rack
	hosts    []*framework.Netns
	nodes    *nodeNetwork
	replicas []*framework.Process
	// restoreNeigh puts the neighbour table's size back.
	restoreNeigh func()
}

// raiseNeighbourTable makes the kernel's neighbour table (one for every
// namespace) hold at least entries, and returns what restores it.
func raiseNeighbourTable(entries int) (func(), error) {
	var restore []func()
	undo := func() {
		for _, r := range restore {
			r()
		}
	}
	for i, want := range []int{entries / 4, entries / 2, entries} {
		path := fmt.Sprintf("/proc/sys/net/ipv4/neigh/default/gc_thresh%d", i+1)
		was, err := os.ReadFile(path)
		if err != nil {
			undo()
			return nil, err
		}
		if n, err := strconv.Atoi(strings.TrimSpace(string(was))); err == nil && n >= want {
			continue
		}
		if err := os.WriteFile(path, []byte(strconv.Itoa(want)), 0o644); err != nil {
			undo()
			return nil, err
		}
		restore = append(restore, func() { os.WriteFile(path, was, 0o644) })
	}
	return undo, nil
}

func nodesPerRack() int { return *nodes / *racks }

// fabricNodeIP is node i's address: rack r's nodes are 198.18.r.0/24.
func fabricNodeIP(i int) string {
	return fmt.Sprintf("198.18.%d.%d", i/nodesPerRack(), i%nodesPerRack()+1)
}

func fabricNodeName(i int) string { return fmt.Sprintf("%s-%d", fabricNodePrefix, i) }

// torLoopback is the address the replicas peer with: ToR t of rack r's.
func torLoopback(r, t int) string { return fmt.Sprintf("10.255.%d.%d", r, t+1) }

// rackCarriers are what rack r's ToRs must have: each VIP via the rack's
// nodes rendezvous hashing gives it, except those given.
func rackCarriers(r int, except ...int) carriers {
	c := carriers{ips: map[string]string{}}
	for j := range nodesPerRack() {
		i := r*nodesPerRack() + j
		if slices.Contains(except, i) {
			continue
		}
		c.names = append(c.names, fabricNodeName(i))
		c.ips[fabricNodeName(i)] = fabricNodeIP(i)
	}
	c.n = min(len(c.names), pathsPerVIP())
	return c
}

func (f *fabric) stop() {
	for _, p := range f.replicas {
		p.Stop()
	}
	for _, rack := range f.tors {
		for _, t := range rack {
			t.stop()
		}
	}
	if f.nodes != nil {
		f.nodes.stop()
	}
	for _, h := range f.hosts {
		h.Delete()
	}
	if f.core != nil {
		f.core.Delete()
	}
	if f.restoreNeigh != nil {
		f.restoreNeigh()
	}
}

// buildFabric builds the namespaces, the ToRs and the node network
// (answering health checks on port).
func (b *bench) buildFabric(port int) (_ *fabric, err error) {
	f := &fabric{}
	defer func() {
		if err != nil {
			f.stop()
		}
	}()
	if f.core, err = framework.NewNetns("bmfab-core"); err != nil {
		return nil, err
	}
	if _, err := f.core.Exec("sysctl", "-qw", "net.ipv4.ip_forward=1"); err != nil {
		return nil, err
	}
	// The core and the nodes' namespace hold a neighbour entry for each
	// node: more than the kernel's one table for all namespaces holds by
	// default (1,024 entries). Raised for the run, as a router's is.
	if f.restoreNeigh, err = raiseNeighbourTable(4 * *nodes); err != nil {
		return nil, err
	}
	if f.nodes, err = serveHealthNodesBehind(b.dir, "bmfab-nodes", f.core, "198.18.255.254", *nodes, port, fabricNodeIP); err != nil {
		return nil, err
	}
	tor, err := framework.MarkdownBlock(topologiesPage, "ToR of rack 1", "frr")
	if err != nil {
		return nil, err
	}
	for r := range *racks {
		var rack []*router
		for t := range *torsPerRack {
			k := r**torsPerRack + t
			link, addr := fmt.Sprintf("10.254.%d.1", k), fmt.Sprintf("10.254.%d.2", k)
			conf, err := rewrite(tor.Text, topologiesPage, [][2]string{
				{"10.0.100.0/24 ge 32", "198.19.0.0/18 ge 32"}, // the bench's pool
				{"10.1.1.0/24 ge 32", fmt.Sprintf("198.18.%d.0/24 ge 32", r)},
				{"router bgp 65101", fmt.Sprintf("router bgp %d", 65101+k)},
				{"bgp router-id 10.0.255.1", "bgp router-id " + torLoopback(r, t)},
				{" bgp listen range 10.1.1.8/29 peer-group CCM\n bgp listen range 10.1.2.8/29 peer-group CCM\n", " bgp listen range 10.253.0.0/16 peer-group CCM\n"},
				{"10.0.0.0 ", link + " "}, // the spine: the core, which speaks no BGP
				{"maximum-paths 16", fmt.Sprintf("maximum-paths %d", pathsPerVIP())},
			})
			if err != nil {
				return nil, err
			}
			ns, err := framework.NewNetns(fmt.Sprintf("bmfab-tor%d", k))
			if err != nil {
				return nil, err
			}
			if err := framework.Veth(f.core, fmt.Sprintf("tor%d", k), link+"/30", ns, "eth0", addr+"/30"); err != nil {
				ns.Delete()
				return nil, err
			}
			// The rack's nodes are next hops on the ToR's link (no traffic
			// is sent), so that each VIP's kernel route names them.
			for _, args := range [][]string{{"addr", "add", torLoopback(r, t) + "/32", "dev", "lo"}, {"route", "add", "default", "via", link},
				{"route", "add", fmt.Sprintf("198.18.%d.0/24", r), "dev", "eth0"}} {
				if _, err := ns.IP(args...); err != nil {
					ns.Delete()
					return nil, err
				}
			}
			if _, err := f.core.IP("route", "add", torLoopback(r, t)+"/32", "via", addr); err != nil {
				ns.Delete()
				return nil, err
			}
			rt, err := runRouter(ns, "", conf)
			if err != nil {
				return nil, err
			}
			rack = append(rack, rt)
		}
		f.tors = append(f.tors, rack)
	}
	for h := range *replicaCount {
		ns, err := framework.NewNetns(fmt.Sprintf("bmfab-cp%d", h))
		if err != nil {
			return nil, err
		}
		f.hosts = append(f.hosts, ns)
		if err := framework.Veth(f.core, fmt.Sprintf("cp%d", h), fmt.Sprintf("10.253.%d.1/30", h), ns, "eth0", replicaIP(h)+"/30"); err != nil {
			return nil, err
		}
		if _, err := ns.IP("route", "add", "default", "via", fmt.Sprintf("10.253.%d.1", h)); err != nil {
			return nil, err
		}
	}
	return f, nil
}

func replicaIP(h int) string { return fmt.Sprintf("10.253.%d.2", h) }

// fabricConfig is the replicas' cloud config: the page's peers, one per
// ToR, and the inventory with each node in its rack's zone.
func fabricConfig(dir string, port int) (string, error) {
	var c strings.Builder
	fmt.Fprintf(&c, "inventory:\n  machines:\n")
	for i := range *nodes {
		fmt.Fprintf(&c, "  - {name: %s, zone: rack%d, addresses: [{type: InternalIP, address: %s}]}\n", fabricNodeName(i), i/nodesPerRack()+1, fabricNodeIP(i))
	}
	fmt.Fprintf(&c, `loadBalancer:
  healthCheck: {port: %d}
  pools:
  - name: bench
    addresses: [198.19.0.0/18]
bgp:
  localASN: 64512
  peers:
`, port)
	for r := range *racks {
		for t := range *torsPerRack {
			bfd := ""
			if *fabricBFD {
				bfd = "bfd: {}, "
			}
			fmt.Fprintf(&c, "  - {address: %s, asn: %d, ebgpMultihop: 3, %smaximumPaths: %d, nodeSelector: {matchLabels: {topology.kubernetes.io/zone: rack%d}}}\n",
				torLoopback(r, t), 65101+r**torsPerRack+t, bfd, pathsPerVIP(), r+1)
		}
	}
	path := filepath.Join(dir, "cloud-fabric.yaml")
	return path, os.WriteFile(path, []byte(c.String()), 0o644)
}

// fabricScenario measures the fabric at its size: the replicas' memory and
// CPU for the burst, what each ToR holds, and a silent node off its ToRs'
// kernel routes.
func (b *bench) fabricScenario(run int) error {
	if *racks < 1 || *nodes%*racks != 0 || nodesPerRack() > 250 {
		return fmt.Errorf("fabric: --nodes=%d must be --racks=%d times at most 250", *nodes, *racks)
	}
	ctx := context.Background()
	ns := fmt.Sprintf("fabric-%d", run)
	if err := b.namespace(ns); err != nil {
		return err
	}
	port, err := framework.FreePort()
	if err != nil {
		return err
	}
	f, err := b.buildFabric(port)
	if err != nil {
		return err
	}
	defer f.stop()
	cfg, err := fabricConfig(b.dir, port)
	if err != nil {
		return err
	}
	fast := b.fastClient()
	if err := framework.Parallel(*nodes, 32, func(i int) error {
		return registerNode(fast, fabricNodeName(i), fabricNodeIP(i), true)
	}); err != nil {
		return err
	}
	api, err := url.Parse(b.cluster.AdminConfig.Host)
	if err != nil {
		return err
	}
	for h, host := range f.hosts {
		fwd, err := host.ForwardInto(api.Host)
		if err != nil {
			return err
		}
		kc, err := b.cluster.ServiceAccountKubeconfigVia(ctx, "kube-system", "baremetal-cloud-controller-manager", fmt.Sprintf("https://127.0.0.1:%d", fwd))
		if err != nil {
			return err
		}
		p, err := framework.CCM{Binary: b.binary, Dir: b.dir, Name: fmt.Sprintf("ccm-fabric-%d-%d", run, h), Kubeconfig: kc, CloudConfig: cfg, Netns: host.Name,
			Env:  []string{"POD_IP=" + replicaIP(h), "GOMEMLIMIT=" + *fabricMemory},
			Args: append([]string{"--v=1"}, ccmArgs()...)}.Start()
		if err != nil {
			return err
		}
		f.replicas = append(f.replicas, p)
		if h == 0 {
			if err := waitFor(2*time.Minute, func() bool { return p.LogContains("Successfully acquired lease") }); err != nil {
				return fmt.Errorf("fabric: the first replica leads no Lease: %w\n%s", err, framework.Tail(p.Logs(), 30))
			}
		}
	}

	// The leader initialises every Node; only initialised Nodes carry VIPs.
	start := time.Now()
	if err := waitFor(*burstWait, func() bool {
		list, err := fast.CoreV1().Nodes().List(ctx, metav1.ListOptions{ResourceVersion: "0"})
		if err != nil {
			return false
		}
		n := 0
		for _, node := range list.Items {
			if strings.HasPrefix(node.Name, fabricNodePrefix+"-") && !slices.ContainsFunc(node.Spec.Taints, func(t v1.Taint) bool { return t.Key == cloudapi.TaintExternalCloudProvider }) {
				n++
			}
		}
		return n == *nodes
	}); err != nil {
		return fmt.Errorf("fabric: Nodes not initialised: %w", err)
	}
	b.record("fabric", fmt.Sprintf("%d Nodes initialised", *nodes), "s", time.Since(start).Seconds())

	// The burst, until every ToR routes every VIP via its rack's nodes.
	cpu0 := make([]float64, len(f.replicas))
	for h, p := range f.replicas {
		if cpu0[h], err = cpuSeconds(p.PID()); err != nil {
			return err
		}
	}
	start = time.Now()
	if err := b.createServices(ns); err != nil {
		return err
	}
	if err := waitFor(*burstWait, func() bool { return f.exited() != nil || b.addressed(ns) }); err != nil {
		return fmt.Errorf("fabric: Services without an address: %w", err)
	}
	if err := f.exited(); err != nil {
		return err
	}
	b.record("fabric", fmt.Sprintf("%d Services have an address", *services), "s", time.Since(start).Seconds())
	all := func(r int) carriers { return rackCarriers(r) }
	last, err := f.routed(start, nil, all)
	if err != nil {
		return fmt.Errorf("fabric: burst: %w", err)
	}
	b.record("fabric", fmt.Sprintf("every ToR (%d) routes every VIP via its %d rack nodes", *racks**torsPerRack, all(0).n), "s", last.Sub(start).Seconds())
	total := 0.0
	for h, p := range f.replicas {
		cpu, err := cpuSeconds(p.PID())
		if err != nil {
			return err
		}
		b.record("fabric", fmt.Sprintf("replica %d: CPU until then", h), "s", cpu-cpu0[h])
		total += cpu - cpu0[h]
	}
	b.record("fabric", "replicas: CPU until then, together", "s", total)
	if err := f.recordToRs(b); err != nil {
		return err
	}

	// A node goes silent: off its ToRs' kernel routes, from its first
	// failed probe (one timeout, the default 1 s, after it was sent).
	start = time.Now()
	if err := f.nodes.freeze(fabricNodeIP(0)); err != nil {
		return err
	}
	without := func(r int) carriers {
		if r == 0 {
			return rackCarriers(0, 0)
		}
		return rackCarriers(r)
	}
	gone, err := f.routed(start, f.tors[:1], without)
	if err != nil {
		return fmt.Errorf("fabric: the silent node: %w", err)
	}
	first, ok := f.nodes.firstUnanswered(fabricNodeIP(0))
	if !ok {
		return fmt.Errorf("fabric: the silent node was never probed after its death")
	}
	b.record("fabric", "silent node off its ToRs' kernel routes, from its death", "s", gone.Sub(start).Seconds())
	b.record("fabric", "… from its first failed probe", "s", gone.Sub(first.Add(time.Second)).Seconds())

	// Memory, after a minute's quiet.
	time.Sleep(time.Minute)
	for h, p := range f.replicas {
		if exited, err := p.Exited(); exited {
			return fmt.Errorf("fabric: replica %d exited: %v\n%s", h, err, framework.Tail(p.Logs(), 40))
		}
		m, err := memory(p.PID())
		if err != nil {
			return err
		}
		b.record("fabric", fmt.Sprintf("replica %d: RSS", h), "MiB", m["VmRSS"])
		b.record("fabric", fmt.Sprintf("replica %d: peak RSS", h), "MiB", m["VmHWM"])
		if heap, err := f.replicaHeap(b, h); err == nil {
			b.record("fabric", fmt.Sprintf("replica %d: Go heap", h), "MiB", heap)
		}
		// Sessions that ended and came back: each costs the router the
		// replica's paths, and the replica sending them all again.
		logs := p.Logs()
		b.record("fabric", fmt.Sprintf("replica %d: BGP sessions established beyond one per ToR", h), "sessions",
			float64(strings.Count(logs, `state="established"`)-*racks**torsPerRack))
		b.record("fabric", fmt.Sprintf("replica %d: BFD sessions that went down", h), "sessions", float64(strings.Count(logs, `to="Down"`)))
	}
	return nil
}

// replicaHeap is replica h's Go heap, in MiB, from its metrics (its port
// is on its host's loopback).
func (f *fabric) replicaHeap(b *bench, h int) (float64, error) {
	addr, err := f.hosts[h].ForwardOutOf(f.replicas[h].SecurePort)
	if err != nil {
		return 0, err
	}
	port, err := strconv.Atoi(addr[strings.LastIndexByte(addr, ':')+1:])
	if err != nil {
		return 0, err
	}
	m, err := b.cluster.AdminGet(&framework.Process{Name: f.replicas[h].Name, SecurePort: port}, "/metrics", time.Minute)
	if err != nil {
		return 0, err
	}
	heap, err := metricValue(string(m), "go_memstats_heap_alloc_bytes")
	return heap / (1 << 20), err
}

// exited is an error naming the first replica that exited, if any (a
// replica that loses its Lease exits, for its kubelet to restart).
func (f *fabric) exited() error {
	for h, p := range f.replicas {
		if gone, err := p.Exited(); gone {
			return fmt.Errorf("fabric: replica %d exited: %v\n%s", h, err, framework.Tail(p.Logs(), 20))
		}
	}
	return nil
}

// routed waits until every ToR of racks (all, if nil) routes every VIP via
// the next hops want gives its rack, and returns the last route change any
// of them made before.
func (f *fabric) routed(start time.Time, racks [][]*router, want func(rack int) carriers) (time.Time, error) {
	if racks == nil {
		racks = f.tors
	}
	var last time.Time
	for r, rack := range racks {
		c := want(r)
		for t, tor := range rack {
			// A table of 5,000 routes of 16 next hops is a few MB of JSON:
			// look once a second (the time is the monitor's, not the look's).
			if err := framework.Poll(*burstWait, time.Second, func() (bool, string) { return f.exited() != nil || tor.has(*services, c), "" }); err != nil {
				return last, fmt.Errorf("ToR %d of rack %d: %w", t+1, r+1, err)
			}
			if err := f.exited(); err != nil {
				return last, fmt.Errorf("ToR %d of rack %d: %w", t+1, r+1, err)
			}
			at, err := tor.lastChange()
			if err != nil {
				return last, err
			}
			if at.After(last) {
				last = at
			}
		}
	}
	return last, nil
}

// recordToRs records what the ToRs hold: paths received, bgpd's and
// zebra's memory (the largest of the ToRs, and all of them together).
func (f *fabric) recordToRs(b *bench) error {
	maxPaths, sum := 0, map[string]float64{}
	peak := map[string]float64{}
	for _, rack := range f.tors {
		for _, t := range rack {
			n, err := t.received()
			if err != nil {
				return err
			}
			maxPaths = max(maxPaths, n)
			mem, err := t.memory()
			if err != nil {
				return err
			}
			for k, v := range mem {
				sum[k] += v
				peak[k] = max(peak[k], v)
			}
		}
	}
	b.record("fabric", "a ToR's paths from the replicas (the most)", "paths", float64(maxPaths))
	for _, k := range []string{"bgpd RSS", "zebra RSS"} {
		b.record("fabric", "a ToR's "+k+" (the most)", "MiB", peak[k])
		b.record("fabric", "the ToRs' "+k+", together", "MiB", sum[k])
	}
	return nil
}
