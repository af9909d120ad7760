package e2e

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/test/framework"
)

const (
	migrationPage = "docs/migration/metallb.md"
	metallbNS     = "metallb-system"
	// The second control-plane host, in the routers page's block of them.
	mlbCP2 = "10.0.0.12"
)

// The MetalLB the site runs before the move: pools chosen by the
// Namespace's labels and by Service selector, a pool for the rest of the
// test's namespaces, with a pair shared across two of them (so
// that no other test's Service is given an address), all announced over BGP by a
// speaker on every node (MetalLB's native BGP carries IPv4 only), and a
// dual-stack pool answered on the nodes' segment.
const metallbResources = `apiVersion: metallb.io/v1beta1
kind: IPAddressPool
metadata: {name: web, namespace: metallb-system}
spec:
  addresses: [10.0.100.0/26]
  serviceAllocation: {priority: 10, namespaceSelectors: [{matchLabels: {team: web}}]}
---
apiVersion: metallb.io/v1beta1
kind: IPAddressPool
metadata: {name: selected, namespace: metallb-system}
spec:
  addresses: [10.0.100.64/27]
  serviceAllocation:
    priority: 20
    serviceSelectors: [{matchLabels: {tier: selected}}]
---
apiVersion: metallb.io/v1beta1
kind: IPAddressPool
metadata: {name: rest, namespace: metallb-system}
spec:
  addresses: [10.0.100.128/25]
  serviceAllocation: {namespaces: [mlb-apps, mlb-shop]}
---
apiVersion: metallb.io/v1beta1
kind: IPAddressPool
metadata: {name: lan, namespace: metallb-system}
spec:
  addresses: [10.0.0.200/29, "2001:db8::200/125"]
  autoAssign: false
---
apiVersion: metallb.io/v1beta1
kind: IPAddressPool
metadata: {name: segment, namespace: metallb-system}
spec:
  addresses: [10.0.0.208/29]
  autoAssign: false
---
apiVersion: metallb.io/v1beta1
kind: BGPAdvertisement
metadata: {name: routed, namespace: metallb-system}
spec:
  ipAddressPools: [web, selected, rest, segment]
---
apiVersion: metallb.io/v1beta1
kind: L2Advertisement
metadata: {name: lan, namespace: metallb-system}
spec:
  ipAddressPools: [lan, segment]
  interfaces: [eth0]
---
apiVersion: metallb.io/v1beta2
kind: BGPPeer
metadata: {name: router, namespace: metallb-system}
spec:
  myASN: 64512
  peerASN: 64500
  peerAddress: 10.0.0.1
  holdTime: 9s
  nodeSelectors: [{matchLabels: {rack: r1}}]
---
apiVersion: metallb.io/v1beta2
kind: BGPPeer
metadata: {name: tor2, namespace: metallb-system}
spec:
  myASN: 64512
  peerASN: 64500
  peerAddress: 10.0.0.2
  holdTime: 9s
  nodeSelectors: [{matchLabels: {rack: r2}}]
`

// metallbNeighbours are the router's lines for MetalLB's speakers, one
// neighbour per node, added to the routers page's recipe: the router of a
// site that runs MetalLB and is given the CCM's peering (the first step
// of the move).
func metallbNeighbours(recipe string, nodes []*recipeNode) (string, error) {
	var group strings.Builder
	group.WriteString(" neighbor METALLB peer-group\n neighbor METALLB remote-as 64512\n")
	for _, n := range nodes {
		fmt.Fprintf(&group, " neighbor %s peer-group METALLB\n", n.ip4)
	}
	anchor, family := " bgp listen range 10.0.0.8/29 peer-group CCM\n", " address-family ipv4 unicast\n"
	if !strings.Contains(recipe, anchor) || !strings.Contains(recipe, family) {
		return "", fmt.Errorf("%s: the FRR recipe has no %q or %q", recipesPage, anchor, family)
	}
	recipe = strings.Replace(recipe, anchor, anchor+group.String(), 1)
	return strings.Replace(recipe, family, family+"  neighbor METALLB route-map CCM-IN in\n  neighbor METALLB route-map CCM-OUT out\n", 1), nil
}

// metallb runs MetalLB's controller and speakers, built from its Go module
// (make builds them into hack/tools/bin), against the test's API server.
type metallb struct {
	t          *testing.T
	dir        string
	controller *framework.Process
	speakers   map[string]*framework.Process // by node name
	nodes      []*recipeNode
	kubeconfig map[string]string // the admin's, as seen in each node's namespace
	// speakerEnv is added to the speakers' environment
	// (METALLB_BGP_TYPE=frr-k8s, say).
	speakerEnv []string
}

