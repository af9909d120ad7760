// Package cluster brings up a real Kubernetes cluster on this one machine
// for the tests: nodes in network namespaces on a lab bridge, each with
// containerd and a kubelet built from source, made into a cluster with
// kubeadm and the project's kubeadm files; a router (FRR) that learns the
// CCM's routes; a client behind the router. Every address lives in a
// namespace the lab made: the API server, which dials kubelets for logs and
// exec, runs on the control-plane node, inside the lab network.
package cluster

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/test/framework"
)

// The lab's addresses, of both families: the lab is dual-stack, as
// docs/operations/install.md sets a cluster up for both.
const (
	RouterASN = 64500
	CCMASN    = 64512
	LabGW     = "10.252.0.1" // the router, on the lab bridge
	LabGW6    = "fd00:252::1"
	// The client is outside the nodes' /16: upstream's e2e specs take a
	// source address inside it for one that kube-proxy rewrote.
	ClientIP   = "10.253.254.2"
	ClientIP6  = "fd00:253:254::2"
	VIPPool    = "10.252.100.0/24"
	VIPPool6   = "fd00:252:100::/120"
	PodSubnet  = "10.244.0.0/16"    // deploy/kubeadm/init.yaml's
	PodSubnet6 = "fd00:10:244::/56" // the IPv6 half of the docs' dual-stack podSubnet
	nsPrefix   = "bmc-"
	cgPrefix   = "bm-"
)

// Lab is the running cluster and its network.
type Lab struct {
	Dir    string
	Router *framework.Netns
	Client *framework.Netns
	FRR    *framework.FRR
	Nodes  []*Node // Nodes[0] is the control plane

	Admin      kubernetes.Interface
	AdminREST  *rest.Config
	Kubeconfig string // for kubectl on the host, through a forward

	images   []string
	stopping chan struct{}
	// external: the kubelets run with --cloud-provider=external, as the
	// project's kubeadm files say.
	external bool
}

// bgpdConf peers with the control-plane node, where the CCM runs.
func bgpdConf(cps ...*Node) string {
	var b strings.Builder
	fmt.Fprintf(&b, "frr defaults traditional\nhostname router\nlog stdout informational\n!\nrouter bgp %d\n bgp router-id %s\n no bgp ebgp-requires-policy\n bgp graceful-restart\n", RouterASN, LabGW)
	for _, n := range cps {
		fmt.Fprintf(&b, " neighbor %s remote-as %d\n neighbor %s timers 3 9\n", n.IP, CCMASN, n.IP)
	}
	b.WriteString(" !\n address-family ipv4 unicast\n  maximum-paths 8\n exit-address-family\n")
	// One session carries both families, as the router recipes do.
	b.WriteString(" !\n address-family ipv6 unicast\n")
	for _, n := range cps {
		fmt.Fprintf(&b, "  neighbor %s activate\n", n.IP)
	}
	b.WriteString("  maximum-paths 8\n exit-address-family\n!\n")
	return b.String()
}

// Check says what this machine lacks for a lab, installing the Debian
// packages it needs.
func Check() error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("the real-cluster tests need root: they create network namespaces, mount namespaces and cgroups")
	}
	if err := framework.EnsureCommands(map[string]string{"ip": "iproute2", "nsenter": "util-linux", "unshare": "util-linux",
		"runc": "runc", "nft": "nftables", "conntrack": "conntrack", "/usr/lib/cni/bridge": "containernetworking-plugins"}); err != nil {
		return err
	}
	var missing []string
	for _, b := range append([]string{"kubeadm", "kubelet", "containerd", "containerd-shim-runc-v2", "ctr"}, imageFiles()...) {
		if _, err := os.Stat(filepath.Join(framework.ToolsBin(), b)); err != nil {
			missing = append(missing, b)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("not built: %v; run `make node-tools cluster-images`", missing)
	}
	probe := cgroupDirs("/" + cgPrefix + "probe")
	for _, d := range probe {
		if err := os.Mkdir(d, 0o755); err != nil {
			return fmt.Errorf("cgroups are not writable here (%s: %v); the kubelet needs its own cgroup root", d, err)
		}
		os.Remove(d)
	}
	return nil
}

// imageFiles are the image tarballs every node loads, relative to the
// tools' bin directory.
func imageFiles() []string {
	return []string{"images/kube-apiserver.tar", "images/kube-controller-manager.tar", "images/kube-scheduler.tar",
		"images/kube-proxy.tar", "images/etcd.tar", "images/pause.tar", "images/echo.tar", "images/agnhost.tar", "images/coredns.tar"}
}

