package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/provider"
	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/test/framework"
)

const topologiesPage = "docs/network/topologies.md"

// spineConf is the test's fabric: the spine takes every ToR's routes and
// spreads a destination over the ToRs that have it.
const spineConf = `frr defaults traditional
hostname spine
!
route-map FABRIC permit 10
!
router bgp 65000
 bgp router-id 10.0.255.100
 bgp bestpath as-path multipath-relax
 neighbor 10.0.0.1 remote-as 65101
 neighbor 10.0.0.3 remote-as 65102
 !
 address-family ipv4 unicast
  redistribute connected
  neighbor 10.0.0.1 route-map FABRIC in
  neighbor 10.0.0.1 route-map FABRIC out
  neighbor 10.0.0.3 route-map FABRIC in
  neighbor 10.0.0.3 route-map FABRIC out
  maximum-paths 16
 exit-address-family
!
`

// rack is one rack of the leaf-spine site: its ToR, a control-plane host
// with a CCM replica, and two nodes.
type rack struct {
	tor *framework.Netns
	// The link between spine and ToR: the spine's address, the ToR's.
	spineSide, torSide string
	cp                 *framework.Netns
	cpIP               string
	nodes              []*node
}

// leafSpine is the site of docs/network/topologies.md, built and running:
// two racks, each behind its ToR, the ToRs under a spine, a client behind
// the spine, a CCM replica in each rack peering with both ToRs by multihop
// eBGP, and a Service whose VIP every node serves.
type leafSpine struct {
	l             *lab
	spine, client *framework.Netns
	racks         []*rack
	tors          map[*rack]*framework.FRR
	all           []*node
	replicas      []*framework.Process
	vip           string
	// logs is the ToRs' view of the sessions and the VIP, for failures.
	logs func() string
	// carrying waits until each ToR routes the VIP to exactly the given
	// nodes of its rack, and the spine to the ToRs that have it.
	carrying func(what string, want map[*rack][]*node)
	// connect makes connections from the client behind the spine, and
	// wants every one answered, by the given nodes and each of them.
	connect func(what string, want []*node)
}