// installMetalLB applies MetalLB's CRDs and resources and makes the Pods
// its processes look themselves up by (there is no kubelet to run them).
func installMetalLB(t *testing.T, nodes []*recipeNode, resourcesYAML string) *metallb {
	t.Helper()
	ctx := context.Background()
	for _, bin := range []string{"metallb-controller", "metallb-speaker"} {
		if _, err := os.Stat(filepath.Join(framework.ToolsBin(), bin)); err != nil {
			t.Fatalf("%v: make e2e builds MetalLB", err)
		}
	}
	mod, err := framework.MetalLBModuleDir()
	if err != nil {
		t.Fatal(err)
	}
	crds, err := filepath.Glob(filepath.Join(mod, "config", "crd", "bases", "*.yaml"))
	if err != nil || len(crds) == 0 {
		t.Fatalf("MetalLB's CRDs in %s: %v", mod, err)
	}
	for _, crd := range crds {
		if err := cluster.Apply(ctx, crd); err != nil {
			t.Fatal(err)
		}
	}
	framework.CreateNamespace(t, cluster.Admin, metallbNS)
	m := &metallb{t: t, dir: t.TempDir(), speakers: map[string]*framework.Process{}, nodes: nodes, kubeconfig: map[string]string{}}
	resources := filepath.Join(m.dir, "metallb.yaml")
	if err := os.WriteFile(resources, []byte(resourcesYAML), 0o644); err != nil {
		t.Fatal(err)
	}
	// The API server serves the new kinds once it has read the CRDs.
	framework.Eventually(t, framework.WaitTimeout, "MetalLB's resources applied", func() (bool, string) {
		err := cluster.Apply(ctx, resources)
		return err == nil, fmt.Sprint(err)
	})
	// The next test's MetalLB must not read this one's pools and peers.
	t.Cleanup(func() {
		if out, err := cluster.Kubectl("delete", "--ignore-not-found", "--wait", "-f", resources); err != nil {
			t.Errorf("deleting MetalLB's resources: %v %s", err, out)
		}
	})
	pods := []string{"controller"}
	for _, n := range nodes {
		pods = append(pods, "speaker-"+n.name)
	}
	for _, name := range pods {
		pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: metallbNS, Name: name},
			Spec: v1.PodSpec{Containers: []v1.Container{{Name: "metallb", Image: "quay.io/metallb/" + strings.Split(name, "-")[0]}}}}
		if _, err := cluster.Admin.CoreV1().Pods(metallbNS).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			cluster.Admin.CoreV1().Pods(metallbNS).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
		})
	}
	// Each speaker reaches the API server through a forward into its node's
	// namespace, as the admin.
	for _, n := range nodes {
		u, err := url.Parse(cluster.AdminConfig.Host)
		if err != nil {
			t.Fatal(err)
		}
		port, err := n.ns.ForwardInto(u.Host)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := clientcmd.LoadFromFile(cluster.AdminKubeconfig)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range cfg.Clusters {
			c.Server = fmt.Sprintf("https://127.0.0.1:%d", port)
		}
		m.kubeconfig[n.name] = filepath.Join(m.dir, n.name+".kubeconfig")
		if err := clientcmd.WriteToFile(*cfg, m.kubeconfig[n.name]); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(m.stop)
	return m
}

func (m *metallb) startController() {
	m.t.Helper()
	probe, err := framework.FreePort()
	if err != nil {
		m.t.Fatal(err)
	}
	m.controller, err = framework.StartProcess(filepath.Join(framework.ToolsBin(), "metallb-controller"), m.dir, "metallb-controller", 0,
		[]string{"KUBECONFIG=" + cluster.AdminKubeconfig},
		"--namespace="+metallbNS, "--pod-name=controller", "--webhook-mode=disabled", "--disable-cert-rotation", "--port=0",
		fmt.Sprintf("--health-probe-port=%d", probe))
	if err != nil {
		m.t.Fatal(err)
	}
}

func (m *metallb) stopController() {
	if m.controller != nil {
		m.controller.Stop()
		m.controller = nil
	}
}

// startSpeakers runs a speaker in each node's namespace, as MetalLB's
// DaemonSet does on the host network.
func (m *metallb) startSpeakers() {
	m.t.Helper()
	for _, n := range m.nodes {
		port, err := framework.FreePortIn(n.ns.Name)
		if err != nil {
			m.t.Fatal(err)
		}
		m.speakers[n.name], err = framework.StartProcess("ip", m.dir, "metallb-speaker-"+n.name, 0,
			append([]string{"KUBECONFIG=" + m.kubeconfig[n.name]}, m.speakerEnv...),
			"netns", "exec", n.ns.Name, filepath.Join(framework.ToolsBin(), "metallb-speaker"),
			"--namespace="+metallbNS, "--node-name="+n.name, "--pod-name=speaker-"+n.name, "--port=0",
			fmt.Sprintf("--health-probe-port=%d", port))
		if err != nil {
			m.t.Fatal(err)
		}
	}
}

func (m *metallb) stopSpeakers() {
	for name, p := range m.speakers {
		p.Stop()
		delete(m.speakers, name)
	}
}

func (m *metallb) stop() {
	if m.t.Failed() {
		for _, p := range append([]*framework.Process{m.controller}, slices.Collect(maps.Values(m.speakers))...) {
			if p != nil {
				m.t.Logf("%s's log: %s", p.Name, p.LogPath())
			}
		}
	}
	m.stopSpeakers()
	m.stopController()
}

// The trial's class and pool: a pool whose first addresses MetalLB's
// Services hold (the CCM hands none of them out), and trialRange, which
// the router's filter is given for the trial.
const (
	trialClass = "example.com/baremetal"
	trialPool  = "    - {name: trial, addresses: [10.0.100.0/30, 10.0.101.0/28]}\n"
	// trialPoolMoved is the trial's pool in the converted config.
	trialPoolMoved = "    - {name: trial, addresses: [10.0.101.0/28]}\n"
)

