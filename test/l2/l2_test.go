package l2

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
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
	first, err := seg.startCCM(cluster, ccmBinary, seg.hosts[0], "ccm-cp1")
	if err != nil {
		t.Fatal(err)
	}
	leader := framework.StartReplica(t, first)
	framework.WaitLeader(t, leader)
	second, err := seg.startCCM(cluster, ccmBinary, seg.hosts[1], "ccm-cp2")
	if err != nil {
		t.Fatal(err)
	}
	standby := framework.StartReplica(t, second)

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

	t.Run("each VIP is answered with one node's MAC and served there, over several nodes", func(t *testing.T) {
		placed := settled(t)
		perNode := map[string]int{}
		for _, n := range placed {
			perNode[n]++
		}
		t.Logf("%d VIPs (%d IPv4 by ARP, %d IPv6 by NDP) on nodes %v", 2**services, *services, *services, perNode)
		if len(perNode) < 2 {
			t.Errorf("every VIP on %v; want them spread over the nodes", perNode)
		}
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

	t.Run("no answer for an address nobody holds, none from the standby", func(t *testing.T) {
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
		if standby.LogContains("Answering ARP and NDP") {
			t.Error("the standby answers ARP and NDP")
		}
	})

	t.Run("a dead node's VIPs move within seconds, the client keeps connecting", func(t *testing.T) {
		placed := settled(t)
		vip := vips["web-0"][0]
		victim := seg.nodeNamed(placed[vip])
		p := startProbes(vip)
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
		total, failed, gap := p.end()
		t.Logf("%s left %s: served elsewhere %.2f s after the node died; %d of %d connections failed, longest gap %.2f s",
			vip, victim.name, moved.Seconds(), failed, total, gap.Seconds())
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

	t.Run("the leader's link bounces: every VIP is answered again", func(t *testing.T) {
		settled(t)
		h := seg.hosts[0] // the leader's
		if !leader.LogContains("Answering ARP and NDP") {
			t.Fatal("ccm-cp1 does not answer: it is not the leader")
		}
		if _, err := h.ns.IP("link", "set", "eth0", "down"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Second)
		if _, err := h.ns.IP("link", "set", "eth0", "up"); err != nil {
			t.Fatal(err)
		}
		up := time.Now()
		// The client forgets what it knew: only answers can teach it.
		for _, family := range []string{"-4", "-6"} {
			if _, err := seg.client.ns.IP(family, "neigh", "flush", "dev", "eth0"); err != nil {
				t.Fatal(err)
			}
		}
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

	t.Run("the next leader corrects every client entry", func(t *testing.T) {
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
		killed := time.Now()
		leader.Kill()
		framework.WaitLeader(t, standby)
		led := time.Since(killed)
		framework.Eventually(t, 20*time.Second, "every client entry naming its node again", func() (bool, string) {
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
		t.Logf("the standby led %.1f s after the leader was killed; every entry corrected %.1f s after the kill", led.Seconds(), time.Since(killed).Seconds())
		settled(t)
	})
}

// probes connect to a VIP every 50 ms from the client.
type probes struct {
	mu      sync.Mutex
	stop    chan struct{}
	done    chan struct{}
	total   int
	failed  int
	lastOK  time.Time
	longest time.Duration
}

func startProbes(vip string) *probes {
	p := &probes{stop: make(chan struct{}), done: make(chan struct{}), lastOK: time.Now()}
	go func() {
		defer close(p.done)
		for {
			select {
			case <-p.stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			_, err := seg.ask(vip, 300*time.Millisecond)
			p.mu.Lock()
			p.total++
			if err != nil {
				p.failed++
			} else {
				if gap := time.Since(p.lastOK); gap > p.longest {
					p.longest = gap
				}
				p.lastOK = time.Now()
			}
			p.mu.Unlock()
		}
	}()
	return p
}

func (p *probes) end() (total, failed int, longest time.Duration) {
	close(p.stop)
	<-p.done
	return p.total, p.failed, p.longest
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