// Up builds the lab with one control-plane node and the given number of
// workers, and makes it a cluster with kubeadm. ccmImages are the CCM's
// image tarballs (or OCI layout tars), loaded on every node.
func Up(dir string, workers int, ccmImages ...string) (*Lab, error) {
	return up(dir, workers, true, ccmImages)
}

// UpWithoutCloudProvider is a cluster as a site built it before it had a
// CCM: kubeadm's files without the kubelets' --cloud-provider=external, so
// their Nodes register initialised, without the uninitialized taint.
func UpWithoutCloudProvider(dir string, workers int, ccmImages ...string) (*Lab, error) {
	return up(dir, workers, false, ccmImages)
}

func up(dir string, workers int, external bool, ccmImages []string) (_ *Lab, err error) {
	if err := Check(); err != nil {
		return nil, err
	}
	Down()
	l := &Lab{Dir: dir, stopping: make(chan struct{}), external: external}
	defer func() {
		if err != nil {
			l.Stop()
		}
	}()
	for _, f := range imageFiles() {
		l.images = append(l.images, filepath.Join(framework.ToolsBin(), f))
	}
	l.images = append(l.images, ccmImages...)
	if l.Router, err = framework.NewNetns(nsPrefix + "router"); err != nil {
		return nil, err
	}
	for _, args := range [][]string{{"link", "add", "lab0", "type", "bridge"}, {"addr", "add", LabGW + "/24", "dev", "lab0"},
		{"-6", "addr", "add", LabGW6 + "/64", "dev", "lab0", "nodad"}, {"link", "set", "lab0", "up"}} {
		if _, err := l.Router.IP(args...); err != nil {
			return nil, err
		}
	}
	// Connections, not packets, spread over the ECMP next hops.
	for _, s := range []string{"net.ipv4.ip_forward=1", "net.ipv4.fib_multipath_hash_policy=1",
		"net.ipv6.conf.all.forwarding=1", "net.ipv6.fib_multipath_hash_policy=1"} {
		if _, err := l.Router.Exec("sysctl", "-qw", s); err != nil {
			return nil, err
		}
	}
	if l.Client, err = framework.NewNetns(nsPrefix + "client"); err != nil {
		return nil, err
	}
	if err := framework.Veth(l.Router, "client", "10.253.254.1/24", l.Client, "eth0", ClientIP+"/24"); err != nil {
		return nil, err
	}
	for _, args := range [][]string{{"-6", "addr", "add", "fd00:253:254::1/64", "dev", "client", "nodad"}} {
		if _, err := l.Router.IP(args...); err != nil {
			return nil, err
		}
	}
	for _, args := range [][]string{{"-6", "addr", "add", ClientIP6 + "/64", "dev", "eth0", "nodad"},
		{"route", "add", "default", "via", "10.253.254.1"}, {"-6", "route", "add", "default", "via", "fd00:253:254::1"}} {
		if _, err := l.Client.IP(args...); err != nil {
			return nil, err
		}
	}
	cp, err := l.AddNode(machine(0))
	if err != nil {
		return nil, err
	}
	if l.FRR, err = framework.StartFRR(l.Router, dir, bgpdConf(cp)); err != nil {
		return nil, err
	}
	if err := l.kubeadmInit(cp); err != nil {
		return nil, err
	}
	for range workers {
		if _, err := l.AddWorker(); err != nil {
			return nil, err
		}
	}
	return l, nil
}

// AddNode wires a new node to the lab bridge and starts its containerd.
func (l *Lab) AddNode(name, ip string) (*Node, error) {
	ns, err := l.AddHost(name, ip)
	if err != nil {
		return nil, err
	}
	n := &Node{Name: name, IP: ip, IP6: ip6Of(ip), NS: ns, Dir: filepath.Join(l.Dir, name)}
	l.Nodes = append(l.Nodes, n)
	// kubeadm's prerequisite: a node forwards (to pods, for kube-proxy).
	for _, s := range []string{"net.ipv4.ip_forward=1", "net.ipv6.conf.all.forwarding=1"} {
		if _, err := ns.Exec("sysctl", "-qw", s); err != nil {
			return nil, err
		}
	}
	if err := os.MkdirAll(n.Dir, 0o755); err != nil {
		return nil, err
	}
	if err := n.start(l.images); err != nil {
		return nil, err
	}
	return n, nil
}