var trialRange = netip.MustParsePrefix("10.0.101.0/28")

// lanPool is the IPv4 part of the pool MetalLB answers on the segment;
// segmentPool, the pool it answers there and announces over BGP too
// (IPv4 only: MetalLB's native BGP refuses a pool with IPv6 addresses).
var lanPool, segmentPool = netip.MustParsePrefix("10.0.0.200/29"), netip.MustParsePrefix("10.0.0.208/29")

// mlbService is one of the site's Services, and where a client reaches it.
type mlbService struct {
	ns, name string
	port     uint16       // its one port (0: 80)
	pool     netip.Prefix // the MetalLB pool it must be given an address of (IPv4)
	mutate   func(*v1.Service)
	ingress  []string
}

// targets are the address:port pairs a client connects to for s.
func (s *mlbService) targets() []string {
	port := cmp.Or(s.port, 80)
	var out []string
	for _, ip := range s.ingress {
		out = append(out, netip.AddrPortFrom(netip.MustParseAddr(ip), port).String())
	}
	return out
}

// mlbServices are the site's 50 Services: 20 in the namespace of the web
// pool, 10 chosen by the selector pool, 15 more in the other namespace, one
// from the pool announced both over BGP and on the segment, one
// with a requested address (MetalLB's annotation), a pair sharing one
// across two namespaces (MetalLB's annotation, different ports) and one
// dual-stack from the layer 2 pool (MetalLB's annotation).
func mlbServices() []*mlbService {
	web, selected, rest, lan := netip.MustParsePrefix("10.0.100.0/26"), netip.MustParsePrefix("10.0.100.64/27"),
		netip.MustParsePrefix("10.0.100.128/25"), lanPool
	var out []*mlbService
	for i := range 20 {
		out = append(out, &mlbService{ns: "mlb-web", name: fmt.Sprintf("web-%d", i), pool: web})
	}
	for i := range 10 {
		out = append(out, &mlbService{ns: "mlb-apps", name: fmt.Sprintf("selected-%d", i), pool: selected,
			mutate: func(s *v1.Service) { s.Labels = map[string]string{"tier": "selected"} }})
	}
	for i := range 15 {
		out = append(out, &mlbService{ns: "mlb-apps", name: fmt.Sprintf("app-%d", i), pool: rest})
	}
	out = append(out, &mlbService{ns: "mlb-apps", name: "both", pool: segmentPool, mutate: func(s *v1.Service) {
		s.Annotations = map[string]string{"metallb.io/address-pool": "segment"}
	}})
	out = append(out, &mlbService{ns: "mlb-apps", name: "requested", pool: rest, mutate: func(s *v1.Service) {
		s.Annotations = map[string]string{"metallb.universe.tf/loadBalancerIPs": "10.0.100.200"}
	}})
	for i, name := range []string{"pair-a", "pair-b"} {
		port := uint16(80 + i)
		out = append(out, &mlbService{ns: []string{"mlb-apps", "mlb-shop"}[i], name: name, port: port, pool: rest, mutate: func(s *v1.Service) {
			s.Annotations = map[string]string{"metallb.io/allow-shared-ip": "pair"}
			s.Spec.Ports[0].Port = int32(port)
		}})
	}
	out = append(out, &mlbService{ns: "mlb-apps", name: "dual", pool: lan, mutate: func(s *v1.Service) {
		s.Annotations = map[string]string{"metallb.io/address-pool": "lan"}
		s.Spec.IPFamilyPolicy = ptr(v1.IPFamilyPolicyRequireDualStack)
		s.Spec.IPFamilies = []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol}
	}})
	return out
}

// client connects to every target in a round every 100 ms from the lab's
// client, behind the router, and keeps every failure.
type mlbClient struct {
	stopc chan struct{}
	done  chan struct{}
	// Written by the client's goroutine only, read once it is done.
	rounds   int
	failures []string
}

func startMLBClient(ns *framework.Netns, targets []string) *mlbClient {
	c := &mlbClient{stopc: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(c.done)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-c.stopc:
				return
			case <-tick.C:
			}
			for _, target := range targets {
				if name, err := ask(ns, "", target); err != nil || !strings.HasPrefix(name, "mlb-n") {
					c.failures = append(c.failures, fmt.Sprintf("%s %s: %q %v", time.Now().Format("15:04:05.000"), target, name, err))
				}
			}
			c.rounds++
		}
	}()
	return c
}

func (c *mlbClient) stop() (rounds int, failures []string) {
	close(c.stopc)
	<-c.done
	return c.rounds, c.failures
}

