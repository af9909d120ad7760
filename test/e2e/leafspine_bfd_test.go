package e2e

import (
	"encoding/json"
	"flag"
	"fmt"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/test/framework"
)

var leafSpineBFDRuns = flag.Int("leafspine-bfd-runs", 1, "runs of each failure in TestLeafSpineBFD (docs/network/topologies.md reports 5)")

// TestLeafSpineBFD runs the leaf-spine site of docs/network/topologies.md,
// whose replicas peer with both ToRs' loopbacks by multihop eBGP with
// multihop BFD (RFC 5883) on both sides, and fails rack 1's replica: its
// host's link cut, then (separately) its process frozen. Each time both
// ToRs must drop that replica's session within about a second (its BFD
// detection time, 300ms × 3), the other replica keeps every VIP at every
// router (no route of the VIP deleted at a ToR or the spine), and a client
// behind the spine connecting every 50 ms meets no failure. The figures
// are logged per ToR; -leafspine-bfd-runs repeats each failure.
func TestLeafSpineBFD(t *testing.T) {
	site := newLeafSpine(t, "lb", "leafspine-bfd", nil)
	racks, tors := site.racks, site.tors
	both := map[*rack][]*node{racks[0]: racks[0].nodes, racks[1]: racks[1].nodes}
	site.carrying("each ToR has the VIP via its own rack's nodes", both)
	victim, other := racks[0], racks[1]
	replica := site.replicas[0]
	cps := []string{victim.cpIP, other.cpIP}

	// sessionUp is whether tor has an established session with the
	// replica at addr.
	sessionUp := func(tor *framework.FRR, addr string) bool {
		out, _ := tor.Vtysh("show bgp ipv4 unicast summary json")
		var sum struct {
			Peers map[string]struct {
				State string `json:"state"`
			} `json:"peers"`
		}
		json.Unmarshal([]byte(out), &sum)
		return sum.Peers[addr].State == "Established"
	}
	healthy := func(what string) {
		t.Helper()
		framework.Eventually(t, 60*time.Second, what, func() (bool, string) {
			for _, rk := range racks {
				up, out := tors[rk].BFDUp(cps...)
				if up != 2 {
					return false, fmt.Sprintf("%s has %d of the replicas' BFD sessions up:\n%s", rk.tor.Name, up, out)
				}
				for _, cp := range cps {
					if !sessionUp(tors[rk], cp) {
						return false, fmt.Sprintf("%s has no session with %s", rk.tor.Name, cp)
					}
				}
			}
			return true, ""
		})
		site.carrying(what+": each ToR has the VIP via its own rack's nodes", both)
	}
	healthy("both replicas' BFD and BGP sessions up at both ToRs")

	monitors := map[string]*framework.Process{"spine": framework.MonitorRoutes(t, site.spine)}
	for _, rk := range racks {
		monitors[rk.tor.Name] = framework.MonitorRoutes(t, rk.tor)
	}
	// Connections from behind the spine, every 50 ms, all the while.
	var mu sync.Mutex
	var probes, failed int
	var firstErr string
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			_, err := ask(site.client, "", site.vip+":80")
			mu.Lock()
			probes++
			if err != nil {
				failed++
				if firstErr == "" {
					firstErr = err.Error()
				}
			}
			mu.Unlock()
		}
	}()

	cp := victim.cp
	failures := []struct {
		name     string
		do, undo func()
		figures  map[string][]time.Duration
	}{
		{name: "link cut", do: func() { site.l.ip(cp, "link", "set", "eth0", "down") }, undo: func() {
			site.l.ip(cp, "link", "set", "eth0", "up")
			site.l.ip(cp, "route", "replace", "default", "via", strings.TrimSuffix(victim.cpIP, ".10")+".1")
		}},
		{name: "process frozen", do: func() { syscall.Kill(replica.PID(), syscall.SIGSTOP) }, undo: func() { syscall.Kill(replica.PID(), syscall.SIGCONT) }},
	}
	for i := range failures {
		failures[i].figures = map[string][]time.Duration{}
	}
	for run := 1; run <= *leafSpineBFDRuns; run++ {
		for i := range failures {
			f := &failures[i]
			from := map[string]int{}
			for name, m := range monitors {
				from[name] = m.LogSize()
			}
			start := time.Now()
			f.do()
			// Each ToR drops the replica's session (and its paths).
			var wg sync.WaitGroup
			for _, rk := range racks {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for time.Since(start) < 15*time.Second {
						if !sessionUp(tors[rk], victim.cpIP) {
							mu.Lock()
							f.figures[rk.tor.Name] = append(f.figures[rk.tor.Name], time.Since(start))
							mu.Unlock()
							return
						}
						time.Sleep(20 * time.Millisecond)
					}
				}()
			}
			wg.Wait()
			// The other replica carries every VIP at every router.
			site.carrying(fmt.Sprintf("%s, run %d: the other replica's paths", f.name, run), both)
			f.undo()
			for name, m := range monitors {
				for _, ch := range vipRouteChanges(m.Logs()[from[name]:], []string{site.vip}) {
					if strings.HasPrefix(ch.line, "Deleted") {
						t.Errorf("%s, run %d: %s deleted the VIP's route: %q", f.name, run, name, ch.line)
					}
				}
			}
			healthy(fmt.Sprintf("%s, run %d: the replica back at both ToRs", f.name, run))
		}
	}
	close(stop)
	<-done
	mu.Lock()
	defer mu.Unlock()
	if failed > 0 {
		t.Errorf("%d of %d connections to the VIP failed (first: %s)", failed, probes, firstErr)
	}
	t.Logf("%d connections to the VIP, %d failed", probes, failed)
	for _, f := range failures {
		for _, rk := range racks {
			got := f.figures[rk.tor.Name]
			if len(got) != *leafSpineBFDRuns {
				t.Errorf("%s: %s dropped the replica's session in %d of %d runs within 15 s", f.name, rk.tor.Name, len(got), *leafSpineBFDRuns)
				continue
			}
			slices.Sort(got)
			t.Logf("%s: %s dropped the replica's session after %v (runs, sorted)", f.name, rk.tor.Name, got)
			if worst := got[len(got)-1]; worst > 2*time.Second {
				t.Errorf("%s: %s took %v to drop the replica's session, want about a second (BFD's 300ms × 3)", f.name, rk.tor.Name, worst)
			}
		}
	}
}