// AddHost wires a host (a namespace) to the lab bridge with ip and its
// IPv6 twin, routed through the lab's router.
func (l *Lab) AddHost(name, ip string) (*framework.Netns, error) {
	ns, err := framework.NewNetns(nsPrefix + name)
	if err != nil {
		return nil, err
	}
	if err := framework.Veth(l.Router, name, "", ns, "eth0", ip+"/24"); err != nil {
		return nil, err
	}
	if _, err := l.Router.IP("link", "set", name, "master", "lab0"); err != nil {
		return nil, err
	}
	for _, args := range [][]string{{"-6", "addr", "add", ip6Of(ip) + "/64", "dev", "eth0", "nodad"},
		{"route", "add", "default", "via", LabGW}, {"-6", "route", "add", "default", "via", LabGW6}} {
		if _, err := ns.IP(args...); err != nil {
			return nil, err
		}
	}
	return ns, nil
}

// connect makes the admin clients: the test process reaches the API
// server through the router's namespace (a workstation on the lab
// network), and kubectl through a forward on the host's loopback.
func (l *Lab) connect(cp *Node) error {
	admin := cp.Path("/etc/kubernetes/admin.conf")
	cfg, err := clientcmd.BuildConfigFromFlags("", admin)
	if err != nil {
		return err
	}
	cfg.Dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
		return l.Router.Dial(network, addr, 10*time.Second)
	}
	l.AdminREST = cfg
	if l.Admin, err = kubernetes.NewForConfig(cfg); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	go func() {
		<-l.stopping
		ln.Close()
	}()
	go framework.Forward(ln, func() (net.Conn, error) { return l.Router.Dial("tcp", cp.IP+":6443", 10*time.Second) })
	kc, err := clientcmd.LoadFromFile(admin)
	if err != nil {
		return err
	}
	for _, c := range kc.Clusters {
		c.Server = "https://" + ln.Addr().String()
		c.TLSServerName = "kubernetes"
	}
	l.Kubeconfig = filepath.Join(l.Dir, "kubeconfig")
	return clientcmd.WriteToFile(*kc, l.Kubeconfig)
}

// Kubectl runs kubectl against the cluster.
func (l *Lab) Kubectl(args ...string) (string, error) {
	out, err := exec.Command(filepath.Join(framework.ToolsBin(), "kubectl"), append([]string{"--kubeconfig", l.Kubeconfig}, args...)...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// Stop ends every process and removes the namespaces and cgroups.
func (l *Lab) Stop() {
	select {
	case <-l.stopping:
		return
	default:
		close(l.stopping)
	}
	for i := len(l.Nodes) - 1; i >= 0; i-- {
		l.Nodes[i].stop()
	}
	if l.FRR != nil {
		l.FRR.Stop()
	}
	Down()
}

// Down removes what a lab leaves when its process dies: processes in its
// namespaces and cgroups, the cgroups, the namespaces.
func Down() {
	out, _ := exec.Command("ip", "netns", "list").Output()
	for _, line := range strings.Split(string(out), "\n") {
		name, _, _ := strings.Cut(line, " ")
		if !strings.HasPrefix(name, nsPrefix) {
			continue
		}
		pids, _ := exec.Command("ip", "netns", "pids", name).Output()
		for _, p := range strings.Fields(string(pids)) {
			exec.Command("kill", "-9", p).Run()
		}
	}
	for _, base := range cgroupDirs("/") {
		entries, _ := os.ReadDir(base)
		for _, e := range entries {
			if e.IsDir() && strings.HasPrefix(e.Name(), cgPrefix) {
				killCgroupTree(filepath.Join(base, e.Name()))
			}
		}
	}
	for _, line := range strings.Split(string(out), "\n") {
		if name, _, _ := strings.Cut(line, " "); strings.HasPrefix(name, nsPrefix) {
			exec.Command("ip", "netns", "del", name).Run()
		}
	}
}

// AddWorker adds the next worker node and joins it.
func (l *Lab) AddWorker() (*Node, error) {
	n, err := l.AddNode(machine(len(l.Nodes)))
	if err != nil {
		return nil, err
	}
	return n, l.Join(n)
}

// ip6Of is a machine's IPv6 address on the lab bridge: its IPv4 address's
// last number, written in the lab's IPv6 subnet (10.252.0.11 is
// fd00:252::11).
func ip6Of(ip string) string { return "fd00:252::" + ip[strings.LastIndex(ip, ".")+1:] }

// machine is the name and IPv4 address of the lab's i-th machine: the
// control plane, then workers.
func machine(i int) (name, ip string) {
	if i == 0 {
		return "cp1", "10.252.0.10"
	}
	return fmt.Sprintf("w%d", i), fmt.Sprintf("10.252.0.%d", 10+i)
}
