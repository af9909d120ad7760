package framework

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

const frrDaemons = "/usr/lib/frr"

// FRR is a router: zebra, bfdd and bgpd of the Debian frr package, running
// in a network namespace, installing what bgpd learns into that
// namespace's kernel routing table.
type FRR struct {
	ns    *Netns
	dir   string
	zebra *Process
	bfdd  *Process
	bgpd  *Process
}

// StartFRR runs zebra, bfdd and bgpd with the given configuration, as an
// integrated frr.conf: its top-level `bfd` node (profiles) goes to bfdd,
// the rest to bgpd; bfdd serves the neighbours given `bfd` there.
func StartFRR(ns *Netns, dir, config string) (*FRR, error) {
	bgpConfig, bfddConfig := splitConfig(config)
	if err := EnsureCommands(map[string]string{filepath.Join(frrDaemons, "bgpd"): "frr", "vtysh": "frr"}); err != nil {
		return nil, err
	}
	run := filepath.Join(dir, "frr")
	if err := os.MkdirAll(run, 0o755); err != nil {
		return nil, err
	}
	// The daemons drop to user frr, who must reach their directory.
	if err := os.Chmod(dir, 0o711); err != nil {
		return nil, err
	}
	u, err := user.Lookup("frr")
	if err != nil {
		return nil, fmt.Errorf("the frr package's user: %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	if err := os.Chown(run, uid, gid); err != nil {
		return nil, err
	}
	for name, content := range map[string]string{"zebra.conf": "hostname router\n", "bfdd.conf": bfddConfig, "bgpd.conf": bgpConfig} {
		p := filepath.Join(run, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			return nil, err
		}
		os.Chown(p, uid, gid)
	}
	f := &FRR{ns: ns, dir: run}
	common := []string{"-u", "frr", "-g", "frr", "-z", filepath.Join(run, "zserv.api"), "--vty_socket", run}
	f.zebra, err = StartProcess("ip", dir, "zebra", 0, nil, append([]string{"netns", "exec", ns.Name, filepath.Join(frrDaemons, "zebra"),
		"-i", filepath.Join(run, "zebra.pid"), "-f", filepath.Join(run, "zebra.conf")}, common...)...)
	if err != nil {
		return nil, err
	}
	if err := waitFile(filepath.Join(run, "zserv.api"), 20*time.Second); err != nil {
		f.Stop()
		return nil, fmt.Errorf("zebra did not start: %w\n%s", err, f.zebra.Logs())
	}
	f.bfdd, err = StartProcess("ip", dir, "bfdd", 0, nil, append([]string{"netns", "exec", ns.Name, filepath.Join(frrDaemons, "bfdd"),
		"-i", filepath.Join(run, "bfdd.pid"), "-f", filepath.Join(run, "bfdd.conf"), "--bfdctl", filepath.Join(run, "bfdd.sock")}, common...)...)
	if err != nil {
		f.Stop()
		return nil, err
	}
	f.bgpd, err = StartProcess("ip", dir, "bgpd", 0, nil, append([]string{"netns", "exec", ns.Name, filepath.Join(frrDaemons, "bgpd"),
		"-i", filepath.Join(run, "bgpd.pid"), "-f", filepath.Join(run, "bgpd.conf")}, common...)...)
	if err != nil {
		f.Stop()
		return nil, err
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, err := f.Vtysh("show bgp summary"); err == nil {
			return f, nil
		}
		if time.Now().After(deadline) {
			f.Stop()
			return nil, fmt.Errorf("bgpd did not start:\n%s", f.bgpd.Logs())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// splitConfig is an integrated frr.conf as bgpd's file and bfdd's: the
// top-level `bfd` node, to the `!` that ends it, is bfdd's.
func splitConfig(config string) (bgpd, bfdd string) {
	var b, f strings.Builder
	f.WriteString("hostname router\n")
	inBFD := false
	for _, line := range strings.SplitAfter(config, "\n") {
		text := strings.TrimRight(line, "\n")
		if text == "bfd" {
			inBFD = true
		}
		if inBFD {
			f.WriteString(line)
			inBFD = text != "!"
			continue
		}
		b.WriteString(line)
	}
	return b.String(), f.String()
}

func waitFile(path string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		if _, err := os.Stat(path); err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not appear", path)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Vtysh runs vtysh commands, in order, against this router.
func (f *FRR) Vtysh(commands ...string) (string, error) {
	args := []string{"--vty_socket", f.dir}
	for _, c := range commands {
		args = append(args, "-c", c)
	}
	out, err := exec.Command("vtysh", args...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("vtysh %q: %w: %s", commands, err, out)
	}
	return string(out), nil
}

// FRRPath is one path of a prefix as FRR shows it (`show bgp … json`).
type FRRPath struct {
	Stale  bool `json:"stale"`
	Metric *int `json:"metric"` // nil: no MED
	ASPath struct {
		String string `json:"string"`
	} `json:"aspath"`
	Community struct {
		String string `json:"string"`
	} `json:"community"`
	Peer struct {
		PeerID string `json:"peerId"` // the neighbour's address
	} `json:"peer"`
	Nexthops []struct {
		IP string `json:"ip"`
	} `json:"nexthops"`
}

// NextHop is the path's next hop ("" if FRR shows none).
func (p FRRPath) NextHop() string {
	if len(p.Nexthops) == 0 {
		return ""
	}
	return p.Nexthops[0].IP
}

// Paths are the paths the router holds of prefix ("10.0.100.1/32"), with
// FRR's own JSON for failure messages. A prefix it does not hold has none.
func (f *FRR) Paths(prefix string) ([]FRRPath, string, error) {
	family := "ipv4"
	if strings.Contains(prefix, ":") {
		family = "ipv6"
	}
	out, err := f.Vtysh("show bgp " + family + " unicast " + prefix + " json")
	if err != nil {
		return nil, out, err
	}
	var rib struct {
		Paths []FRRPath `json:"paths"`
	}
	if err := json.Unmarshal([]byte(out), &rib); err != nil {
		return nil, out, fmt.Errorf("reading FRR's paths of %s: %w", prefix, err)
	}
	return rib.Paths, out, nil
}

// Received is what each neighbour (by address) sent in family ("ipv4",
// "ipv6") that the router accepted: FRR's pfxRcd, which with ADD-PATH
// counts paths, not prefixes.
func (f *FRR) Received(family string) (map[string]int, error) {
	out, err := f.Vtysh("show bgp " + family + " unicast summary json")
	if err != nil {
		return nil, err
	}
	var sum struct {
		Peers map[string]struct {
			PfxRcd int `json:"pfxRcd"`
		} `json:"peers"`
	}
	if err := json.Unmarshal([]byte(out), &sum); err != nil {
		return nil, fmt.Errorf("reading FRR's %s summary: %w: %s", family, err, out)
	}
	got := map[string]int{}
	for peer, p := range sum.Peers {
		got[peer] = p.PfxRcd
	}
	return got, nil
}

// BgpdLogs is what bgpd printed.
func (f *FRR) BgpdLogs() string { return f.bgpd.Logs() }

// Routes returns the router's kernel routes (`ip route` in its namespace).
func (f *FRR) Routes(family string) (string, error) {
	return f.ns.IP(family, "route")
}

// Stop ends bgpd and zebra.
func (f *FRR) Stop() {
	for _, p := range []*Process{f.bgpd, f.bfdd, f.zebra} {
		if p != nil {
			p.Stop()
		}
	}
}

// Logs is what the daemons printed.
func (f *FRR) Logs() string {
	var b strings.Builder
	for _, p := range []*Process{f.zebra, f.bfdd, f.bgpd} {
		if p != nil {
			b.WriteString(p.Logs())
		}
	}
	return b.String()
}

// BFDUp is how many of peers (all of the router's when none is given)
// have a BFD session up, and what the router said.
func (f *FRR) BFDUp(peers ...string) (int, string) {
	out, _ := f.Vtysh("show bfd peers json")
	var sessions []struct {
		Peer   string `json:"peer"`
		Status string `json:"status"`
	}
	json.Unmarshal([]byte(out), &sessions)
	up := 0
	for _, s := range sessions {
		if s.Status == "up" && (len(peers) == 0 || slices.Contains(peers, s.Peer)) {
			up++
		}
	}
	return up, out
}
