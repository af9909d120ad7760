// Package l2 tests layer 2 pools on a real Ethernet segment: a bridge with
// two control-plane hosts where CCM replicas run, three nodes and a client,
// each a network namespace with its own kernel neighbour tables. The nodes
// take any packet for the pool's addresses without owning them (as
// kube-proxy does) and never answer ARP or NDP for them; only the CCM's
// leader does. Every address lives in a namespace the test creates.
package l2

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/mdlayher/arp"
	"github.com/mdlayher/ethernet"
	"github.com/mdlayher/packet"
	"golang.org/x/sys/unix"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/test/framework"
)

// The segment is 10.249.0.0/16 and fd00:249::/64; its pool is a part of
// each.
const (
	pool4 = "10.249.4.0/22"
	pool6 = "fd00:249::1:0/112"
)

// station is a namespace with one interface, eth0, on the segment.
type station struct {
	name string
	ns   *framework.Netns
	ip4  string
	ip6  string
	mac  string
}

type segment struct {
	dir     string
	sw      *framework.Netns // holds the bridge
	hosts   []*host
	nodes   []*node
	client  *station
	all     []*framework.Netns
	healthz map[string]*http.Server
}

type host struct {
	station
	kubeconfig string
	apiPort    int
}

type node struct {
	station
	server net.Listener
}

// buildSegment makes the segment: hosts .2 and .3, nodes .11 to .13 and a
// client .99 in 10.249.0.0/16 and fd00:249::/64.
func buildSegment(apiServer string) (_ *segment, err error) {
	if os.Geteuid() != 0 {
		return nil, fmt.Errorf("the layer 2 tests need root: they create network namespaces")
	}
	if err := framework.EnsureCommands(map[string]string{"ip": "iproute2"}); err != nil {
		return nil, err
	}
	s := &segment{healthz: map[string]*http.Server{}}
	defer func() {
		if err != nil {
			s.teardown()
		}
	}()
	if s.dir, err = os.MkdirTemp("", "baremetal-l2-"); err != nil {
		return nil, err
	}
	prefix := fmt.Sprintf("bml%d-", os.Getpid()%10000)
	if s.sw, err = framework.NewNetns(prefix + "sw"); err != nil {
		return nil, err
	}
	s.all = append(s.all, s.sw)
	if _, err := s.sw.IP("link", "add", "br0", "type", "bridge"); err != nil {
		return nil, err
	}
	if _, err := s.sw.IP("link", "set", "br0", "up"); err != nil {
		return nil, err
	}
	attach := func(name string, last int) (*station, error) {
		ns, err := framework.NewNetns(prefix + name)
		if err != nil {
			return nil, err
		}
		s.all = append(s.all, ns)
		// No duplicate address detection: addresses are usable at once; and
		// they stay while a link is down, as a node's configured ones do.
		for _, sysctl := range []string{"net.ipv6.conf.all.accept_dad=0", "net.ipv6.conf.default.accept_dad=0",
			"net.ipv6.conf.all.keep_addr_on_down=1", "net.ipv6.conf.default.keep_addr_on_down=1"} {
			if _, err := ns.Exec("sysctl", "-qw", sysctl); err != nil {
				return nil, err
			}
		}
		st := &station{name: name, ns: ns, ip4: fmt.Sprintf("10.249.0.%d", last), ip6: fmt.Sprintf("fd00:249::%x", last),
			mac: fmt.Sprintf("02:49:00:00:00:%02x", last)}
		if err := framework.Veth(s.sw, "p-"+name, "", ns, "eth0", st.ip4+"/16"); err != nil {
			return nil, err
		}
		for _, args := range [][]string{
			{"link", "set", "p-" + name, "master", "br0"},
			{"link", "set", "p-" + name, "up"},
		} {
			if _, err := s.sw.IP(args...); err != nil {
				return nil, err
			}
		}
		for _, args := range [][]string{
			{"link", "set", "eth0", "down"},
			{"link", "set", "eth0", "address", st.mac},
			{"link", "set", "eth0", "up"},
			{"-6", "addr", "add", st.ip6 + "/64", "dev", "eth0", "nodad"},
		} {
			if _, err := ns.IP(args...); err != nil {
				return nil, err
			}
		}
		return st, nil
	}
	// cp1 and cp2 are on the segment's subnets; cp3 is on the same wire
	// with addresses of other subnets, as a control-plane host of another
	// segment whose interface has the pool's name.
	for i, last := range []int{2, 3, 4} {
		st, err := attach(fmt.Sprintf("cp%d", i+1), last)
		if err != nil {
			return nil, err
		}
		if i == 2 {
			st.ip4, st.ip6 = "10.248.0.4", "fd00:248::4"
			for _, args := range [][]string{
				{"addr", "flush", "dev", "eth0"},
				{"addr", "add", st.ip4 + "/16", "dev", "eth0"},
				{"-6", "addr", "add", st.ip6 + "/64", "dev", "eth0", "nodad"},
			} {
				if _, err := st.ns.IP(args...); err != nil {
					return nil, err
				}
			}
		}
		h := &host{station: *st}
		u, err := url.Parse(apiServer)
		if err != nil {
			return nil, err
		}
		if h.apiPort, err = h.ns.ForwardInto(u.Host); err != nil {
			return nil, err
		}
		s.hosts = append(s.hosts, h)
	}
	for i := 1; i <= 3; i++ {
		st, err := attach(fmt.Sprintf("n%d", i), 10+i)
		if err != nil {
			return nil, err
		}
		n := &node{station: *st}
		// kube-proxy's part: the node takes any packet for a pool address
		// without owning one, so it answers no ARP or NDP for them.
		for _, args := range [][]string{
			{"route", "add", "local", pool4, "dev", "lo"},
			{"-6", "route", "add", "local", pool6, "dev", "lo"},
		} {
			if _, err := n.ns.IP(args...); err != nil {
				return nil, err
			}
		}
		for _, sysctl := range []string{"net.ipv4.conf.all.arp_ignore=1", "net.ipv4.conf.eth0.arp_ignore=1"} {
			if _, err := n.ns.Exec("sysctl", "-qw", sysctl); err != nil {
				return nil, err
			}
		}
		if n.server, err = n.ns.Listen("tcp", "[::]:80"); err != nil {
			return nil, err
		}
		go serveName(n.server, n.name)
		s.nodes = append(s.nodes, n)
		if err := s.startHealthz(n); err != nil {
			return nil, err
		}
	}
	if s.client, err = attach("client", 99); err != nil {
		return nil, err
	}
	return s, nil
}

