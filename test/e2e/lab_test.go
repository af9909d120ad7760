package e2e

import (
	"context"
	"fmt"
	v1 "k8s.io/api/core/v1"
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/test/framework"
)

// lab is one test's own network namespaces, deleted when the test ends: the
// sites of the docs' pages are built in one.
type lab struct {
	t       *testing.T
	prefix  string
	routers int
}

func newLab(t *testing.T, short string) *lab {
	return &lab{t: t, prefix: fmt.Sprintf("%s%d-", short, os.Getpid()%10000)}
}

// ns is a new namespace of the lab's.
func (l *lab) ns(name string) *framework.Netns {
	l.t.Helper()
	ns, err := framework.NewNetns(l.prefix + name)
	if err != nil {
		l.t.Fatal(err)
	}
	l.t.Cleanup(ns.Delete)
	return ns
}

// ip runs `ip args...` in ns.
func (l *lab) ip(ns *framework.Netns, args ...string) {
	l.t.Helper()
	if out, err := ns.IP(args...); err != nil {
		l.t.Fatalf("ip %v in %s: %v %s", args, ns.Name, err, out)
	}
}

// router is a namespace that forwards, spreading flows over ECMP routes by
// addresses and ports, with a bridge br0 holding addrs (CIDR notation) when
// any are given.
//
// Each hashes flows with a seed of its own, as real routers do. Policy 1,
// which the docs advise for a Linux router, would not here: it takes the
// hash the sending socket put on the packet, which veth pairs carry from
// namespace to namespace, so a ToR would send every flow the spine gave it
// to the same node. The custom policy (3) on the same fields hashes anew.
func (l *lab) router(name string, addrs ...string) *framework.Netns {
	l.t.Helper()
	ns := l.ns(name)
	l.routers++
	for _, sysctl := range []string{"net.ipv4.ip_forward=1", "net.ipv6.conf.all.forwarding=1",
		"net.ipv4.fib_multipath_hash_policy=3", "net.ipv4.fib_multipath_hash_fields=0x37",
		"net.ipv6.fib_multipath_hash_policy=3", "net.ipv6.fib_multipath_hash_fields=0x37",
		fmt.Sprintf("net.ipv4.fib_multipath_hash_seed=%d", 7919*l.routers)} {
		if out, err := ns.Exec("sysctl", "-qw", sysctl); err != nil {
			l.t.Fatalf("%v %s (the lab's routers need Linux 6.11 or later)", err, out)
		}
	}
	if len(addrs) > 0 {
		l.ip(ns, "link", "add", "br0", "type", "bridge")
		l.addrs(ns, "br0", addrs...)
		l.ip(ns, "link", "set", "br0", "up")
	}
	return ns
}

// host is a new namespace whose eth0 is a port of router's br0, holding
// addrs (CIDR notation), with a default route via gateway if one is given.
func (l *lab) host(router *framework.Netns, name, gateway string, addrs ...string) *framework.Netns {
	l.t.Helper()
	ns := l.ns(name)
	if err := framework.Veth(router, name, "", ns, "eth0", ""); err != nil {
		l.t.Fatal(err)
	}
	l.ip(router, "link", "set", name, "master", "br0")
	l.addrs(ns, "eth0", addrs...)
	if gateway != "" {
		l.ip(ns, "route", "add", "default", "via", gateway)
	}
	return ns
}

func (l *lab) addrs(ns *framework.Netns, dev string, addrs ...string) {
	l.t.Helper()
	for _, a := range addrs {
		if strings.Contains(a, ":") {
			l.ip(ns, "-6", "addr", "add", a, "dev", dev, "nodad")
		} else {
			l.ip(ns, "addr", "add", a, "dev", dev)
		}
	}
}

// kubeconfig is the CCM's kubeconfig inside ns, reaching the test's API
// server through a forward on the namespace's loopback.
func (l *lab) kubeconfig(ns *framework.Netns) string {
	l.t.Helper()
	u, err := url.Parse(cluster.AdminConfig.Host)
	if err != nil {
		l.t.Fatal(err)
	}
	port, err := ns.ForwardInto(u.Host)
	if err != nil {
		l.t.Fatal(err)
	}
	kc, err := cluster.ServiceAccountKubeconfigVia(context.Background(), "kube-system", "baremetal-cloud-controller-manager", fmt.Sprintf("https://127.0.0.1:%d", port))
	if err != nil {
		l.t.Fatal(err)
	}
	return kc
}

// frrDir is a directory for an FRR router's files that its daemons, running
// as user frr, can reach: not one under the test's private directory.
func (l *lab) frrDir() string {
	l.t.Helper()
	dir, err := os.MkdirTemp("", l.prefix+"frr-")
	if err != nil {
		l.t.Fatal(err)
	}
	l.t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// frr starts an FRR router in ns with config, stopped when the test ends.
func (l *lab) frr(ns *framework.Netns, config string) *framework.FRR {
	l.t.Helper()
	f, err := framework.StartFRR(ns, l.frrDir(), config)
	if err != nil {
		l.t.Fatal(err)
	}
	l.t.Cleanup(f.Stop)
	return f
}

// nodesOnOneHost are count nodes on one host of router's subnet, named
// short-nNN, at 10.0.0.21 on: each a Node with a health check of its own,
// so that the router sees count next hops.
func (l *lab) nodesOnOneHost(router *framework.Netns, short string, count int) []*node {
	l.t.Helper()
	hosts := l.host(router, "nodes", "")
	var nodes []*node
	for i := 1; i <= count; i++ {
		n := &node{name: fmt.Sprintf("%s-n%02d", short, i), ip: fmt.Sprintf("10.0.0.%d", 20+i), ns: hosts}
		l.addrs(hosts, "eth0", n.ip+"/24")
		if err := n.startHealthz(); err != nil {
			l.t.Fatal(err)
		}
		l.t.Cleanup(n.stopHealthz)
		framework.CreateNode(l.t, cluster.Admin, n.name, "", true, []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: n.ip}})
		nodes = append(nodes, n)
	}
	return nodes
}
