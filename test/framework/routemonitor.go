package framework

import (
	"strings"
	"testing"
	"time"
)

// MonitorRoutes records every change of the kernel routes in a router's
// namespace (`ip monitor route`) until the test ends.
func MonitorRoutes(t *testing.T, router *Netns) *Process {
	t.Helper()
	monitor, err := StartProcess("ip", t.TempDir(), "route-monitor", 0, nil, "netns", "exec", router.Name, "ip", "monitor", "route")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(monitor.Stop)
	// A change of the test's own first proves the monitor records.
	// It may not listen yet at first: the route is added until it is seen.
	const canary = "198.51.100.250/32"
	Eventually(t, 10*time.Second, "the route monitor sees a route added", func() (bool, string) {
		router.IP("route", "del", canary, "dev", "lo")
		if _, err := router.IP("route", "add", canary, "dev", "lo"); err != nil {
			return false, err.Error()
		}
		time.Sleep(200 * time.Millisecond)
		return strings.Contains(monitor.Logs(), "198.51.100.250"), "not in the monitor's output"
	})
	return monitor
}

// RouteDeletions are the lines of `ip monitor route` output that delete a
// route to one of prefixes, and of bgpd's zebra debug log (if given) that
// tell zebra to.
func RouteDeletions(monitorLog, bgpdLog string, prefixes []string) []string {
	watched := map[string]bool{}
	for _, p := range prefixes {
		watched[p] = true
		// ip prints a host route without its length.
		watched[strings.TrimSuffix(p, "/32")] = true
	}
	var out []string
	for _, line := range strings.Split(monitorLog, "\n") {
		if f := strings.Fields(line); len(f) > 1 && f[0] == "Deleted" && watched[f[1]] {
			out = append(out, "kernel: "+line)
		}
	}
	for _, line := range strings.Split(bgpdLog, "\n") {
		if !strings.Contains(line, "Tx route delete") {
			continue
		}
		for _, f := range strings.Fields(line) {
			if strings.Contains(f, "/") && watched[f] {
				out = append(out, "bgpd: "+line)
				break
			}
		}
	}
	return out
}
