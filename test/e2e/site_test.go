// Package e2e tests the data path: a router (FRR) in a network namespace
// learns the CCM's routes and VIPs and installs them in its kernel, and real
// packets between namespaces prove them. Every address lives in a network
// namespace the test creates.
package e2e

import (
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/test/framework"
)

// The site: a router with a fabric bridge for the nodes, a link to each of
// two control-plane hosts where CCM replicas run (each its own address, as
// replicas spread over nodes have), and one to a client.
const (
	routerASN = 64500
	ccmASN    = 64512
	routerIP  = "10.250.255.1"
	ccmIP     = "10.250.255.2" // the first control-plane host
	fabricGW  = "10.250.0.1"
	clientIP  = "10.250.254.2"
	vipPool   = "10.250.100.0/24"
	bulkPool  = "10.251.0.0/20"
)

// restartTime is the routers' graceful-restart time for our sessions: how
// long a replica that went away leaves its paths at the router.
const restartTime = 15 * time.Second

type node struct {
	name   string
	ns     *framework.Netns
	ip     string // on the fabric
	podNet string // pod CIDR
	podIP  string // a "pod" address in it
	// healthz stands in for the node's kube-proxy health check.
	healthz *http.Server
}

// healthzPort is kube-proxy's health check port, which the CCM probes.
const healthzPort = "10256"

// startHealthz answers the CCM's health checks on the node, as its
// kube-proxy would.
func (n *node) startHealthz() (err error) {
	n.healthz, err = n.ns.ServeHealthz(n.ip + ":" + healthzPort)
	return err
}

// stopHealthz stops answering, as a node whose kube-proxy stopped.
func (n *node) stopHealthz() {
	if n.healthz != nil {
		n.healthz.Close()
		n.healthz = nil
	}
}

// host is a control-plane host a CCM replica runs on.
type host struct {
	ns         *framework.Netns
	ip         string // its address, the replica's POD_IP
	apiPort    int    // the API server, as seen inside ns
	kubeconfig string // the CCM's, through apiPort
}

type site struct {
	dir       string
	router    *framework.Netns
	hosts     []*host
	client    *framework.Netns
	nodes     []*node
	frr       *framework.FRR
	gobgpd    *framework.GoBGPD
	namespace []*framework.Netns
	// newNS creates a namespace of the site's, deleted with it.
	newNS func(name string) (*framework.Netns, error)
}

// bgpdConf is the FRR configuration a site needs (the README quotes it).
const bgpdConf = `frr defaults traditional
hostname router
log stdout informational
!
router bgp 64500
 bgp router-id 10.250.255.1
 no bgp ebgp-requires-policy
 bgp graceful-restart
 neighbor 10.250.255.2 remote-as 64512
 neighbor 10.250.255.2 timers 3 9
 neighbor 10.250.255.6 remote-as 64512
 neighbor 10.250.255.6 timers 3 9
 !
 address-family ipv4 unicast
  maximum-paths 8
 exit-address-family
!
`

func buildSite(apiServer string) (_ *site, err error) {
	if os.Geteuid() != 0 {
		return nil, fmt.Errorf("the data-path tests need root: they create network namespaces and run FRR")
	}
	if err := framework.EnsureCommands(map[string]string{"ip": "iproute2", "ping": "iputils-ping"}); err != nil {
		return nil, err
	}
	s := &site{}
	defer func() {
		if err != nil {
			s.teardown()
		}
	}()
	if s.dir, err = os.MkdirTemp("", "baremetal-e2e-"); err != nil {
		return nil, err
	}
	prefix := fmt.Sprintf("bm%d-", os.Getpid()%10000)
	newNS := func(name string) (*framework.Netns, error) {
		ns, err := framework.NewNetns(prefix + name)
		if err == nil {
			s.namespace = append(s.namespace, ns)
		}
		return ns, err
	}
	s.newNS = newNS
	if s.router, err = newNS("router"); err != nil {
		return nil, err
	}
	for i, ip := range []string{ccmIP, "10.250.255.6"} {
		h := &host{ip: ip}
		if h.ns, err = newNS(fmt.Sprintf("cp%d", i+1)); err != nil {
			return nil, err
		}
		s.hosts = append(s.hosts, h)
	}
	if s.client, err = newNS("client"); err != nil {
		return nil, err
	}
	steps := [][]string{
		{"link", "add", "br0", "type", "bridge"},
		{"addr", "add", fabricGW + "/24", "dev", "br0"},
		{"link", "set", "br0", "up"},
	}
	for _, st := range steps {
		if _, err := s.router.IP(st...); err != nil {
			return nil, err
		}
	}
	for _, sysctl := range []string{"net.ipv4.ip_forward=1", "net.ipv4.fib_multipath_hash_policy=1"} {
		if _, err := s.router.Exec("sysctl", "-qw", sysctl); err != nil {
			return nil, err
		}
	}
	// Each host has a /30 to the router; both reach the router's
	// session address, routerIP, the first through its link.
	if err := framework.Veth(s.router, "to-cp1", routerIP+"/30", s.hosts[0].ns, "to-router", ccmIP+"/30"); err != nil {
		return nil, err
	}
	if err := framework.Veth(s.router, "to-cp2", "10.250.255.5/30", s.hosts[1].ns, "to-router", s.hosts[1].ip+"/30"); err != nil {
		return nil, err
	}
	if _, err := s.hosts[1].ns.IP("route", "add", routerIP+"/32", "via", "10.250.255.5"); err != nil {
		return nil, err
	}
	// Both reach the nodes through the router, as the CCM probes their
	// health checks.
	for i, via := range []string{routerIP, "10.250.255.5"} {
		if _, err := s.hosts[i].ns.IP("route", "add", "10.250.0.0/24", "via", via); err != nil {
			return nil, err
		}
	}
	if err := framework.Veth(s.router, "to-client", "10.250.254.1/24", s.client, "eth0", clientIP+"/24"); err != nil {
		return nil, err
	}
	if _, err := s.client.IP("route", "add", "default", "via", "10.250.254.1"); err != nil {
		return nil, err
	}
	for i := 1; i <= 3; i++ {
		n := &node{name: fmt.Sprintf("n%d", i), ip: fmt.Sprintf("10.250.0.1%d", i),
			podNet: fmt.Sprintf("10.244.%d.0/24", i), podIP: fmt.Sprintf("10.244.%d.1", i)}
		if n.ns, err = s.onFabric(n.name, n.ip); err != nil {
			return nil, err
		}
		// The "pod": an address in the node's pod CIDR.
		if _, err := n.ns.IP("addr", "add", n.podIP+"/32", "dev", "lo"); err != nil {
			return nil, err
		}
		if err := n.startHealthz(); err != nil {
			return nil, err
		}
		s.nodes = append(s.nodes, n)
	}
	if s.frr, err = framework.StartFRR(s.router, s.dir, bgpdConf); err != nil {
		return nil, err
	}
	// gobgpd beside the first host's CCM, for the interop check on its
	// RIB (the second host's replica finds no one at 127.0.0.1).
	if s.gobgpd, err = framework.StartGoBGPDIn(s.hosts[0].ns, s.dir, "gobgpd", "127.0.0.1", 64501,
		[]framework.GoBGPNeighbor{{Address: "127.0.0.1", ASN: ccmASN, AddPath: true}}); err != nil {
		return nil, err
	}
	u, err := url.Parse(apiServer)
	if err != nil {
		return nil, err
	}
	for _, h := range s.hosts {
		if h.apiPort, err = h.ns.ForwardInto(u.Host); err != nil {
			return nil, err
		}
	}
	return s, nil
}

