package l2

import (
	"context"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/provider"
	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/test/framework"
)

var (
	cluster   *framework.Cluster
	ccmBinary string
	seg       *segment

	services = flag.Int("services", 8, "dual-stack Services on the segment (the README's full size: 1000)")
	outage   = flag.Duration("outage", 2*time.Minute, "how long the API server is stopped while the VIPs must stay answered")
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	var suite *framework.Suite
	return framework.RunSuiteWith(m, &suite, func(s *framework.Suite) (func(), error) {
		cluster, ccmBinary = s.Cluster, s.Binary
		var err error
		if seg, err = buildSegment(cluster.AdminConfig.Host); err != nil {
			return nil, fmt.Errorf("l2: %w", err)
		}
		restore, err := roomForNeighbours(4 * *services)
		if err != nil {
			seg.teardown()
			return nil, fmt.Errorf("l2: %w", err)
		}
		return func() { restore(); seg.teardown() }, nil
	})
}

// vipsOf is each Service's VIPs, IPv4 then IPv6.
type vipsOf map[string][]string

func (v vipsOf) all() []string {
	var out []string
	for _, ips := range v {
		out = append(out, ips...)
	}
	sort.Strings(out)
	return out
}

// TestLayer2 is the whole life of layer 2 VIPs on one segment: answered
// by the leader with the chosen node's MAC, spread over the nodes, moved
// off a dead node, and re-announced by the next leader.
func TestLayer2(t *testing.T) {
	ctx := context.Background()
	for _, n := range seg.nodes {
		addrs := []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: n.ip4}, {Type: v1.NodeInternalIP, Address: n.ip6}}
		if err := framework.RegisterNode(ctx, cluster.Admin, n.name, "", true, addrs); err != nil {
			t.Fatal(err)
		}
	}
	// The replicas run with the leader election deploy/ ships: the
	// failover figures of the docs are measured with it.
	leaderFlags := framework.ShippedLeaderElection(t)
	replica := func(h *host, name string) *framework.Process {
		c, err := seg.startCCM(cluster, ccmBinary, h, name)
		if err != nil {
			t.Fatal(err)
		}
		c.Args = append(c.Args, leaderFlags...)
		return framework.StartReplica(t, c)
	}
	leader := replica(seg.hosts[0], "ccm-cp1")
	framework.WaitLeader(t, leader)
	standby := replica(seg.hosts[1], "ccm-cp2")
	// A replica on another segment (cp3): its interface holds none of the
	// pool's subnets, so it must never answer.
	offSegment := replica(seg.hosts[2], "ccm-cp3")

	vips := vipsOf{}
	for i := range *services {
		framework.CreateLBService(t, cluster.Admin, "default", fmt.Sprintf("web-%d", i), func(s *v1.Service) {
			policy := v1.IPFamilyPolicyRequireDualStack
			s.Spec.IPFamilyPolicy = &policy
		})
	}
	for i := range *services {
		name := fmt.Sprintf("web-%d", i)
		vips[name] = framework.WaitIngress(t, cluster.Admin, "default", name, 2)
	}
	macs := map[string]string{}
	for _, n := range seg.nodes {
		macs[n.mac] = n.name
	}

	// where asks every VIP once: the node that answered each, and those
	// whose answer came from another node than the one whose MAC the
	// client's kernel holds for it.
	where := func(t *testing.T) (answered map[string]string, wrong []string) {
		t.Helper()
		answered = map[string]string{}
		for _, vip := range vips.all() {
			framework.Eventually(t, 10*time.Second, "an answer from "+vip, func() (bool, string) {
				name, err := seg.ask(vip, time.Second)
				answered[vip] = name
				return err == nil, fmt.Sprint(err)
			})
		}
		held, _ := seg.neighbours()
		for _, vip := range vips.all() {
			if name := answered[vip]; macs[held[vip]] != name {
				wrong = append(wrong, fmt.Sprintf("%s answered by %s, held at %q (%s)", vip, name, held[vip], macs[held[vip]]))
			}
		}
		return answered, wrong
	}
	// settled is where once every VIP is served by the node the client
	// holds for it: after a move, the last announcements of thousands of
	// VIPs may still be on their way.
	settled := func(t *testing.T) map[string]string {
		t.Helper()
		var answered map[string]string
		framework.Eventually(t, 30*time.Second, "every VIP served by the node whose MAC the client holds for it", func() (bool, string) {
			var wrong []string
			answered, wrong = where(t)
			if len(wrong) > 5 {
				wrong = append(wrong[:5], fmt.Sprintf("and %d more", len(wrong)-5))
			}
			return len(wrong) == 0, strings.Join(wrong, "; ")
		})
		return answered
	}

	// A client asks for every IPv4 VIP (of a sample at the full size) by
	// broadcast every 100 ms through the whole test; each phase then says how many MACs a VIP was named
	// with within a second, and for how long more than one.
	asked := sample(vips.all(), 128)
	told, err := tellStories(seg.client, asked, 100*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer told.end()
	defer func() {
		if c := told.count(told.start, time.Now()); c.Replies > 0 {
			for vip, from := range c.Replicas {
				if slices.Contains(from, seg.hosts[2].mac) {
					t.Errorf("the replica on another segment answered for %s", vip)
				}
			}
		}
	}()
	var phases []string
	phase := func(name string, from time.Time) {
		c := told.count(from, time.Now())
		phases = append(phases, fmt.Sprintf("%s: at most %d MACs for a VIP in a second, two stories at once for %s at most %s", name, c.Worst, c.Longest.Round(time.Millisecond), c.Example))
		// One convergence: each replica judges a node on its own probes
		// (their rounds up to an interval, 500 ms, apart), and a health
		// verdict or a Service's status then takes less than a second
		// to reach its answers.
		if c.Longest > 1500*time.Millisecond {
			t.Errorf("%s: the replicas named two MACs for a VIP at once for %s (%s); want no longer than one convergence", name, c.Longest, c.Example)
		}
	}
	defer func() { t.Logf("distinct MACs per VIP per second, by phase:\n%s", strings.Join(phases, "\n")) }()

	t.Run("each VIP is answered with one node's MAC and served there, over several nodes", func(t *testing.T) {
		// A node is a candidate once its health checks pass: until the
		// last one's do, the VIPs may all be on the first.
		var placed map[string]string
		perNode := map[string]int{}
		framework.Eventually(t, 30*time.Second, "the VIPs spread over the nodes", func() (bool, string) {
			placed = settled(t)
			clear(perNode)
			for _, n := range placed {
				perNode[n]++
			}
			return len(perNode) >= 2, fmt.Sprintf("every VIP on %v", perNode)
		})
		t.Logf("%d VIPs (%d IPv4 by ARP, %d IPv6 by NDP) on nodes %v", 2**services, *services, *services, perNode)
		// The leader's status page names, for each VIP, the node the
		// client found answering, with its MAC.
		var st provider.Status
		if err := seg.hosts[0].ns.GetJSON("http://127.0.0.1:"+statusPort+"/status", &st); err != nil {
			t.Fatal(err)
		}
		said := map[string]*provider.L2Answer{}
		for _, v := range st.VIPs {
			said[v.Address] = v.AnsweredBy
		}
		for vip, name := range placed {
			if a := said[vip]; a == nil || a.Node != name || a.MAC != seg.nodeNamed(name).mac || a.Interface != "eth0" {
				t.Errorf("the status page says %s is answered by %+v; the client found %s (%s) on eth0", vip, a, name, seg.nodeNamed(name).mac)
			}
		}
	})

	t.Run("no answer for an address nobody holds; both replicas answer each VIP, alike", func(t *testing.T) {
		// The pools' last addresses, which no Service gets below a
		// thousand.
		for _, free := range []string{"10.249.7.254", "fd00:249::1:fffe"} {
			if name, err := seg.ask(free, 2*time.Second); err == nil {
				t.Errorf("%s, held by no Service, answered by %s", free, name)
			}
			if held, states := seg.neighbours(); held[free] != "" {
				t.Errorf("the client holds %s (%s) for %s, held by no Service", held[free], states[free], free)
			}
		}
		from := time.Now()
		time.Sleep(2 * time.Second)
		c := told.count(from, time.Now())
		replicas := []string{seg.hosts[0].mac, seg.hosts[1].mac}
		slices.Sort(replicas)
		for _, vip := range asked {
			if !strings.Contains(vip, ":") {
				got := slices.Sorted(slices.Values(c.Replicas[netip.MustParseAddr(vip)]))
				if !slices.Equal(got, replicas) {
					t.Errorf("%s answered from %v; want both replicas' hosts %v", vip, got, replicas)
				}
			}
		}
		if c.Worst != 1 {
			t.Errorf("in steady state a VIP was named with %d MACs within a second: %s", c.Worst, c.Example)
		}
		phase("steady, two replicas answering", from)
	})

	t.Run("a dead node's VIPs move within seconds, the client keeps connecting", func(t *testing.T) {
		placed := settled(t)
		from := time.Now()
		vip := vips["web-0"][0]
		victim := seg.nodeNamed(placed[vip])
		p := probeAll([]string{vip}, 50*time.Millisecond)
		time.Sleep(time.Second)
		// The node dies: its link goes down, so its health check fails
		// and frames to its MAC go nowhere.
		died := time.Now()
		if _, err := victim.ns.IP("link", "set", "eth0", "down"); err != nil {
			t.Fatal(err)
		}
		framework.Eventually(t, 15*time.Second, vip+" served by another node", func() (bool, string) {
			name, err := seg.ask(vip, 300*time.Millisecond)
			return err == nil && name != victim.name, fmt.Sprintf("%q %v", name, err)
		})
		moved := time.Since(died)
		time.Sleep(time.Second)
		worst := p.end()
		gap := worst.gap
		t.Logf("%s left %s: served elsewhere %.2f s after the node died; %d of %d connections failed, longest gap %.2f s",
			vip, victim.name, moved.Seconds(), worst.failed, worst.total, gap.Seconds())
		if gap > 5*time.Second {
			t.Errorf("the client could not connect for %.2f s; want the VIP moved within a few seconds", gap.Seconds())
		}
		after := settled(t)
		for v, n := range placed {
			if n != victim.name && after[v] != n {
				t.Errorf("%s moved from %s to %s, though %s is alive", v, n, after[v], n)
			}
			if after[v] == victim.name {
				t.Errorf("%s still on the dead %s", v, victim.name)
			}
		}
		if _, err := victim.ns.IP("link", "set", "eth0", "up"); err != nil {
			t.Fatal(err)
		}
		framework.Eventually(t, 15*time.Second, victim.name+" carries its VIPs again", func() (bool, string) {
			name, err := seg.ask(vip, 300*time.Millisecond)
			return err == nil && name == victim.name, fmt.Sprintf("%q %v", name, err)
		})
		if back := settled(t); back[vip] != victim.name {
			t.Errorf("%s on %s after %s came back", vip, back[vip], victim.name)
		}
		phase("a node dying and coming back", from)
	})

	t.Run("a node's health check flaps: its VIPs leave and come back, one story at a time", func(t *testing.T) {
		placed := settled(t)
		from := time.Now()
		flapper := seg.nodeNamed(placed[vips["web-0"][0]])
		for range 2 {
			seg.healthz[flapper.name].Close()
			time.Sleep(2 * time.Second)
			if err := seg.startHealthz(flapper); err != nil {
				t.Fatal(err)
			}
			time.Sleep(3 * time.Second)
		}
		if back := settled(t); back[vips["web-0"][0]] != flapper.name {
			t.Errorf("%s on %s after %s's health check came back", vips["web-0"][0], back[vips["web-0"][0]], flapper.name)
		}
		phase("a health check flapping twice", from)
	})

	t.Run("spoofed ARP for a node moves none of its VIPs", func(t *testing.T) {
		placed := settled(t)
		// n2's MAC is learned (n1's is in the inventory): an attacker on
		// the segment says n2's address is at its own MAC, to everyone
		// and to each replica, for longer than a question's window.
		const attacker = "02:49:00:00:00:66"
		victim := seg.nodes[1]
		// The hosts' kernels would take the spoofed frames too, and then
		// send the replicas' health checks of the victim to the attacker:
		// that is the host's ARP cache, not the CCM's learning (which
		// reads its own socket). Pin the victim there, as a hardened
		// control-plane host would, so that only the CCM is tested.
		for _, h := range seg.hosts {
			if _, err := h.ns.IP("neigh", "replace", victim.ip4, "lladdr", victim.mac, "nud", "permanent", "dev", "eth0"); err != nil {
				t.Fatal(err)
			}
		}
		defer func() {
			for _, h := range seg.hosts {
				h.ns.IP("neigh", "del", victim.ip4, "dev", "eth0")
			}
		}()
		done := make(chan error, 1)
		go func() {
			done <- spoofARP(seg.client, victim.ip4, attacker, []string{seg.hosts[0].mac, seg.hosts[1].mac}, 4*time.Second)
		}()
		framework.Consistently(t, 6*time.Second, "no client entry names the attacker", func() (bool, string) {
			held, _ := seg.neighbours()
			for _, vip := range vips.all() {
				if held[vip] == attacker {
					return false, vip + " is held at the attacker's MAC"
				}
			}
			return true, ""
		})
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		after := settled(t)
		for v, n := range placed {
			if after[v] != n {
				t.Errorf("%s moved from %s to %s", v, n, after[v])
			}
		}
	})

	t.Run("the dashboard's layer 2 row and alerts, with Prometheus scraping the replicas", func(t *testing.T) {
		var targets []string
		for _, r := range []struct {
			p  *framework.Process
			ns *framework.Netns
		}{{leader, seg.hosts[0].ns}, {offSegment, seg.hosts[2].ns}} {
			addr, err := r.ns.ForwardOutOf(r.p.SecurePort)
			if err != nil {
				t.Fatal(err)
			}
			targets = append(targets, addr)
		}
		alerts := filepath.Join(framework.RepoRoot(), framework.AlertsFile)
		prom := framework.StartPrometheus(t, cluster, targets, alerts)
		port, _ := strconv.Atoi(targets[0][strings.LastIndex(targets[0], ":")+1:])
		metrics, err := cluster.AdminGet(&framework.Process{Name: leader.Name, SecurePort: port}, "/metrics", 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		exported := framework.ExportedNames(string(metrics))
		if queries := framework.CheckDashboard(t, prom, exported, func(row string) bool { return row == "Layer 2" }); queries < 4 {
			t.Errorf("the layer 2 row has %d queries; did it fail to parse?", queries)
		}
		l2Alerts := func() map[string]framework.AlertRule {
			out := map[string]framework.AlertRule{}
			for _, r := range prom.Rules(t) {
				if strings.HasPrefix(r.Name, "BaremetalL2") {
					out[r.Name] = r
				}
			}
			return out
		}
		rules := l2Alerts()
		if len(rules) != 2 {
			t.Fatalf("Prometheus loaded the layer 2 alerts %v; want 2", rules)
		}
		for _, r := range rules {
			for _, name := range framework.MetricNames(r.Query) {
				if !exported[name] {
					t.Errorf("alert %s: %s is not a metric the CCM exports (%s)", r.Name, name, r.Query)
				}
			}
			if r.Health != "ok" || r.State != "inactive" {
				t.Errorf("alert %s: %s, %s %s; want ok and inactive on a segment where every VIP is answered", r.Name, r.State, r.Health, r.LastError)
			}
		}
		// The replica on cp3 restarts on a host whose interface has another
		// name: it cannot open the pool's, and the alert says so.
		offSegment.Stop()
		for _, args := range [][]string{{"link", "set", "eth0", "down"}, {"link", "set", "eth0", "name", "lan0"}, {"link", "set", "lan0", "up"}} {
			if _, err := seg.hosts[2].ns.IP(args...); err != nil {
				t.Fatal(err)
			}
		}
		defer func() {
			for _, args := range [][]string{{"link", "set", "lan0", "down"}, {"link", "set", "lan0", "name", "eth0"}, {"link", "set", "eth0", "up"}} {
				seg.hosts[2].ns.IP(args...)
			}
		}()
		offSegment = replica(seg.hosts[2], "ccm-cp3-without-eth0")
		addr, err := seg.hosts[2].ns.ForwardOutOf(offSegment.SecurePort)
		if err != nil {
			t.Fatal(err)
		}
		prom = framework.StartPrometheus(t, cluster, []string{targets[0], addr}, alerts)
		framework.Eventually(t, 60*time.Second, "BaremetalL2InterfaceNotOpen pending for the replica without eth0", func() (bool, string) {
			r := l2Alerts()["BaremetalL2InterfaceNotOpen"]
			return r.State == "pending", fmt.Sprintf("%+v", r)
		})
		if r := l2Alerts()["BaremetalL2VIPsUnanswered"]; r.State != "inactive" {
			t.Errorf("BaremetalL2VIPsUnanswered is %s while cp1's replica answers every VIP", r.State)
		}
		offSegment.Stop()
	})

	t.Run("the leader's link bounces: every VIP is answered again", func(t *testing.T) {
		settled(t)
		h := seg.hosts[0] // the leader's
		if !leader.LogContains("Answering ARP and NDP") {
			t.Fatal("ccm-cp1 does not answer: it is not the leader")
		}
		// While its link is down (its host as good as powered off, seen
		// from the segment) the other replica answers: a client that
		// forgets every entry then is answered at once.
		from := time.Now()
		all := probeAll(sample(vips.all(), 64), 100*time.Millisecond)
		if _, err := h.ns.IP("link", "set", "eth0", "down"); err != nil {
			t.Fatal(err)
		}
		flushClient(t)
		time.Sleep(3 * time.Second)
		worst := all.end()
		t.Logf("with the leader's link down, the longest a VIP went unanswered: %s (%s)", worst.gap.Round(10*time.Millisecond), worst.vip)
		if worst.gap > 2*time.Second {
			t.Errorf("%s went unanswered for %s while a replica's link was down; want at most 2 s", worst.vip, worst.gap)
		}
		phase("a replica's link down", from)
		if _, err := h.ns.IP("link", "set", "eth0", "up"); err != nil {
			t.Fatal(err)
		}
		up := time.Now()
		// The client forgets what it knew: only answers can teach it.
		flushClient(t)
		framework.Eventually(t, 20*time.Second, "every VIP answered after the bounce", func() (bool, string) {
			var missing []string
			for _, vip := range vips.all() {
				if _, err := seg.ask(vip, time.Second); err != nil {
					missing = append(missing, vip)
				}
			}
			return len(missing) == 0, fmt.Sprintf("%d unanswered, e.g. %v", len(missing), missing[:min(3, len(missing))])
		})
		t.Logf("every VIP answered %.1f s after the leader's link came back", time.Since(up).Seconds())
		settled(t)
	})

	t.Run("a replica killed: every VIP answered all along, to a client that forgot them all", func(t *testing.T) {
		settled(t)
		from := time.Now()
		all := probeAll(sample(vips.all(), 64), 100*time.Millisecond)
		time.Sleep(time.Second)
		leader.Kill()
		// The client forgets what it knew: only answers can teach it.
		flushClient(t)
		time.Sleep(5 * time.Second)
		worst := all.end()
		t.Logf("after the leader's kill -9, the longest a VIP went unanswered: %s (%s); no replica took the Lease yet (%v)", worst.gap.Round(10*time.Millisecond), worst.vip, leaderFlags)
		if worst.gap > 2*time.Second {
			t.Errorf("%s went unanswered for %s after a replica's death; want at most 2 s", worst.vip, worst.gap)
		}
		phase("a replica killed", from)
	})

	t.Run("a replica that starts corrects every client entry", func(t *testing.T) {
		placed := settled(t)
		// Wrong entries for every VIP, as a client would hold after a
		// change it missed: only announcements can correct them, as
		// nothing is sent to the VIPs.
		var batch strings.Builder
		for _, vip := range vips.all() {
			fmt.Fprintf(&batch, "neigh replace %s lladdr 02:49:00:00:00:ee dev eth0 nud stale\n", vip)
		}
		file := filepath.Join(seg.dir, "wrong-entries")
		if err := os.WriteFile(file, []byte(batch.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := seg.client.ns.IP("-batch", file); err != nil {
			t.Fatal(err)
		}
		started := time.Now()
		leader = replica(seg.hosts[0], "ccm-cp1-again")
		framework.Eventually(t, 30*time.Second, "every client entry naming its node again", func() (bool, string) {
			var wrong []string
			held, _ := seg.neighbours()
			for _, vip := range vips.all() {
				if mac := held[vip]; macs[mac] != placed[vip] {
					wrong = append(wrong, fmt.Sprintf("%s at %s", vip, mac))
				}
			}
			if len(wrong) > 5 {
				wrong = append(wrong[:5], fmt.Sprintf("and %d more", len(wrong)-5))
			}
			return len(wrong) == 0, strings.Join(wrong, ", ")
		})
		t.Logf("every entry corrected %.1f s after a replica started", time.Since(started).Seconds())
		settled(t)
		phase("a replica starting", started)
	})

	t.Run("the API server away: every VIP answered all along, and changes followed after", func(t *testing.T) {
		settled(t)
		from := time.Now()
		all := probeAll(sample(vips.all(), 64), 100*time.Millisecond)
		running := []*framework.Process{leader, standby}
		logged := make([]int, len(running))
		for i, p := range running {
			logged[i] = p.LogSize()
		}
		restart, err := cluster.StopAPIServer()
		if err != nil {
			t.Fatal(err)
		}
		stopped := time.Now()
		time.Sleep(*outage / 2)
		// The client forgets what it knew halfway, past the leader's renew
		// deadline: every answer comes from a replica without the API.
		flushClient(t)
		time.Sleep(*outage / 2)
		if err := restart(); err != nil {
			t.Fatal(err)
		}
		away := time.Since(stopped)
		// Until it is ready, the restarted API server refuses what its RBAC
		// authorizer has not caught up with.
		time.Sleep(2 * time.Second)
		for i, p := range running {
			p.ExcuseRefusals(logged[i], p.LogSize())
		}
		worst := all.end()
		t.Logf("kube-apiserver away for %s (%v): the longest a VIP went unanswered: %s (%s)", away.Round(time.Second), leaderFlags, worst.gap.Round(10*time.Millisecond), worst.vip)
		if worst.gap > 2*time.Second {
			t.Errorf("%s went unanswered for %s while the API server was away; want answers all along", worst.vip, worst.gap)
		}
		phase("the API server away", from)
		// Changes are followed again: a new Service's VIPs are answered
		// once a replica leads (the Lease of one that gave up expires
		// first).
		framework.CreateLBService(t, cluster.Admin, "default", "after-outage", func(s *v1.Service) {
			policy := v1.IPFamilyPolicyRequireDualStack
			s.Spec.IPFamilyPolicy = &policy
		})
		for _, vip := range framework.WaitIngress(t, cluster.Admin, "default", "after-outage", 2) {
			framework.Eventually(t, 30*time.Second, "an answer from "+vip+", a Service's created after the outage", func() (bool, string) {
				name, err := seg.ask(vip, time.Second)
				return err == nil, fmt.Sprint(name, err)
			})
		}
	})
}

// sample is up to n of vips, spread over the list: at the full size a
// client asking for every VIP ten times a second would be a flood the
// segment's hosts are not sized for.
func sample(vips []string, n int) []string {
	if len(vips) <= n {
		return vips
	}
	out := make([]string, 0, n)
	for i := range n {
		out = append(out, vips[i*len(vips)/n])
	}
	return out
}

// flushClient makes the client forget every neighbour entry it holds.
func flushClient(t *testing.T) {
	t.Helper()
	for _, family := range []string{"-4", "-6"} {
		if _, err := seg.client.ns.IP(family, "neigh", "flush", "dev", "eth0"); err != nil {
			t.Fatal(err)
		}
	}
}

// probeAll connects to each VIP every period from the client, each on its
// own, and keeps the longest time each went without an answer, and how
// many connections were tried and failed.
type allProbes struct {
	stop          chan struct{}
	wg            sync.WaitGroup
	mu            sync.Mutex
	gaps          map[string]time.Duration
	lastOK        map[string]time.Time
	total, failed int
}

// worstGap is the VIP that went longest without an answer, and the
// connections of all the probes.
type worstGap struct {
	vip           string
	gap           time.Duration
	total, failed int
}

func probeAll(vips []string, period time.Duration) *allProbes {
	p := &allProbes{stop: make(chan struct{}), gaps: map[string]time.Duration{}, lastOK: map[string]time.Time{}}
	for _, vip := range vips {
		p.lastOK[vip] = time.Now()
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			for {
				select {
				case <-p.stop:
					return
				case <-time.After(period):
				}
				_, err := seg.ask(vip, 300*time.Millisecond)
				p.mu.Lock()
				p.total++
				if err != nil {
					p.failed++
				} else {
					p.gaps[vip] = max(p.gaps[vip], time.Since(p.lastOK[vip]))
					p.lastOK[vip] = time.Now()
				}
				p.mu.Unlock()
			}
		}()
	}
	return p
}

// end stops the probes and returns the longest gap of any VIP, a VIP
// unanswered at the end counting up to then.
func (p *allProbes) end() worstGap {
	close(p.stop)
	p.wg.Wait()
	w := worstGap{total: p.total, failed: p.failed}
	for vip, last := range p.lastOK {
		if gap := max(p.gaps[vip], time.Since(last)); gap > w.gap {
			w.vip, w.gap = vip, gap
		}
	}
	return w
}

// roomForNeighbours makes the kernel's neighbour tables hold n entries per
// family: the client holds one per VIP, and Linux keeps 1,024 by default
// (gc_thresh3, one table for every namespace, so only the host's setting
// counts). Raised only when n needs it, and put back afterwards.
func roomForNeighbours(n int) (restore func(), err error) {
	var undo []string
	restore = func() {
		for _, kv := range undo {
			exec.Command("sysctl", "-qw", kv).Run()
		}
	}
	for _, family := range []string{"ipv4", "ipv6"} {
		for i, level := range []int{n / 4, n / 2, n} {
			key := fmt.Sprintf("net.%s.neigh.default.gc_thresh%d", family, i+1)
			out, err := exec.Command("sysctl", "-n", key).Output()
			if err != nil {
				restore()
				return nil, fmt.Errorf("reading %s: %w", key, err)
			}
			old, _ := strconv.Atoi(strings.TrimSpace(string(out)))
			if old >= level {
				continue
			}
			if err := exec.Command("sysctl", "-qw", fmt.Sprintf("%s=%d", key, level)).Run(); err != nil {
				restore()
				return nil, fmt.Errorf("raising %s to %d: %w", key, level, err)
			}
			undo = append(undo, fmt.Sprintf("%s=%d", key, old))
		}
	}
	return restore, nil
}
