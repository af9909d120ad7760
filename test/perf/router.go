package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/test/framework"
)

var withFRR = flag.Bool("frr", false, "also peer the CCM with the FRR of docs/network/routers.md's recipe (Debian's frr), in a network namespace of the bench's, and record what the router holds: its kernel table, the paths it received, its daemons' memory")

// The router's link to this host, and the address the CCM peers with.
const (
	routerHostEnd  = "198.51.100.1"
	routerAddr     = "198.51.100.2"
	routersPage    = "docs/network/routers.md"
	topologiesPage = "docs/network/topologies.md"
)

// router is the recipe's FRR in a network namespace of the bench's, on a
// veth to this host: a site's router at the bench's size. The nodes'
// addresses are routed out of its link (no traffic is sent: the table is
// what is measured), so that each VIP's route names its nodes, and the
// recipe gets one line more, `disable-connected-check`: single-hop eBGP
// takes only next hops on a connected subnet.
type router struct {
	ns      *framework.Netns
	frr     *framework.FRR
	dir     string
	hostEnd string
	monitor *framework.Process // `ip -ts monitor route` in the namespace
}

func startRouter(paths int) (_ *router, err error) {
	recipe, err := framework.MarkdownBlock(routersPage, "FRR", "frr")
	if err != nil {
		return nil, err
	}
	conf, err := rewrite(recipe.Text, routersPage, [][2]string{
		{"10.0.100.0/24 ge 32", "198.19.0.0/18 ge 32"}, // the bench's pool
		{"bgp router-id 10.0.0.1", "bgp router-id " + routerAddr},
		{"bgp listen range 10.0.0.8/29", "bgp listen range " + routerHostEnd + "/32"},
		{" neighbor CCM remote-as 64512\n", " neighbor CCM remote-as 64512\n neighbor CCM disable-connected-check\n"},
		{"maximum-paths 16", fmt.Sprintf("maximum-paths %d", paths)},
	})
	if err != nil {
		return nil, err
	}
	ns, err := linkedNetns("bmbench-router", "bmbench-rtr0", routerHostEnd+"/30")
	if err != nil {
		return nil, err
	}
	for _, args := range [][]string{{"addr", "add", routerAddr + "/30", "dev", "eth0"}, {"link", "set", "eth0", "up"}, {"link", "set", "lo", "up"},
		{"route", "add", "198.18.0.0/16", "dev", "eth0"}} {
		if _, err := ns.IP(args...); err != nil {
			exec.Command("ip", "link", "del", "bmbench-rtr0").Run()
			ns.Delete()
			return nil, err
		}
	}
	return runRouter(ns, "bmbench-rtr0", conf)
}

// rewrite is a router's configuration from a page's block: each pair's
// first text replaced by its second, every one of them there to replace.
func rewrite(conf, page string, pairs [][2]string) (string, error) {
	for _, r := range pairs {
		if !strings.Contains(conf, r[0]) {
			return "", fmt.Errorf("%s: the router's block has no %q", page, r[0])
		}
		conf = strings.ReplaceAll(conf, r[0], r[1])
	}
	return conf, nil
}

// runRouter runs FRR with conf in ns, and a route monitor; hostEnd, if
// not empty, is ns's link on this host, deleted with it. On error ns is
// deleted.
func runRouter(ns *framework.Netns, hostEnd, conf string) (_ *router, err error) {
	r := &router{ns: ns, hostEnd: hostEnd}
	defer func() {
		if err != nil {
			r.stop()
		}
	}()
	// The daemons, running as user frr, must reach their directory.
	if r.dir, err = os.MkdirTemp("", "baremetal-perf-frr-"); err != nil {
		return nil, err
	}
	if r.monitor, err = framework.StartProcess("ip", r.dir, "route-monitor", 0, nil, "netns", "exec", r.ns.Name, "ip", "-ts", "monitor", "route"); err != nil {
		return nil, err
	}
	if r.frr, err = framework.StartFRR(r.ns, r.dir, conf); err != nil {
		return nil, err
	}
	return r, nil
}

func (r *router) stop() {
	if r.frr != nil {
		r.frr.Stop()
	}
	if r.monitor != nil {
		r.monitor.Stop()
	}
	if r.hostEnd != "" {
		exec.Command("ip", "link", "del", r.hostEnd).Run()
	}
	if r.ns != nil {
		r.ns.Delete()
	}
	if r.dir != "" {
		os.RemoveAll(r.dir)
	}
}

// routerPeer is the CCM's cloud-config peer line for the router, if any.
func (b *bench) routerPeer() string {
	if b.router == nil {
		return ""
	}
	return fmt.Sprintf("  - {address: %s, asn: 64500, holdTime: 30s, connectRetryTime: 1s, maximumPaths: %d}\n", routerAddr, pathsPerVIP())
}

