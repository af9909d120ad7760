package framework

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

var aptOnce sync.Once

// EnsureCommands installs the Debian packages that provide the commands
// (command or absolute path: package) which are missing. It needs root and
// apt.
func EnsureCommands(commands map[string]string) error {
	var missing []string
	for cmd, pkg := range commands {
		var err error
		if filepath.IsAbs(cmd) {
			_, err = os.Stat(cmd)
		} else {
			_, err = exec.LookPath(cmd)
		}
		if err != nil && !slices.Contains(missing, pkg) {
			missing = append(missing, pkg)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("the tests need the Debian packages %v, which are not installed, and installing them needs root", missing)
	}
	var updateErr error
	aptOnce.Do(func() {
		if out, err := exec.Command("apt-get", "-o", "DPkg::Lock::Timeout=300", "update").CombinedOutput(); err != nil {
			updateErr = fmt.Errorf("apt-get update: %w\n%s", err, out)
		}
	})
	if updateErr != nil {
		return updateErr
	}
	cmd := exec.Command("apt-get", append([]string{"-o", "DPkg::Lock::Timeout=300", "install", "-y", "--no-install-recommends"}, missing...)...)
	cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("apt-get install %v: %w\n%s", missing, err, out)
	}
	return nil
}

// GoBGPNeighbor is a neighbour of a test gobgpd.
type GoBGPNeighbor struct {
	Address  string
	ASN      uint32
	Password string
	// AddPath makes gobgpd receive every path of a prefix (RFC 7911).
	AddPath bool
	// Dial makes gobgpd open the session (to port 179) rather than wait
	// for the neighbour: a speaker at a router, as a stranger would be.
	Dial bool
}

// GoBGPD is a real gobgpd, a passive peer on loopback for assertions on
// what it learned, or a speaker that dials a router.
type GoBGPD struct {
	Address string // where it listens
	Port    int
	APIPort int
	ns      *Netns
	proc    *Process
}

// StartGoBGPD starts gobgpd listening on address (a loopback address) at a
// free port, with its API on another.
func StartGoBGPD(dir, name, address string, asn uint32, neighbors []GoBGPNeighbor) (*GoBGPD, error) {
	return StartGoBGPDIn(nil, dir, name, address, asn, neighbors)
}

// StartGoBGPDOnPort is StartGoBGPD on a given port, as a restarted router.
func StartGoBGPDOnPort(dir, name, address string, port int, asn uint32, neighbors []GoBGPNeighbor) (*GoBGPD, error) {
	return startGoBGPD(nil, dir, name, address, port, asn, neighbors)
}

// StartGoBGPDIn is StartGoBGPD inside a network namespace (nil: the test's).
// A port found free can be taken by another process before gobgpd binds it
// (FreePort closes its listener): a start that lost that race is tried
// again on other ports.
func StartGoBGPDIn(ns *Netns, dir, name, address string, asn uint32, neighbors []GoBGPNeighbor) (*GoBGPD, error) {
	for attempt := 1; ; attempt++ {
		port, err := FreePort()
		if err != nil {
			return nil, err
		}
		g, err := startGoBGPD(ns, dir, name, address, port, asn, neighbors)
		if err == nil || attempt == 5 || !strings.Contains(err.Error(), "address already in use") {
			return g, err
		}
	}
}