// newLeafSpine builds the site, its namespaces named after short, with the
// page's ToR and CCM blocks as they are (the CCM's config through edit, if
// given), and a Service named service.
func newLeafSpine(t *testing.T, short, service string, edit func(config string) string) *leafSpine {
	ctx := context.Background()
	l := newLab(t, short)
	spine := l.router("spine", "10.0.1.1/24")
	client := l.host(spine, "client", "10.0.1.1", "10.0.1.10/24")
	var racks []*rack
	for r := 1; r <= 2; r++ {
		gw := fmt.Sprintf("10.1.%d.1", r)
		rk := &rack{tor: l.router(fmt.Sprintf("tor%d", r), gw+"/24"), spineSide: fmt.Sprintf("10.0.0.%d", 2*(r-1)), torSide: fmt.Sprintf("10.0.0.%d", 2*r-1), cpIP: fmt.Sprintf("10.1.%d.10", r)}
		l.ip(rk.tor, "addr", "add", fmt.Sprintf("10.0.255.%d/32", r), "dev", "lo")
		if err := framework.Veth(spine, fmt.Sprintf("to-tor%d", r), rk.spineSide+"/31", rk.tor, "uplink", rk.torSide+"/31"); err != nil {
			t.Fatal(err)
		}
		rk.cp = l.host(rk.tor, fmt.Sprintf("cp%d", r), gw, rk.cpIP+"/24")
		for i := 1; i <= 2; i++ {
			n := &node{name: fmt.Sprintf("ls-r%d-n%d", r, i), ip: fmt.Sprintf("10.1.%d.2%d", r, i), podNet: fmt.Sprintf("10.244.%d%d.0/24", r, i)}
			n.ns = l.host(rk.tor, fmt.Sprintf("r%dn%d", r, i), gw, n.ip+"/24")
			if err := n.startHealthz(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(n.stopHealthz)
			rk.nodes = append(rk.nodes, n)
		}
		racks = append(racks, rk)
	}
	l.frr(spine, spineConf)
	tors := map[*rack]*framework.FRR{}
	for r, rk := range racks {
		block, err := framework.MarkdownBlock(topologiesPage, fmt.Sprintf("ToR of rack %d", r+1), "frr")
		if err != nil {
			t.Fatal(err)
		}
		tors[rk] = l.frr(rk.tor, block.Text)
	}
	var all []*node
	for _, rk := range racks {
		all = append(all, rk.nodes...)
	}

	// The Nodes, initialised, each with its pod CIDR; a Service.
	for _, n := range all {
		framework.CreateNode(t, cluster.Admin, n.name, "", true, []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: n.ip}})
		patch, _ := json.Marshal(map[string]any{"spec": map[string]any{"podCIDR": n.podNet, "podCIDRs": []string{n.podNet}}})
		if _, err := cluster.Admin.CoreV1().Nodes().Patch(ctx, n.name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	framework.CreateLBService(t, cluster.Admin, "default", service, nil)

	// The CCM's config: the page's, and the inventory of the site.
	peers, err := framework.MarkdownBlock(topologiesPage, "The CCM's peers", "yaml")
	if err != nil {
		t.Fatal(err)
	}
	var cfg strings.Builder
	cfg.WriteString(peers.Text + "inventory:\n  machines:\n")
	for r, rk := range racks {
		for _, n := range rk.nodes {
			fmt.Fprintf(&cfg, "  - name: %s\n    zone: rack%d\n    addresses: [{type: InternalIP, address: %s}]\n", n.name, r+1, n.ip)
		}
	}
	// Each ToR logs every path it receives and every one it drops.
	for _, rk := range racks {
		if out, err := tors[rk].Vtysh("configure terminal", "log stdout debugging", "end", "debug bgp updates in"); err != nil {
			t.Fatalf("%v %s", err, out)
		}
	}
	config := cfg.String()
	if edit != nil {
		config = edit(config)
	}
	cfgFile := filepath.Join(t.TempDir(), "cloud.yaml")
	if err := os.WriteFile(cfgFile, []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	var replicas []*framework.Process
	for r, rk := range racks {
		replicas = append(replicas, framework.StartReplica(t, framework.CCM{
			Binary: ccmBinary, Name: fmt.Sprintf("ccm-%s-rack%d", short, r+1), Kubeconfig: l.kubeconfig(rk.cp), CloudConfig: cfgFile, Netns: rk.cp.Name,
			Env: []string{"POD_IP=" + rk.cpIP},
			Args: []string{"--configure-cloud-routes=true", "--cluster-cidr=10.244.0.0/16", "--route-reconciliation-period=2s",
				"--readiness-address=127.0.0.1:" + statusPort},
		}))
		if r == 0 {
			framework.WaitLeader(t, replicas[0])
		}
	}
	vip := framework.WaitIngress(t, cluster.Admin, "default", service, 1)[0]
	for _, n := range all {
		l.ip(n.ns, "addr", "add", vip+"/32", "dev", "lo")
		serve(t, n, vip+":80")
	}
	logs := func() string {
		var b strings.Builder
		for _, rk := range racks {
			out, _ := tors[rk].Vtysh("show bgp ipv4 unicast summary", "show bgp ipv4 unicast "+vip)
			b.WriteString(out)
		}
		return b.String()
	}

	// carrying waits until each ToR routes the VIP to exactly the given
	// nodes of its rack (none: the ToR has no path from the CCM, and its
	// route leads to the spine), and the spine to the ToRs that have it.
	carrying := func(what string, want map[*rack][]*node) {
		t.Helper()
		framework.Eventually(t, 60*time.Second, what, func() (bool, string) {
			var toRs []string
			for _, rk := range racks {
				hops := []string{rk.spineSide}
				if len(want[rk]) > 0 {
					hops = hops[:0]
					for _, n := range want[rk] {
						hops = append(hops, n.ip)
					}
					toRs = append(toRs, rk.torSide)
				}
				table, _ := rk.tor.IP("-4", "route")
				if got := vias(routeLines(table, vip)); !slices.Equal(got, sorted(hops)) {
					return false, fmt.Sprintf("%s routes %s via %v, want %v\n%s", rk.tor.Name, vip, got, sorted(hops), framework.Tail(logs(), 40))
				}
			}
			table, _ := spine.IP("-4", "route")
			if got := vias(routeLines(table, vip)); !slices.Equal(got, sorted(toRs)) {
				return false, fmt.Sprintf("the spine routes %s via %v, want %v", vip, got, sorted(toRs))
			}
			return true, ""
		})
	}
	// connect makes connections from the client behind the spine, and
	// wants every one answered, by the given nodes and each of them.
	connect := func(what string, want []*node) {
		t.Helper()
		hits := map[string]int{}
		for range 80 {
			name, err := ask(client, "", vip+":80")
			if err != nil {
				name = "error: " + err.Error()
			}
			hits[name]++
		}
		var names []string
		for _, n := range want {
			names = append(names, n.name)
		}
		for name := range hits {
			if !slices.Contains(names, name) {
				t.Errorf("%s: a connection was answered by %q, want only %v: %v", what, name, names, hits)
			}
		}
		for _, name := range names {
			if hits[name] == 0 {
				t.Errorf("%s: no connection reached %s: %v", what, name, hits)
			}
		}
		t.Logf("%s: %v", what, hits)
	}

	return &leafSpine{l: l, spine: spine, client: client, racks: racks, tors: tors, all: all, replicas: replicas, vip: vip,
		logs: logs, carrying: carrying, connect: connect}
}

// TestLeafSpine builds the leaf-spine site of docs/network/topologies.md
// with the page's ToR and CCM blocks as they are: two racks, each behind
// its ToR, the ToRs under a spine, a client behind the spine, and a CCM
// replica in each rack peering with both ToRs by multihop eBGP.
func TestLeafSpine(t *testing.T) {
	ctx := context.Background()
	site := newLeafSpine(t, "ls", "leafspine", nil)
	racks, tors, all, replicas, vip := site.racks, site.tors, site.all, site.replicas, site.vip
	carrying, connect := site.carrying, site.connect
	carrying("each ToR has the VIP via its own rack's nodes, the spine via both ToRs", map[*rack][]*node{racks[0]: racks[0].nodes, racks[1]: racks[1].nodes})
	// Each pod CIDR is at the ToR of its node's rack, via the node, and at
	// the other ToR through the spine.
	framework.Eventually(t, 60*time.Second, "each pod CIDR via its node at its rack's ToR, via the spine at the other", func() (bool, string) {
		for _, rk := range racks {
			table, _ := rk.tor.IP("-4", "route")
			for _, other := range racks {
				for _, n := range other.nodes {
					want := []string{rk.spineSide}
					if other == rk {
						want = []string{n.ip}
					}
					if got := vias(routeLines(table, n.podNet)); !slices.Equal(got, want) {
						return false, fmt.Sprintf("%s routes %s via %v, want %v", rk.tor.Name, n.podNet, got, want)
					}
				}
			}
		}
		return true, ""
	})
	connect("a client behind the spine", all)
	// The ToRs were sent their own racks' paths only: their next-hop
	// filters dropped nothing from the CCM's sessions.
	for _, rk := range racks {
		fromCCM := 0
		for _, line := range strings.Split(tors[rk].BgpdLogs(), "\n") {
			if !slices.ContainsFunc(racks, func(r *rack) bool { return strings.Contains(line, " "+r.cpIP+"(") && strings.Contains(line, " rcvd ") }) {
				continue
			}
			fromCCM++
			// Other tests' Services (the API server is shared) are outside
			// the page's pool: the prefix filter drops those.
			if strings.Contains(line, "DENIED") && (strings.Contains(line, "about 10.0.100.") || strings.Contains(line, "about 10.244.")) {
				t.Errorf("%s was sent a path its rack filter dropped: %s", rk.tor.Name, line)
			}
		}
		if fromCCM == 0 {
			t.Errorf("%s logged no UPDATE received from the CCM: the check above proved nothing", rk.tor.Name)
		}
	}

	// The status page of each replica says the same: the VIP's Service, the
	// four nodes, and each ToR sent its rack's over sessions that took
	// ADD-PATH; the pod-CIDR routes.
	var names, ips []string
	for _, n := range all {
		names, ips = append(names, n.name), append(ips, n.ip)
	}
	wantRouters := []provider.RouterPaths{{Router: "10.0.255.1", NextHops: ips[:2]}, {Router: "10.0.255.2", NextHops: ips[2:]}}
	for _, rk := range racks {
		framework.Eventually(t, 60*time.Second, "the status page of the replica in "+rk.cp.Name, func() (bool, string) {
			st := status(t, rk.cp, vip)
			if len(st.VIPs) != 1 {
				return false, fmt.Sprintf("%+v", st)
			}
			v := st.VIPs[0]
			if v.Service != "default/leafspine" || v.Announce != "bgp" || !slices.Equal(v.Nodes, names) || !slices.Equal(v.NextHops, ips) ||
				!reflect.DeepEqual(v.Routers, wantRouters) || len(v.Problems) > 0 {
				return false, fmt.Sprintf("%+v, want Service default/leafspine, nodes %v, routers sent %+v, no problem", v, names, wantRouters)
			}
			if len(st.Routers) != 2 || st.Replica.Ready != "ok" {
				return false, fmt.Sprintf("%d routers, ready %q; want 2, ok", len(st.Routers), st.Replica.Ready)
			}
			// The whole page (the API server is shared with other tests'
			// Services and Nodes): each router is sent every VIP with next
			// hops (each has the four nodes) and the routes of its rack's
			// nodes.
			whole := status(t, rk.cp, "")
			vips := 0
			for _, v := range whole.VIPs {
				if v.Announce == "bgp" && len(v.NextHops) > 0 {
					vips++
				}
			}
			for _, r := range whole.Routers {
				prefixes := vips
				for _, rt := range whole.Routes {
					if want := slices.IndexFunc(wantRouters, func(w provider.RouterPaths) bool { return w.Router == r.Address }); want >= 0 &&
						len(rt.NextHops) == 1 && slices.Contains(wantRouters[want].NextHops, rt.NextHops[0]) {
						prefixes++
					}
				}
				if r.State != "established" || !r.AddPath || r.Prefixes != prefixes || r.Error != "" {
					return false, fmt.Sprintf("router %+v, want established, with ADD-PATH, sent the %d VIPs of the page and its rack's routes (%d prefixes)", r, vips, prefixes)
				}
			}
			for _, n := range all {
				if !slices.ContainsFunc(whole.Routes, func(r provider.RouteStatus) bool {
					return r.Prefix == n.podNet && slices.Equal(r.NextHops, []string{n.ip})
				}) {
					return false, fmt.Sprintf("routes %+v, want %s via %s", whole.Routes, n.podNet, n.ip)
				}
			}
			return true, ""
		})
	}

	// A node of rack 1 stops answering its health checks: it leaves its
	// ToR's route, the VIP keeps answering from the three others.
	dead := racks[0].nodes[0]
	dead.stopHealthz()
	carrying(dead.name+" failing its health checks leaves rack 1's route", map[*rack][]*node{racks[0]: racks[0].nodes[1:], racks[1]: racks[1].nodes})
	connect("with "+dead.name+" down", append([]*node{racks[0].nodes[1]}, racks[1].nodes...))

	// Rack 1's last node fails too: its ToR withdraws the VIP from the
	// spine, and every connection goes to rack 2.
	racks[0].nodes[1].stopHealthz()
	carrying("rack 1 without a healthy node: the spine routes the VIP to rack 2 only", map[*rack][]*node{racks[1]: racks[1].nodes})
	connect("with rack 1 down", racks[1].nodes)

	// Every node NotReady: the status page says why the VIP is announced
	// nowhere.
	for _, n := range all {
		framework.SetNodeStatus(ctx, cluster.Admin, n.name, false, []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: n.ip}})
	}
	framework.Eventually(t, 60*time.Second, "the status page says the VIP is not announced, and why", func() (bool, string) {
		st := status(t, racks[0].cp, vip)
		if len(st.VIPs) != 1 {
			return false, fmt.Sprintf("%+v", st)
		}
		v := st.VIPs[0]
		for _, r := range v.Routers {
			if len(r.NextHops) > 0 {
				return false, fmt.Sprintf("%+v", v)
			}
		}
		return len(v.Problems) == 1 && strings.HasPrefix(v.Problems[0], "VIPNotAnnounced: "), fmt.Sprintf("%+v", v)
	})
	for _, r := range replicas {
		if line := r.LogLine("BGP session state changed"); line == "" {
			t.Errorf("%s logged no BGP session", r.Name)
		}
	}
}

// statusPort is where the replicas serve /readyz and /status, on their
// host's loopback.
const statusPort = "10263"

// status is the status page of the replica on host, for vip ("": all).
func status(t *testing.T, host *framework.Netns, vip string) provider.Status {
	t.Helper()
	var st provider.Status
	url := "http://127.0.0.1:" + statusPort + "/status"
	if vip != "" {
		url += "?vip=" + vip
	}
	if err := host.GetJSON(url, &st); err != nil {
		t.Fatal(err)
	}
	return st
}

// vias is the sorted next hops of one route as `ip route` prints it.
func vias(route string) []string {
	var hops []string
	fields := strings.Fields(route)
	for i := 0; i+1 < len(fields); i++ {
		if fields[i] == "via" && !slices.Contains(hops, fields[i+1]) {
			hops = append(hops, fields[i+1])
		}
	}
	return sorted(hops)
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}