// received is how many paths (with ADD-PATH, one per VIP and node) the
// router holds from the CCM.
func (r *router) received() (int, error) {
	got, err := r.frr.Received("ipv4")
	if err != nil {
		return 0, err
	}
	n := 0
	for _, paths := range got {
		n += paths
	}
	return n, nil
}

// kernel is the router's kernel table of BGP routes: each prefix's next
// hops, sorted.
func (r *router) kernel() (map[netip.Addr][]string, error) {
	out, err := r.ns.IP("-4", "-j", "route", "show", "proto", "bgp")
	if err != nil {
		return nil, err
	}
	var routes []struct {
		Dst      string `json:"dst"`
		Gateway  string `json:"gateway"`
		Nexthops []struct {
			Gateway string `json:"gateway"`
		} `json:"nexthops"`
	}
	if err := json.Unmarshal([]byte(out), &routes); err != nil {
		return nil, fmt.Errorf("reading the router's routes: %w", err)
	}
	table := map[netip.Addr][]string{}
	for _, rt := range routes {
		a, err := netip.ParseAddr(rt.Dst) // a host route is printed without its length
		if err != nil {
			continue
		}
		var hops []string
		if rt.Gateway != "" {
			hops = append(hops, rt.Gateway)
		}
		for _, h := range rt.Nexthops {
			hops = append(hops, h.Gateway)
		}
		slices.Sort(hops)
		table[a] = hops
	}
	return table, nil
}

// has reports whether the router's kernel routes want VIPs, each via the
// next hops c gives it.
func (r *router) has(want int, c carriers) bool {
	table, err := r.kernel()
	if err != nil || len(table) != want {
		return false
	}
	for vip, hops := range table {
		if !slices.Equal(hops, c.of(vip)) {
			return false
		}
	}
	return true
}

// lastChange is the time of the last kernel route change the monitor
// printed (`ip -ts`: "[2026-12-06T05:01:02.123456] …").
func (r *router) lastChange() (time.Time, error) {
	var last time.Time
	sc := bufio.NewScanner(strings.NewReader(r.monitor.Logs()))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "[") {
			continue
		}
		end := strings.IndexByte(line, ']')
		if end < 0 {
			continue
		}
		if t, err := time.ParseInLocation("2006-01-02T15:04:05.000000", line[1:end], time.Local); err == nil {
			last = t
		}
	}
	if last.IsZero() {
		return last, fmt.Errorf("the route monitor printed no change")
	}
	return last, nil
}

// memory is the RSS and peak RSS of bgpd and zebra, in MiB.
func (r *router) memory() (map[string]float64, error) {
	out := map[string]float64{}
	for _, d := range []string{"bgpd", "zebra"} {
		data, err := os.ReadFile(filepath.Join(r.dir, "frr", d+".pid"))
		if err != nil {
			return nil, err
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
		if err != nil {
			return nil, fmt.Errorf("%s's pid file: %w", d, err)
		}
		m, err := memory(pid)
		if err != nil {
			return nil, err
		}
		out[d+" RSS"], out[d+" peak RSS"] = m["VmRSS"], m["VmHWM"]
	}
	return out, nil
}

// routerHas times the router's kernel reaching c (every VIP via its next
// hops) after start: the last route change the monitor saw before a check
// of the table found it so. A site's traffic follows this table.
func (b *bench) routerHas(start time.Time, c carriers, scenario, name string) (time.Time, error) {
	if b.router == nil {
		return time.Time{}, nil
	}
	if err := waitFor(10*time.Minute, func() bool { return b.router.has(*services, c) }); err != nil {
		return time.Time{}, fmt.Errorf("%s: the router's kernel table: %w", scenario, err)
	}
	at, err := b.router.lastChange()
	if err != nil {
		return time.Time{}, err
	}
	b.record(scenario, name, "s", at.Sub(start).Seconds())
	return at, nil
}

// routerSize records what the router holds with every VIP in place.
func (b *bench) routerSize() error {
	if b.router == nil {
		return nil
	}
	paths, err := b.router.received()
	if err != nil {
		return err
	}
	b.record("burst", "router (FRR): paths received from the CCM", "paths", float64(paths))
	b.record("burst", "router (FRR): paths per VIP", "paths", float64(paths)/float64(*services))
	mem, err := b.router.memory()
	if err != nil {
		return err
	}
	for _, k := range []string{"bgpd RSS", "bgpd peak RSS", "zebra RSS", "zebra peak RSS"} {
		b.record("burst", "router (FRR): "+k, "MiB", mem[k])
	}
	return nil
}