// serveName answers each connection with the node's name.
func serveName(l net.Listener, name string) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		c.Write([]byte(name))
		c.Close()
	}
}

func (s *segment) startHealthz(n *node) error {
	srv, err := n.ns.ServeHealthz(n.ip4 + ":10256")
	s.healthz[n.name] = srv
	return err
}

func (s *segment) teardown() {
	for _, n := range s.nodes {
		if n.server != nil {
			n.server.Close()
		}
	}
	for _, h := range s.healthz {
		if h != nil {
			h.Close()
		}
	}
	for _, ns := range s.all {
		ns.Delete()
	}
	if os.Getenv("TEST_KEEP_FILES") == "" && s.dir != "" {
		os.RemoveAll(s.dir)
	}
}

// cloudConfig lists the nodes, n1 with its MAC (the others' are learned),
// and one layer 2 pool answered on the hosts' eth0; no BGP.
func (s *segment) cloudConfig() string {
	var b strings.Builder
	b.WriteString("inventory:\n  machines:\n")
	for i, n := range s.nodes {
		fmt.Fprintf(&b, "  - name: %s\n    addresses: [{type: InternalIP, address: %s}, {type: InternalIP, address: %s}]\n", n.name, n.ip4, n.ip6)
		if i == 0 {
			fmt.Fprintf(&b, "    macAddresses: [%q]\n", n.mac)
		}
	}
	fmt.Fprintf(&b, `loadBalancer:
  pools:
  - name: lan
    addresses: [%s, %s]
    announce: l2
    l2: {interface: eth0}
`, pool4, pool6)
	return b.String()
}

// neighbours are the hardware addresses the client's kernel holds, by
// address, and the state of each entry (one listing for every VIP: at the
// full size there are thousands).
func (s *segment) neighbours() (macs, states map[string]string) {
	macs, states = map[string]string{}, map[string]string{}
	for _, family := range []string{"-4", "-6"} {
		out, err := s.client.ns.IP(family, "neigh", "show", "dev", "eth0")
		if err != nil {
			continue
		}
		for _, line := range strings.Split(out, "\n") {
			f := strings.Fields(line)
			if len(f) == 0 {
				continue
			}
			states[f[0]] = f[len(f)-1]
			for i, w := range f {
				if w == "lladdr" && i+1 < len(f) {
					macs[f[0]] = f[i+1]
				}
			}
		}
	}
	return macs, states
}