// TestMetalLBCutOver moves a site from MetalLB to the CCM, and back, by
// the steps of docs/migration/metallb.md, on the routers page's site (FRR
// with its recipe) with two racks, each with its router, which MetalLB's
// BGPPeers select the rack's nodes for: MetalLB's controller and a speaker
// per node assign and announce 50 Services; the CCM's trial serves a class
// of its own beside them; the configuration is converted from a kubectl dump
// as the page shows; MetalLB's controller stops, two CCM replicas on two
// control-plane hosts take over, MetalLB's speakers stop. Every Service
// keeps its address, the router's kernel table never loses a VIP, and a
// client connecting to every VIP every 100 ms never fails; MetalLB's
// resources and Events are left as they were. The rollback the page gives
// is checked the same way.
func TestMetalLBCutOver(t *testing.T) {
	ctx := context.Background()
	l := newLab(t, "ml")
	router := l.router("router", recipeRouter4+"/24", recipeRouter6+"/64")
	onSubnet := func(name, ip4, ip6 string) *framework.Netns {
		ns := l.host(router, name, recipeRouter4, ip4+"/24", ip6+"/64")
		l.ip(ns, "-6", "route", "add", "default", "via", recipeRouter6)
		return ns
	}
	cps := []*framework.Netns{onSubnet("cp1", recipeCP4, recipeCP6), onSubnet("cp2", mlbCP2, "2001:db8::12")}
	cpIPs := []string{recipeCP4, mlbCP2}
	var nodes []*recipeNode
	for i := 1; i <= 3; i++ {
		n := &recipeNode{name: fmt.Sprintf("mlb-n%d", i), ip4: fmt.Sprintf("10.0.0.3%d", i), ip6: fmt.Sprintf("2001:db8::3%d", i)}
		n.ns = onSubnet(fmt.Sprintf("n%d", i), n.ip4, n.ip6)
		// kube-proxy's part: the node takes packets for the pools'
		// addresses without owning one, so it answers no ARP or NDP for
		// them (as with kube-proxy's strictARP).
		l.ip(n.ns, "route", "add", "local", "10.0.100.0/24", "dev", "lo")
		l.ip(n.ns, "route", "add", "local", trialRange.String(), "dev", "lo")
		l.ip(n.ns, "route", "add", "local", "10.0.0.200/29", "dev", "lo")
		l.ip(n.ns, "route", "add", "local", segmentPool.String(), "dev", "lo")
		l.ip(n.ns, "-6", "route", "add", "local", "2001:db8::200/125", "dev", "lo")
		for _, sysctl := range []string{"net.ipv4.conf.all.arp_ignore=1", "net.ipv4.conf.eth0.arp_ignore=1"} {
			if out, err := n.ns.Exec("sysctl", "-qw", sysctl); err != nil {
				t.Fatal(err, out)
			}
		}
		for _, port := range []string{"80", "81"} {
			serve(t, &node{name: n.name, ns: n.ns}, "[::]:"+port)
		}
		hz, err := n.ns.ServeHealthz(n.ip4 + ":" + healthzPort)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { hz.Close() })
		node := framework.KubeletNode(n.name, "")
		node.Labels = map[string]string{"rack": rackOf(i - 1)}
		if err := framework.RegisterNodeObject(ctx, cluster.Admin, node, true,
			[]v1.NodeAddress{{Type: v1.NodeInternalIP, Address: n.ip4}, {Type: v1.NodeInternalIP, Address: n.ip6}}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cluster.Admin.CoreV1().Nodes().Delete(ctx, n.name, metav1.DeleteOptions{}) })
		nodes = append(nodes, n)
	}
	// A host on the segment reaches the layer 2 pool's VIPs by ARP and
	// NDP, not through the router.
	lanHost := onSubnet("lan", "10.0.0.60", "2001:db8::60")
	client := l.ns("client")
	if err := framework.Veth(router, "to-client", "10.1.0.1/24", client, "eth0", "10.1.0.2/24"); err != nil {
		t.Fatal(err)
	}
	l.addrs(router, "to-client", "2001:db8:1::1/64")
	l.addrs(client, "eth0", "2001:db8:1::2/64")
	l.ip(client, "route", "add", "default", "via", "10.1.0.1")
	l.ip(client, "-6", "route", "add", "default", "via", "2001:db8:1::1")

	// The router: the page's recipe, and MetalLB's neighbours.
	recipe, err := framework.MarkdownBlock(recipesPage, "FRR", "frr")
	if err != nil {
		t.Fatal(err)
	}
	// Two racks, each with its router: rack r1's (nodes 1 and 2) is the
	// page's router, which the client is behind; rack r2's (node 3) is a
	// second one on the segment, at 10.0.0.2. The trial's pool is let
	// through each one's filter of the CCM's routes, as the page says.
	tor2 := l.host(router, "tor2", "", "10.0.0.2/24", "2001:db8::2/64")
	tors := []*mlbTor{{ns: router, nodes: nodes[:2]}, {ns: tor2, nodes: nodes[2:]}}
	for i, tor := range tors {
		conf, err := metallbNeighbours(recipe.Text, tor.nodes)
		if err != nil {
			t.Fatal(err)
		}
		filter := "ip prefix-list CCM-IN seq 10 permit 10.0.100.0/24 ge 32\n"
		id := " bgp router-id 10.0.0.1\n"
		if !strings.Contains(conf, filter) || !strings.Contains(conf, id) {
			t.Fatalf("%s: the FRR recipe has no %q or %q", recipesPage, filter, id)
		}
		conf = strings.Replace(conf, filter, filter+"ip prefix-list CCM-IN seq 15 permit "+trialRange.String()+" ge 32\n"+
			"ip prefix-list CCM-IN seq 16 permit "+segmentPool.String()+" ge 32\n", 1)
		conf = strings.Replace(conf, id, fmt.Sprintf(" bgp router-id 10.0.0.%d\n", i+1), 1)
		tor.frr = l.frr(tor.ns, conf)
	}

	// MetalLB assigns and announces the site's Services.
	// A speaker answers NDP from the node's link-local address, which a
	// host that has been up a while has long had (DAD done).
	for _, n := range nodes {
		framework.Eventually(t, framework.WaitTimeout, n.name+"'s link-local address usable", func() (bool, string) {
			out, err := n.ns.IP("-6", "addr", "show", "dev", "eth0", "scope", "link", "tentative")
			return err == nil && strings.TrimSpace(out) == "", out
		})
	}
	// Another test's LoadBalancer Service still here would be in every
	// count below.
	all, err := cluster.Admin.CoreV1().Services("").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, svc := range all.Items {
		if svc.Spec.Type == v1.ServiceTypeLoadBalancer {
			t.Logf("a LoadBalancer Service of another test: %s/%s %v", svc.Namespace, svc.Name, framework.IngressIPs(&svc))
		}
	}
	mlb := installMetalLB(t, nodes, metallbResources)
	mlb.startController()
	mlb.startSpeakers()
	for _, ns := range []string{"mlb-web", "mlb-apps", "mlb-shop"} {
		framework.CreateNamespace(t, cluster.Admin, ns)
	}
	// Pool web is for the Namespaces of team web.
	if _, err := cluster.Admin.CoreV1().Namespaces().Patch(ctx, "mlb-web", types.MergePatchType, []byte(`{"metadata":{"labels":{"team":"web"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	services := mlbServices()
	for _, s := range services {
		framework.CreateLBService(t, cluster.Admin, s.ns, s.name, s.mutate)
		framework.WriteEndpointSlice(t, cluster.Admin, s.ns, s.name, "mlb-n1", "mlb-n2", "mlb-n3")
	}
	var targets, routed []string
	for _, s := range services {
		want := 1
		if s.name == "dual" {
			want = 2
		}
		s.ingress = framework.WaitIngress(t, cluster.Admin, s.ns, s.name, want)
		if a := netip.MustParseAddr(s.ingress[0]); !s.pool.Contains(a) {
			t.Errorf("MetalLB gave %s/%s %s, outside the pool %s", s.ns, s.name, a, s.pool)
		}
		targets = append(targets, s.targets()...)
		if s.pool != lanPool && !slices.Contains(routed, s.ingress[0]+"/32") {
			routed = append(routed, s.ingress[0]+"/32")
		}
	}
	byName := map[string]*mlbService{}
	for _, s := range services {
		byName[s.name] = s
	}
	if got := byName["requested"].ingress; !slices.Equal(got, []string{"10.0.100.200"}) {
		t.Errorf("the Service that requested 10.0.100.200 has %v", got)
	}
	if a, b := byName["pair-a"].ingress, byName["pair-b"].ingress; !slices.Equal(a, b) {
		t.Errorf("the pair sharing a key has %v and %v, want one address", a, b)
	}
	t.Logf("MetalLB: %d Services, %d VIPs over BGP, %d targets", len(services), len(routed), len(targets))

	// Each rack's router routes every VIP via its rack's nodes, and the
	// client gets through to each.
	viaNodes := func() (bool, string) { return viaRacks(tors, routed) }
	framework.Eventually(t, framework.WaitTimeout, "each router routes every VIP via its rack's nodes", viaNodes)
	framework.Eventually(t, framework.WaitTimeout, "the client reaches every VIP", func() (bool, string) {
		for _, target := range targets {
			if name, err := ask(client, "", target); err != nil {
				return false, fmt.Sprintf("%s: %q %v", target, name, err)
			}
		}
		return true, ""
	})
	resources := metallbResourceVersions(t)
	allocated := len(metallbEvents(t, services))

	// The trial, by the page's steps: two replicas serve the CCM's class
	// beside MetalLB, from a pool whose first addresses MetalLB's Services
	// hold, on the same router.
	dir := t.TempDir()
	trialCfg := filepath.Join(dir, "trial.yaml")
	if err := os.WriteFile(trialCfg, []byte("loadBalancer:\n  pools:\n"+trialPool+
		"bgp:\n  localASN: 64512\n  peers:\n"+
		"  - {address: 10.0.0.1, asn: 64500, holdTime: 9s, nodeSelector: {matchLabels: {rack: r1}}}\n"+
		"  - {address: 10.0.0.2, asn: 64500, holdTime: 9s, nodeSelector: {matchLabels: {rack: r2}}}\n"+
		strings.Replace(inventory(nodes), "inventory:\n", "inventory:\n  nodeLabels: [rack]\n", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	var replicas []*framework.Process
	for i, cp := range cps {
		replicas = append(replicas, framework.StartReplica(t, framework.CCM{
			Binary: ccmBinary, Name: fmt.Sprintf("ccm-trial-%d", i+1), Kubeconfig: l.kubeconfig(cp), CloudConfig: trialCfg, Netns: cp.Name,
			Env: []string{"POD_IP=" + cpIPs[i]}, Args: []string{"--load-balancer-class=" + trialClass, "--ignore-class-less-services"},
		}))
	}
	trial := &mlbService{ns: "mlb-apps", name: "trial", mutate: func(s *v1.Service) { s.Spec.LoadBalancerClass = ptr(trialClass) }}
	framework.CreateLBService(t, cluster.Admin, trial.ns, trial.name, trial.mutate)
	framework.WriteEndpointSlice(t, cluster.Admin, trial.ns, trial.name, "mlb-n1", "mlb-n2", "mlb-n3")
	trial.ingress = framework.WaitIngress(t, cluster.Admin, trial.ns, trial.name, 1)
	held := map[string]bool{}
	for _, s := range services {
		for _, ip := range s.ingress {
			held[ip] = true
		}
	}
	if ip := netip.MustParseAddr(trial.ingress[0]); held[trial.ingress[0]] || !trialRange.Contains(ip) && !netip.MustParsePrefix("10.0.100.0/30").Contains(ip) {
		t.Errorf("the trial Service got %s: held by MetalLB, or outside the trial pool", ip)
	}
	if evs := framework.Events(t, cluster.Admin, trial.ns, trial.name, "IPAllocated"); len(evs) > 0 {
		t.Errorf("MetalLB allocated for the Service of the CCM's class: %v", evs)
	}
	framework.Eventually(t, framework.WaitTimeout, "each router has the trial VIP alone from each replica, via its rack's nodes", func() (bool, string) {
		if ok, why := fromReplicas(tors, cpIPs, 1); !ok {
			return false, why
		}
		return viaRacks(tors, []string{trial.ingress[0] + "/32"})
	})
	if name, err := ask(client, "", trial.targets()[0]); err != nil {
		t.Errorf("the client does not reach the trial VIP: %q %v", name, err)
	}
	routedMove := append(slices.Clone(routed), trial.ingress[0]+"/32")
	targetsMove := append(slices.Clone(targets), trial.targets()...)
	servicesMove := append(slices.Clone(services), trial)

	// The move, by the page's steps.
	monitors := monitorTors(t, tors)
	clientRun := startMLBClient(client, targetsMove)
	lanTargets := append(byName["dual"].targets(), byName["both"].targets()...)
	lanRun := startMLBClient(lanHost, lanTargets)
	convert, err := framework.MarkdownBlock(migrationPage, "Converting the configuration", "sh")
	if err != nil {
		t.Fatal(err)
	}
	framework.RunDocShell(t, cluster, dir, filepath.Dir(ccmBinary), convert.Text)
	lb, err := os.ReadFile(filepath.Join(dir, "lb.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	// The trial's pools go at the end of the converted ones, which keep
	// MetalLB's order of choice, without the addresses that overlap
	// MetalLB's pools (validate refuses them; the trial handed none out).
	anchor := "\nbgp:\n"
	if !strings.Contains(string(lb), anchor) {
		t.Fatalf("the converted config has no %q:\n%s", anchor, lb)
	}
	lb = []byte(strings.Replace(string(lb), anchor, "\n"+trialPoolMoved+"bgp:\n", 1))
	// The inventory goes into the converted one, which reads the racks'
	// Node label (the BGPPeers' nodeSelectors).
	racks := "inventory:\n  nodeLabels: [rack]\n"
	if !strings.Contains(string(lb), racks) {
		t.Fatalf("the converted config has no %q:\n%s", racks, lb)
	}
	lb = []byte(strings.Replace(string(lb), racks, strings.Replace(inventory(nodes), "inventory:\n", racks, 1), 1))
	cfg := filepath.Join(dir, "cloud.yaml")
	if err := os.WriteFile(cfg, lb, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(ccmBinary, "validate", "--cloud-config", cfg).CombinedOutput(); err != nil {
		t.Fatalf("validate: %v\n%s", err, out)
	}

	mlb.stopController()
	// One replica at a time, so that the trial's VIP stays announced:
	// the converted config, the class kept, the class-less Services too.
	for i, cp := range cps {
		replicas[i].Stop()
		replicas[i] = framework.StartReplica(t, framework.CCM{
			Binary: ccmBinary, Name: fmt.Sprintf("ccm-mlb-%d", i+1), Kubeconfig: l.kubeconfig(cp), CloudConfig: cfg, Netns: cp.Name,
			Env: []string{"POD_IP=" + cpIPs[i]}, Args: []string{"--load-balancer-class=" + trialClass},
		})
	}
	// The page's sign that the CCM serves every Service: an
	// EnsuredLoadBalancer Event on each, and the router holding every VIP
	// from each replica.
	framework.Eventually(t, framework.WaitTimeout, "every Service has EnsuredLoadBalancer", func() (bool, string) {
		for _, s := range services {
			if len(framework.Events(t, cluster.Admin, s.ns, s.name, "EnsuredLoadBalancer")) == 0 {
				return false, s.ns + "/" + s.name + " has none"
			}
		}
		return true, ""
	})
	framework.Eventually(t, framework.WaitTimeout, "each router has every VIP from each replica, via its rack's nodes", func() (bool, string) {
		return fromReplicas(tors, cpIPs, len(routedMove))
	})
	mlb.stopSpeakers()
	framework.Eventually(t, framework.WaitTimeout, "the routers have nothing from the nodes", func() (bool, string) {
		return fromNodes(tors, 0)
	})
	// A few more rounds of the client, the CCM alone.
	time.Sleep(3 * time.Second)
	checkMove(t, "the move", clientRun, monitors, routedMove, servicesMove)
	checkLAN(t, "the move", lanRun)
	framework.Eventually(t, framework.WaitTimeout, "each router routes every VIP via its rack's nodes", viaNodes)
	if now := metallbResourceVersions(t); !maps.Equal(now, resources) {
		t.Errorf("MetalLB's resources changed: %v, were %v", now, resources)
	}
	if n := len(metallbEvents(t, services)); n < allocated {
		t.Errorf("MetalLB's IPAllocated Events: %d, were %d", n, allocated)
	}
	// New Services get addresses by the converted pools' rules.
	for _, s := range []*mlbService{
		{ns: "mlb-web", name: "web-new", pool: netip.MustParsePrefix("10.0.100.0/26")},
		{ns: "mlb-apps", name: "selected-new", pool: netip.MustParsePrefix("10.0.100.64/27"),
			mutate: func(s *v1.Service) { s.Labels = map[string]string{"tier": "selected"} }},
	} {
		framework.CreateLBService(t, cluster.Admin, s.ns, s.name, s.mutate)
		if got := framework.WaitIngress(t, cluster.Admin, s.ns, s.name, 1); !s.pool.Contains(netip.MustParseAddr(got[0])) {
			t.Errorf("after the move, a new Service in %s (%s) got %s, outside %s", s.ns, s.name, got[0], s.pool)
		}
		framework.ForgetService(cluster.Admin, s.ns, s.name)
	}

	// The rollback, by the page's steps. A Service of the CCM's class has
	// no implementation after it: the trial's goes first.
	framework.ForgetService(cluster.Admin, trial.ns, trial.name)
	monitors = monitorTors(t, tors)
	clientRun = startMLBClient(client, targets)
	lanRun = startMLBClient(lanHost, lanTargets)
	mlb.startSpeakers()
	framework.Eventually(t, framework.WaitTimeout, "each router has every VIP from each node of its rack", func() (bool, string) {
		return fromNodes(tors, len(routed))
	})
	for _, r := range replicas {
		r.Stop()
	}
	// Removing the CCM removes the policy that gives LoadBalancer Services
	// the finalizer; the suite's other tests have it back.
	policy := filepath.Join(framework.RepoRoot(), "deploy", "load-balancer-finalizer.yaml")
	if out, err := cluster.Kubectl("delete", "-f", policy); err != nil {
		t.Fatal(err, out)
	}
	t.Cleanup(func() {
		if err := cluster.Install(); err != nil {
			t.Error(err)
		}
	})
	framework.Eventually(t, framework.WaitTimeout, "the finalizer policy out of force", func() (bool, string) {
		svc, err := cluster.Admin.CoreV1().Services("default").Create(ctx, framework.LBService("default", "policy-probe"), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			return false, err.Error()
		}
		return len(svc.Finalizers) == 0, fmt.Sprintf("a new LoadBalancer Service would have %v", svc.Finalizers)
	})
	finalizers, err := framework.MarkdownBlock(migrationPage, "Rolling back", "sh")
	if err != nil {
		t.Fatal(err)
	}
	framework.RunDocShell(t, cluster, dir, filepath.Dir(ccmBinary), finalizers.Text)
	for _, s := range services {
		svc, err := cluster.Admin.CoreV1().Services(s.ns).Get(ctx, s.name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(svc.Finalizers) != 0 {
			t.Errorf("%s/%s keeps finalizers %v after the page's command", s.ns, s.name, svc.Finalizers)
		}
	}
	mlb.startController()
	// MetalLB's controller serves again: a new Service gets an address.
	framework.CreateLBService(t, cluster.Admin, "mlb-web", "web-after", nil)
	framework.WaitIngress(t, cluster.Admin, "mlb-web", "web-after", 1)
	framework.ForgetService(cluster.Admin, "mlb-web", "web-after")
	time.Sleep(3 * time.Second)
	checkMove(t, "the rollback", clientRun, monitors, routed, services)
	checkLAN(t, "the rollback", lanRun)
	framework.Eventually(t, framework.WaitTimeout, "each router routes every VIP via its rack's nodes", viaNodes)
}

// checkLAN asserts that the host on the segment reached the layer 2
// pools' VIPs all through a move: every connection it opened was answered.
// While both MetalLB's speakers and the CCM answer ARP, each naming the
// node it chose, the host's neighbour entry may change nodes: a
// connection in flight at that moment is reset by the node that has not
// seen it, as at any layer 2 failover. Those are counted, and few.
func checkLAN(t *testing.T, what string, c *mlbClient) {
	t.Helper()
	rounds, failures := c.stop()
	var resets, other []string
	for _, f := range failures {
		if strings.Contains(f, "connection reset by peer") {
			resets = append(resets, f)
		} else {
			other = append(other, f)
		}
	}
	t.Logf("%s: the host on the segment connected to the layer 2 VIPs in %d rounds, %d reset in flight, %d failed otherwise", what, rounds, len(resets), len(other))
	if len(other) > 0 {
		t.Errorf("%s: the host on the segment: %d connections failed, the first: %v", what, len(other), other[:min(len(other), 5)])
	}
	if len(resets) > 4 {
		t.Errorf("%s: the host on the segment: %d connections reset in flight, want a few at the change of answering node: %v", what, len(resets), resets[:min(len(resets), 5)])
	}
}

// mlbTor is a rack's router and the nodes of its rack.
type mlbTor struct {
	ns    *framework.Netns
	frr   *framework.FRR
	nodes []*recipeNode
}

// rackOf is the rack of the i-th node (from 0): nodes 1 and 2 are rack
// r1's, node 3 rack r2's.
func rackOf(i int) string { return []string{"r1", "r1", "r2"}[i] }

// viaRacks reports whether each rack's router routes every prefix via
// the nodes of its rack, and which does not.
func viaRacks(tors []*mlbTor, prefixes []string) (bool, string) {
	for i, tor := range tors {
		out, err := tor.ns.IP("route", "show", "proto", "bgp")
		if err != nil {
			return false, err.Error()
		}
		for _, p := range prefixes {
			if v := vias(routeLines(out, strings.TrimSuffix(p, "/32"))); len(v) != len(tor.nodes) {
				return false, fmt.Sprintf("router %d: %s via %v, want its %d nodes", i+1, p, v, len(tor.nodes))
			}
		}
	}
	return true, ""
}

// fromReplicas reports whether each router has vips VIPs from each
// replica, each via the nodes of its rack.
func fromReplicas(tors []*mlbTor, replicas []string, vips int) (bool, string) {
	for i, tor := range tors {
		got, err := tor.frr.Received("ipv4")
		if err != nil {
			return false, err.Error()
		}
		for _, ip := range replicas {
			if got[ip] != vips*len(tor.nodes) {
				return false, fmt.Sprintf("router %d: %v, want %d paths from each replica", i+1, got, vips*len(tor.nodes))
			}
		}
	}
	return true, ""
}

// fromNodes reports whether each router has vips paths from each node of
// its rack (MetalLB's speakers).
func fromNodes(tors []*mlbTor, vips int) (bool, string) {
	for i, tor := range tors {
		got, err := tor.frr.Received("ipv4")
		if err != nil {
			return false, err.Error()
		}
		for _, n := range tor.nodes {
			if got[n.ip4] != vips {
				return false, fmt.Sprintf("router %d: %v, want %d from node %s", i+1, got, vips, n.ip4)
			}
		}
	}
	return true, ""
}

func monitorTors(t *testing.T, tors []*mlbTor) []*framework.Process {
	var out []*framework.Process
	for _, tor := range tors {
		out = append(out, framework.MonitorRoutes(t, tor.ns))
	}
	return out
}

// checkMove asserts what the page promises of a move: every Service keeps
// its address, no VIP's route was deleted at the router, and the client
// never failed.
func checkMove(t *testing.T, what string, c *mlbClient, monitors []*framework.Process, routed []string, services []*mlbService) {
	t.Helper()
	rounds, failures := c.stop()
	t.Logf("%s: the client connected to every VIP in %d rounds, %d failed", what, rounds, len(failures))
	if len(failures) > 0 {
		t.Errorf("%s: %d connections failed, the first: %v", what, len(failures), failures[:min(len(failures), 5)])
	}
	if rounds < 50 {
		t.Errorf("%s: the client made %d rounds, want the move covered", what, rounds)
	}
	for i, monitor := range monitors {
		if d := framework.RouteDeletions(monitor.Logs(), "", routed); len(d) > 0 {
			t.Errorf("%s: router %d deleted VIP routes: %v", what, i+1, d[:min(len(d), 5)])
		}
		monitor.Stop()
	}
	for _, s := range services {
		svc, err := cluster.Admin.CoreV1().Services(s.ns).Get(context.Background(), s.name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := framework.IngressIPs(svc); !slices.Equal(got, s.ingress) {
			t.Errorf("%s: %s/%s has %v, had %v", what, s.ns, s.name, got, s.ingress)
		}
	}
}

// metallbResourceVersions are MetalLB's resources' generations (of their
// spec: MetalLB's controller writes the pools' status, counting addresses),
// by kind and name.
func metallbResourceVersions(t *testing.T) map[string]string {
	t.Helper()
	dyn, err := dynamic.NewForConfig(cluster.AdminConfig)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, r := range []schema.GroupVersionResource{
		{Group: "metallb.io", Version: "v1beta1", Resource: "ipaddresspools"},
		{Group: "metallb.io", Version: "v1beta1", Resource: "bgpadvertisements"},
		{Group: "metallb.io", Version: "v1beta1", Resource: "l2advertisements"},
		{Group: "metallb.io", Version: "v1beta2", Resource: "bgppeers"},
	} {
		list, err := dyn.Resource(r).Namespace(metallbNS).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range list.Items {
			out[r.Resource+"/"+o.GetName()] = fmt.Sprint(o.GetGeneration())
		}
	}
	if len(out) != 9 {
		t.Fatalf("MetalLB's resources: %v, want the 9 applied", out)
	}
	return out
}

// metallbEvents are the IPAllocated Events MetalLB's controller wrote on
// the Services.
func metallbEvents(t *testing.T, services []*mlbService) []v1.Event {
	t.Helper()
	var out []v1.Event
	for _, s := range services {
		out = append(out, framework.Events(t, cluster.Admin, s.ns, s.name, "IPAllocated")...)
	}
	if len(out) < len(services) {
		t.Fatalf("MetalLB's IPAllocated Events: %d for %d Services", len(out), len(services))
	}
	return out
}
