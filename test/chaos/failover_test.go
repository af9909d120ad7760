package chaos

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/test/framework"
)

// routeWatch samples the peer's table as fast as its CLI answers and
// records, for every path it has seen, how long it was ever missing.
type routeWatch struct {
	stop    chan struct{}
	done    chan struct{}
	mu      sync.Mutex
	samples int
	// slowest is the longest time between two samples: gaps shorter than
	// it may go unseen.
	slowest time.Duration
	longest time.Duration
	worst   string
	missing map[string]time.Time // path → when it was first seen missing
	known   map[string]bool
}

func watchRoutes(t *testing.T, peer *framework.GoBGPD) *routeWatch {
	w := &routeWatch{stop: make(chan struct{}), done: make(chan struct{}), missing: map[string]time.Time{}, known: map[string]bool{}}
	go func() {
		defer close(w.done)
		last := time.Now()
		for {
			select {
			case <-w.stop:
				return
			default:
			}
			rib, err := ribPaths(peer)
			now := time.Now()
			if err != nil {
				t.Errorf("reading the peer's table: %v", err)
				return
			}
			w.mu.Lock()
			w.samples++
			w.slowest = max(w.slowest, now.Sub(last))
			last = now
			present := map[string]bool{}
			for prefix, hops := range rib {
				for _, h := range hops {
					present[prefix+" via "+h] = true
				}
			}
			for path := range present {
				if since, ok := w.missing[path]; ok {
					if gap := now.Sub(since); gap > w.longest {
						w.longest, w.worst = gap, path
					}
					delete(w.missing, path)
				}
				w.known[path] = true
			}
			for path := range w.known {
				if !present[path] {
					if _, ok := w.missing[path]; !ok {
						w.missing[path] = now
					}
				}
			}
			w.mu.Unlock()
			time.Sleep(20 * time.Millisecond)
		}
	}()
	return w
}

// end stops the watch and returns what it saw: the longest gap of any
// path, and the paths missing now.
func (w *routeWatch) end() (longest time.Duration, worst string, missingNow []string) {
	close(w.stop)
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	for path, since := range w.missing {
		missingNow = append(missingNow, path)
		if gap := time.Since(since); gap > longest {
			longest, worst = gap, path
		}
	}
	if w.longest > longest {
		longest, worst = w.longest, w.worst
	}
	return longest, worst, missingNow
}

// The replicas run as on two hosts, each with its own address, as
// deploy/ spreads them: the peer sees each as a neighbour of its own.
func TestLeaderFailoverUnderLoad(t *testing.T) {
	const ns = "failover"
	const standbyAddress = "127.0.0.3"
	s := newSite(t, ns, standbyAddress)
	hops := readyNodes(t, "fo", 120, 3)
	log := watchAddresses(t, ns)
	first := *services / 2
	if err := createMixed(ns, 0, first); err != nil {
		t.Fatal(err)
	}
	leader := s.StartCCM("ccm-a", fastArgs()...)
	standby := s.StartReplicaFrom("ccm-b", standbyAddress, fastArgs()...)
	t.Cleanup(func() { deleteAll(t, ns) })
	checkConverged(t, s, first, hops)
	framework.Eventually(t, time.Minute, "the standby has its own session with the peer", func() (bool, string) {
		return standby.LogContains("BGP session state changed", "established"), "no session"
	})

	routes := watchRoutes(t, s.peer)
	created := make(chan error, 1)
	go func() { created <- createMixed(ns, first, *services) }()
	time.Sleep(500 * time.Millisecond)
	leader.Kill()
	killed := time.Now()
	framework.WaitLeader(t, standby)
	t.Logf("ccm-b took over %s after ccm-a was killed while Services were created", time.Since(killed).Round(100*time.Millisecond))
	if err := <-created; err != nil {
		t.Fatal(err)
	}
	checkConverged(t, s, *services, hops)
	longest, worst, missing := routes.end()
	t.Logf("%d Services, %d of them created during the failover; the peer's table was sampled %d times, at most %s apart; "+
		"longest time any route was missing: %s %s", *services, *services-first, routes.samples, routes.slowest.Round(time.Millisecond), longest, worst)
	if len(missing) > 0 {
		t.Errorf("%d routes are missing at the peer after the failover, e.g. %s", len(missing), missing[0])
	}
	if longest > 0 {
		t.Errorf("a route was missing at the peer for %s during the failover: %s", longest, worst)
	}
	if changed := log.changed(); len(changed) > 0 {
		t.Errorf("Services changed address in the failover:\n%s", strings.Join(changed, "\n"))
	}
	deleteAll(t, ns)
}