// ask connects from the client and returns the name of the node that
// answered.
func (s *segment) ask(vip string, timeout time.Duration) (string, error) {
	c, err := s.client.ns.Dial("tcp", net.JoinHostPort(vip, "80"), timeout)
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(timeout))
	buf := make([]byte, 64)
	n, err := c.Read(buf)
	return string(buf[:n]), err
}

func (s *segment) nodeNamed(name string) *node {
	for _, n := range s.nodes {
		if n.name == name {
			return n
		}
	}
	return nil
}

func (s *segment) startCCM(c *framework.Cluster, binary string, h *host, name string) (framework.CCM, error) {
	cfg := fmt.Sprintf("%s/cloud.yaml", s.dir)
	if err := os.WriteFile(cfg, []byte(s.cloudConfig()), 0o644); err != nil {
		return framework.CCM{}, err
	}
	if h.kubeconfig == "" {
		var err error
		h.kubeconfig, err = c.ServiceAccountKubeconfigVia(context.Background(), "kube-system", "baremetal-cloud-controller-manager",
			fmt.Sprintf("https://127.0.0.1:%d", h.apiPort))
		if err != nil {
			return framework.CCM{}, err
		}
	}
	return framework.CCM{Binary: binary, Name: name, Kubeconfig: h.kubeconfig, CloudConfig: cfg, Netns: h.ns.Name,
		Env: []string{"POD_IP=" + h.ip4}, Args: []string{"--readiness-address=127.0.0.1:" + statusPort}}, nil
}

// statusPort is where replicas serve /readyz and /status, on their host's
// loopback.
const statusPort = "10263"

// arpSocket is a raw ARP socket on the station's eth0, opened inside its
// namespace.
func (st *station) arpSocket() (*packet.Conn, error) {
	var conn *packet.Conn
	if err := st.ns.Do(func() error {
		ifi, err := net.InterfaceByName("eth0")
		if err != nil {
			return err
		}
		conn, err = packet.Listen(ifi, packet.Raw, unix.ETH_P_ARP, nil)
		return err
	}); err != nil {
		return nil, fmt.Errorf("a raw socket in %s: %w", st.name, err)
	}
	return conn, nil
}

// spoofARP sends, from st for d, frames that say ip is at mac: gratuitous
// ARP requests to the whole segment and ARP replies to each of to (MACs),
// one of each every 10 ms, as an attacker on the segment would. The
// socket is opened inside st's namespace.
func spoofARP(st *station, ip, mac string, to []string, d time.Duration) error {
	hw, err := net.ParseMAC(mac)
	if err != nil {
		return err
	}
	addr := netip.MustParseAddr(ip)
	conn, err := st.arpSocket()
	if err != nil {
		return err
	}
	defer conn.Close()
	broadcast := net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
	frame := func(op arp.Operation, target net.HardwareAddr, targetIP netip.Addr, dst net.HardwareAddr) ([]byte, error) {
		p, err := arp.NewPacket(op, hw, addr, target, targetIP)
		if err != nil {
			return nil, err
		}
		payload, err := p.MarshalBinary()
		if err != nil {
			return nil, err
		}
		return (&ethernet.Frame{Destination: dst, Source: hw, EtherType: ethernet.EtherTypeARP, Payload: payload}).MarshalBinary()
	}
	var frames [][]byte
	var dsts []net.HardwareAddr
	g, err := frame(arp.OperationRequest, net.HardwareAddr{0, 0, 0, 0, 0, 0}, addr, broadcast)
	if err != nil {
		return err
	}
	frames, dsts = append(frames, g), append(dsts, broadcast)
	for _, m := range to {
		dst, err := net.ParseMAC(m)
		if err != nil {
			return err
		}
		r, err := frame(arp.OperationReply, dst, netip.MustParseAddr("10.249.0.2"), dst)
		if err != nil {
			return err
		}
		frames, dsts = append(frames, r), append(dsts, dst)
	}
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		for i, f := range frames {
			if _, err := conn.WriteTo(f, &packet.Addr{HardwareAddr: dsts[i]}); err != nil {
				return err
			}
		}
	}
	return nil
}