func (s *site) teardown() {
	if s.frr != nil {
		s.frr.Stop()
	}
	if s.gobgpd != nil {
		s.gobgpd.Stop()
	}
	for _, n := range s.nodes {
		n.stopHealthz()
	}
	for _, ns := range s.namespace {
		ns.Delete()
	}
	if os.Getenv("TEST_KEEP_FILES") == "" && s.dir != "" {
		os.RemoveAll(s.dir)
	}
}

// cloudConfig lists the nodes, and the machines of nodes that are only
// API objects, and switches on pools and routes. The bulk pool serves
// Services that name it.
func (s *site) cloudConfig(machines ...*node) string {
	var b strings.Builder
	b.WriteString("inventory:\n  machines:\n")
	for _, n := range append(slices.Clone(s.nodes), machines...) {
		fmt.Fprintf(&b, "  - name: %s\n    addresses: [{type: InternalIP, address: %s}]\n", n.name, n.ip)
	}
	// Health checks on, as shipped: the extra machines answer from a rack
	// (answerFor).
	b.WriteString("loadBalancer:\n")
	fmt.Fprintf(&b, `  pools:
  - name: site
    addresses: [%s]
    avoidBuggyIPs: true
  - name: bulk
    addresses: [%s]
    autoAssign: false
routes: {}
bgp:
  localASN: %d
  # No routerID: each replica's is its own address (POD_IP).
  peers:
  - address: %s
    asn: %d
    holdTime: 9s
    connectRetryTime: 1s
    gracefulRestart: {restartTime: %ds}
  - address: 127.0.0.1
    port: %d
    asn: 64501
    holdTime: 9s
    connectRetryTime: 1s
`, vipPool, bulkPool, ccmASN, routerIP, routerASN, int(restartTime/time.Second), s.gobgpd.Port)
	return b.String()
}

// answerFor gives machines that are only API objects a kube-proxy that
// answers their health checks: one namespace on the fabric holding all
// their addresses, as a rack of healthy nodes. The router then has them as
// neighbours too; nothing but the CCM's probes is sent to them.
func (s *site) answerFor(machines []*node) (*http.Server, error) {
	var addrs []string
	for _, m := range machines {
		addrs = append(addrs, m.ip)
	}
	rack, err := s.onFabric("rack", addrs...)
	if err != nil {
		return nil, err
	}
	return rack.ServeHealthz("0.0.0.0:" + healthzPort)
}

// onFabric is a new namespace of the site's on the router's fabric bridge,
// its eth0 holding addrs (in the fabric's /24), routed through the router.
func (s *site) onFabric(name string, addrs ...string) (*framework.Netns, error) {
	ns, err := s.newNS(name)
	if err != nil {
		return nil, err
	}
	if err := framework.Veth(s.router, name, "", ns, "eth0", ""); err != nil {
		return nil, err
	}
	if _, err := s.router.IP("link", "set", name, "master", "br0"); err != nil {
		return nil, err
	}
	for _, a := range addrs {
		if _, err := ns.IP("addr", "add", a+"/24", "dev", "eth0"); err != nil {
			return nil, err
		}
	}
	if _, err := ns.IP("route", "add", "default", "via", fabricGW); err != nil {
		return nil, err
	}
	return ns, nil
}

func (s *site) writeConfig(machines ...*node) (string, error) {
	path := filepath.Join(s.dir, "cloud.yaml")
	return path, os.WriteFile(path, []byte(s.cloudConfig(machines...)), 0o644)
}