func TestAPIServerOutage(t *testing.T) {
	const ns = "outage"
	ctx := context.Background()
	s := newSite(t, ns)
	hops := readyNodes(t, "out", 130, 3)
	log := watchAddresses(t, ns)
	svcs := admin().CoreV1().Services(ns)
	n := *services / 2
	if err := createMixed(ns, 0, n); err != nil {
		t.Fatal(err)
	}
	// With the leader election of deploy/: the leader keeps trying to renew
	// its Lease for the renew deadline before it gives up.
	leaderFlags := framework.ShippedLeaderElection(t)
	// Its Lease outlives it by the shipped lease duration: the next test's
	// CCM must not have to wait for it.
	t.Cleanup(func() {
		admin().CoordinationV1().Leases("kube-system").Delete(context.Background(), "cloud-controller-manager", metav1.DeleteOptions{})
	})
	ccm := s.StartCCM("ccm", append(fastArgs(), leaderFlags...)...)
	t.Cleanup(func() { deleteAll(t, ns) })
	checkConverged(t, s, n, hops)
	before, err := ribPaths(s.peer)
	if err != nil {
		t.Fatal(err)
	}
	uptime := sessionUptime(t, s.peer)

	stopped, logged := time.Now(), ccm.LogSize()
	restart, err := suite.Cluster.StopAPIServer()
	if err != nil {
		t.Fatal(err)
	}
	routes := watchRoutes(t, s.peer)
	time.Sleep(*outage)
	if err := restart(); err != nil {
		t.Fatal(err)
	}
	away := time.Since(stopped)
	// Until it is ready, the restarted API server refuses what its RBAC
	// authorizer has not caught up with; give it a moment more.
	time.Sleep(2 * time.Second)
	ccm.ExcuseRefusals(logged, ccm.LogSize())
	longest, worst, missing := routes.end()
	t.Logf("kube-apiserver was away for %s (%v); the peer's table was sampled %d times; longest time any route was missing: %s %s",
		away.Round(100*time.Millisecond), leaderFlags, routes.samples, longest, worst)
	if longest > 0 || len(missing) > 0 {
		t.Errorf("routes were withdrawn while the API server was away: %s missing for %s; missing at the end: %d", worst, longest, len(missing))
	}
	if after := sessionUptime(t, s.peer); after != uptime {
		t.Errorf("the BGP session was reset while the API server was away: %s, then %s", uptime, after)
	}
	if done, err := ccm.Exited(); done {
		t.Fatalf("the CCM exited during the outage (%v):\n%s", err, framework.Tail(ccm.Logs(), 40))
	}

	// It recovers without a restart: the same process takes new work.
	framework.CreateLBService(t, admin(), ns, "after", inPool)
	framework.Eventually(t, 2*time.Minute, "the Service created after the outage has an address", func() (bool, string) {
		ips := framework.Ingress(t, admin(), ns, "after")
		return len(ips) == 1, fmt.Sprint(ips)
	})
	if err := svcs.Delete(ctx, "svc-2", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	checkConverged(t, s, n, hops)
	if rib, _ := ribPaths(s.peer); len(rib) != len(before) {
		t.Errorf("the peer has %d prefixes after the outage, one Service added and one deleted: want %d", len(rib), len(before))
	}
	if got := strings.Count(ccm.Logs(), "Successfully acquired lease"); got != 1 {
		t.Errorf("the CCM acquired its Lease %d times: it lost it in the outage", got)
	}
	if changed := log.changed(); len(changed) > 0 {
		t.Errorf("Services changed address across the outage:\n%s", strings.Join(changed, "\n"))
	}
	deleteAll(t, ns)
}
