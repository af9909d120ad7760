package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/test/framework"
)

const (
	annIPs     = "baremetal.cloudprovider.io/load-balancer-ips"
	annSharing = "baremetal.cloudprovider.io/sharing-key"
	// fast are client limits at which the CCM is not what waits.
	qpsFlags = "--kube-api-qps=200 --kube-api-burst=300 --concurrent-service-syncs=4"
)

func fastArgs() []string { return strings.Fields(qpsFlags) }

// mixedService is Service i of a large set: pairs share an address (every
// 10th with the next), every 7th is dual-stack, every 5th asks for an
// address of its own; all are in the large pool.
func mixedService(ns string, i int) *v1.Service {
	svc := framework.LBService(ns, fmt.Sprintf("svc-%d", i))
	inPool(svc)
	switch {
	case i%10 == 0 || i%10 == 1:
		svc.Annotations[annSharing] = fmt.Sprintf("pair-%d", i/10)
		svc.Spec.Ports[0].Port = int32(80 + i%10)
	case i%7 == 0:
		svc.Spec.IPFamilyPolicy = ptrTo(v1.IPFamilyPolicyRequireDualStack)
		svc.Spec.IPFamilies = []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol}
	case i%5 == 2:
		// 198.18.12.0/22 is above what the others are given.
		svc.Annotations[annIPs] = fmt.Sprintf("198.18.%d.%d", 12+i/5/256, i/5%256)
	}
	return svc
}

func ptrTo[T any](v T) *T { return &v }

// wantedIngress is how many addresses mixedService(i) gets.
func wantedIngress(svc *v1.Service) int {
	if svc.Spec.IPFamilyPolicy != nil && *svc.Spec.IPFamilyPolicy == v1.IPFamilyPolicyRequireDualStack {
		return 2
	}
	return 1
}

// addressLog records every address each Service (by UID) was ever given,
// from a watch, so that a change between two polls is not missed.
type addressLog struct {
	mu   sync.Mutex
	seen map[types.UID][]string // distinct non-empty ingress lists, in order
	name map[types.UID]string
}

func watchAddresses(t *testing.T, ns string) *addressLog {
	t.Helper()
	l := &addressLog{seen: map[types.UID][]string{}, name: map[types.UID]string{}}
	record := func(obj any) {
		svc, ok := obj.(*v1.Service)
		if !ok || len(svc.Status.LoadBalancer.Ingress) == 0 {
			return
		}
		ips := strings.Join(framework.IngressIPs(svc), ",")
		l.mu.Lock()
		defer l.mu.Unlock()
		l.name[svc.UID] = svc.Name
		if !slices.Contains(l.seen[svc.UID], ips) {
			l.seen[svc.UID] = append(l.seen[svc.UID], ips)
		}
	}
	factory := informers.NewSharedInformerFactoryWithOptions(admin(), 0, informers.WithNamespace(ns))
	factory.Core().V1().Services().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    record,
		UpdateFunc: func(_, obj any) { record(obj) },
	})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	return l
}

// changed lists the Services that were given more than one set of addresses.
func (l *addressLog) changed() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for uid, lists := range l.seen {
		if len(lists) > 1 {
			out = append(out, fmt.Sprintf("%s: %v", l.name[uid], lists))
		}
	}
	slices.Sort(out)
	return out
}

// addresses is every address a Service of that name was given.
func (l *addressLog) addresses(name string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for uid, lists := range l.seen {
		if l.name[uid] == name {
			for _, ips := range lists {
				out = append(out, strings.Split(ips, ",")...)
			}
		}
	}
	return out
}