func startGoBGPD(ns *Netns, dir, name, address string, port int, asn uint32, neighbors []GoBGPNeighbor) (*GoBGPD, error) {
	if err := EnsureCommands(map[string]string{"gobgpd": "gobgpd", "gobgp": "gobgpd"}); err != nil {
		return nil, err
	}
	apiPort, err := FreePort()
	if err != nil {
		return nil, err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "[global.config]\n  as = %d\n  router-id = %q\n  port = %d\n  local-address-list = [%q]\n", asn, address, port, address)
	for _, n := range neighbors {
		fmt.Fprintf(&b, "\n[[neighbors]]\n  [neighbors.config]\n    neighbor-address = %q\n    peer-as = %d\n", n.Address, n.ASN)
		if n.Password != "" {
			fmt.Fprintf(&b, "    auth-password = %q\n", n.Password)
		}
		if n.Dial {
			fmt.Fprintf(&b, "  [neighbors.transport.config]\n    local-address = %q\n", address)
		} else {
			fmt.Fprintf(&b, "  [neighbors.transport.config]\n    passive-mode = true\n")
		}
		fmt.Fprintf(&b, "  [neighbors.graceful-restart.config]\n    enabled = true\n    helper-only = true\n")
		for _, fam := range []string{"ipv4-unicast", "ipv6-unicast"} {
			fmt.Fprintf(&b, "  [[neighbors.afi-safis]]\n    [neighbors.afi-safis.config]\n      afi-safi-name = %q\n", fam)
			fmt.Fprintf(&b, "    [neighbors.afi-safis.mp-graceful-restart.config]\n      enabled = true\n")
			if n.AddPath {
				fmt.Fprintf(&b, "    [neighbors.afi-safis.add-paths.config]\n      receive = true\n")
			}
		}
	}
	conf := filepath.Join(dir, name+".toml")
	if err := os.WriteFile(conf, []byte(b.String()), 0o600); err != nil {
		return nil, err
	}
	args := []string{"gobgpd", "-f", conf, "-t", "toml", "-p", "--api-hosts", fmt.Sprintf("127.0.0.1:%d", apiPort), "--pprof-disable"}
	if ns != nil {
		args = append([]string{"ip", "netns", "exec", ns.Name}, args...)
	}
	p, err := StartProcess(args[0], dir, name, 0, nil, args[1:]...)
	if err != nil {
		return nil, err
	}
	g := &GoBGPD{Address: address, Port: port, APIPort: apiPort, ns: ns, proc: p}
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, err := g.CLI("global"); err == nil {
			return g, nil
		}
		if done, err := p.Exited(); done || time.Now().After(deadline) {
			p.Stop()
			return nil, fmt.Errorf("gobgpd did not start (%v):\n%s", err, p.Logs())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Stop ends gobgpd.
func (g *GoBGPD) Stop() { g.proc.Stop() }

// Logs is what gobgpd printed.
func (g *GoBGPD) Logs() string { return g.proc.Logs() }

func (g *GoBGPD) CLI(args ...string) ([]byte, error) {
	args = append([]string{"gobgp", "-u", "127.0.0.1", "-p", fmt.Sprint(g.APIPort)}, args...)
	if g.ns != nil {
		args = append([]string{"ip", "netns", "exec", g.ns.Name}, args...)
	}
	cmd := exec.Command(args[0], args[1:]...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("gobgp %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return out, nil
}

// RIB returns gobgpd's global RIB for family ("ipv4" or "ipv6"): every
// prefix with the next hops of its paths, in the order gobgpd lists them.
func (g *GoBGPD) RIB(family string) (map[string][]string, error) {
	out, err := g.CLI("global", "rib", "-a", family, "-j")
	if err != nil {
		return nil, err
	}
	var rib map[string][]struct {
		Attrs []struct {
			Type    int    `json:"type"`
			Nexthop string `json:"nexthop"`
		} `json:"attrs"`
	}
	if err := json.Unmarshal(out, &rib); err != nil {
		return nil, fmt.Errorf("reading gobgp's RIB %q: %w", out, err)
	}
	res := map[string][]string{}
	for prefix, paths := range rib {
		for _, p := range paths {
			for _, a := range p.Attrs {
				if a.Nexthop != "" {
					res[prefix] = append(res[prefix], a.Nexthop)
				}
			}
		}
	}
	return res, nil
}

// RIBCount returns how many destinations and paths gobgpd's global RIB has
// for family: a cheap question, where RIB dumps a large table.
func (g *GoBGPD) RIBCount(family string) (destinations, paths int, err error) {
	out, err := g.CLI("global", "rib", "summary", "-a", family)
	if err != nil {
		return 0, 0, err
	}
	for _, line := range strings.Split(string(out), "\n") {
		if _, err := fmt.Sscanf(strings.TrimSpace(line), "Destination: %d, Path: %d", &destinations, &paths); err == nil {
			return destinations, paths, nil
		}
	}
	return 0, 0, fmt.Errorf("no counts in gobgp's RIB summary %q", out)
}

// NeighborState returns gobgpd's view of the session with addr:
// "established", "active", ...
func (g *GoBGPD) NeighborState(addr string) (string, error) {
	out, err := g.CLI("neighbor", addr, "-j")
	if err != nil {
		return "", err
	}
	var n struct {
		State struct {
			SessionState int `json:"session_state"`
		} `json:"state"`
	}
	if err := json.Unmarshal(out, &n); err != nil {
		return "", fmt.Errorf("reading gobgp neighbor %q: %w", out, err)
	}
	// The API's SessionState enumeration.
	names := []string{"unknown", "idle", "connect", "active", "opensent", "openconfirm", "established"}
	if n.State.SessionState < 0 || n.State.SessionState >= len(names) {
		return fmt.Sprint(n.State.SessionState), nil
	}
	return names[n.State.SessionState], nil
}