// checkConverged waits until every Service in ns has its addresses and
// the peer has exactly those (each via all of hops), and checks that no
// address is held twice except by Services that share it.
func checkConverged(t *testing.T, s *site, want int, hops map[bool][]string) map[string]bool {
	t.Helper()
	ctx := context.Background()
	var live map[string]bool
	framework.Eventually(t, 5*time.Minute, "every Service has its addresses and the peer has exactly those", func() (bool, string) {
		list, err := admin().CoreV1().Services(s.ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		if len(list.Items) != want {
			return false, fmt.Sprintf("%d Services, want %d", len(list.Items), want)
		}
		live = map[string]bool{}
		holders, keys := map[string][]string{}, map[string][]string{}
		for _, svc := range list.Items {
			ips := framework.IngressIPs(&svc)
			if len(ips) != wantedIngress(&svc) {
				return false, fmt.Sprintf("%s has addresses %v", svc.Name, ips)
			}
			for _, ip := range ips {
				live[hostPrefix(ip)] = true
				holders[ip] = append(holders[ip], svc.Name)
				keys[ip] = append(keys[ip], svc.Annotations[annSharing])
			}
		}
		for ip, h := range holders {
			// Only the two Services of a pair, with one key, hold one address.
			if k := keys[ip]; len(h) > 1 && (len(h) > 2 || k[0] == "" || k[0] != k[1]) {
				t.Fatalf("address %s is held by %v (sharing keys %q)", ip, h, k)
			}
		}
		rib, err := ribPaths(s.peer)
		if err != nil {
			return false, err.Error()
		}
		for prefix, got := range rib {
			if !live[prefix] {
				return false, fmt.Sprintf("the peer still has %s via %v, which no Service holds", prefix, got)
			}
		}
		for prefix := range live {
			if w := hops[strings.Contains(prefix, ":")]; !slices.Equal(rib[prefix], w) {
				return false, fmt.Sprintf("the peer has %s via %v, want %v", prefix, rib[prefix], w)
			}
		}
		return true, ""
	})
	return live
}

func TestRestartStorm(t *testing.T) {
	const ns = "storm"
	ctx := context.Background()
	s := newSite(t, ns)
	hops := readyNodes(t, "storm", 110, 3)
	log := watchAddresses(t, ns)
	svcs := admin().CoreV1().Services(ns)
	// Normally done with the CCM still running, at the end of the test.
	t.Cleanup(func() { deleteAll(t, ns) })
	if err := createMixed(ns, 0, *services); err != nil {
		t.Fatal(err)
	}

	seed := time.Now().UnixNano()
	rng := rand.New(rand.NewPCG(uint64(seed), 0))
	t.Logf("restart storm: %d Services, %d kills, seed %d", *services, *kills, seed)

	// Services come and go through the whole storm.
	stop := make(chan struct{})
	var churned []string
	churnDone := make(chan struct{})
	go func() {
		defer close(churnDone)
		for j := 0; ; j++ {
			select {
			case <-stop:
				return
			case <-time.After(150 * time.Millisecond):
			}
			name := fmt.Sprintf("churn-%d", j)
			svc := framework.LBService(ns, name)
			inPool(svc)
			if _, err := svcs.Create(ctx, svc, metav1.CreateOptions{}); err != nil {
				t.Errorf("creating %s: %v", name, err)
				return
			}
			churned = append(churned, name)
			if j >= 3 {
				svcs.Delete(ctx, fmt.Sprintf("churn-%d", j-3), metav1.DeleteOptions{})
			}
		}
	}()

	ccm := s.StartReplica("storm-0", fastArgs()...)
	for k := 1; k <= *kills; k++ {
		// Every third kill comes before the replica leads, the others at a
		// random moment of its work.
		if k%3 != 0 {
			framework.WaitLeader(t, ccm)
		}
		time.Sleep(time.Duration(rng.Int64N(int64(3 * time.Second))))
		ccm.Kill()
		ccm = s.StartReplica(fmt.Sprintf("storm-%d", k), fastArgs()...)
	}
	framework.WaitLeader(t, ccm)
	close(stop)
	<-churnDone
	for _, name := range churned {
		svcs.Delete(ctx, name, metav1.DeleteOptions{})
	}

	start := time.Now()
	live := checkConverged(t, s, *services, hops)
	t.Logf("converged %s after the last restart: %d Services, %d addresses announced via %d nodes; %d Services churned",
		time.Since(start).Round(100*time.Millisecond), *services, len(live), len(hops[false]), len(churned))
	if changed := log.changed(); len(changed) > 0 {
		t.Errorf("%d Services changed address through the storm:\n%s", len(changed), strings.Join(changed[:min(len(changed), 20)], "\n"))
	}
	for i := range *services {
		want := mixedService(ns, i).Annotations[annIPs]
		if got := log.addresses(fmt.Sprintf("svc-%d", i)); want != "" && !slices.Equal(got, []string{want}) {
			t.Errorf("svc-%d asked for %s and was given %v", i, want, got)
		}
	}

	// The churned Services' addresses are free: new Services asking for
	// them get them.
	var freed []string
	for _, name := range churned {
		for _, ip := range log.addresses(name) {
			if !live[hostPrefix(ip)] && !slices.Contains(freed, ip) {
				freed = append(freed, ip)
			}
		}
	}
	if len(churned) > 0 && len(freed) == 0 {
		t.Fatalf("none of the %d churned Services was ever given an address", len(churned))
	}
	for i, ip := range freed[:min(len(freed), 5)] {
		name := fmt.Sprintf("reuse-%d", i)
		framework.CreateLBService(t, admin(), ns, name, func(svc *v1.Service) {
			inPool(svc)
			svc.Annotations[annIPs] = ip
		})
		if got := framework.WaitIngress(t, admin(), ns, name, 1); got[0] != ip {
			t.Errorf("%s asked for the freed %s and got %v", name, ip, got)
		}
	}
	deleteAll(t, ns)
}

// deleteAll deletes every Service in ns, while a CCM still runs to let
// them go, and strips the finalizers of any left after a while.
func deleteAll(t *testing.T, ns string) {
	ctx := context.Background()
	svcs := admin().CoreV1().Services(ns)
	list, err := svcs.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Error(err)
		return
	}
	framework.Parallel(len(list.Items), 16, func(i int) error {
		return svcs.Delete(ctx, list.Items[i].Name, metav1.DeleteOptions{})
	})
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		if list, err = svcs.List(ctx, metav1.ListOptions{}); err == nil && len(list.Items) == 0 {
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
	framework.Parallel(len(list.Items), 16, func(i int) error {
		framework.ForgetService(admin(), ns, list.Items[i].Name)
		return nil
	})
}
