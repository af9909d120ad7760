package provider

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/bgp"
	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/config"
	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/report"
)

// desiredPaths converges c once, as its loop would, and returns the BGP
// table it hands the speaker of the default selection.
func desiredPaths(c *Cloud) []bgp.Announcement {
	if err := c.lb.converge(); err != nil {
		panic(err)
	}
	c.lb.mu.Lock()
	defer c.lb.mu.Unlock()
	return c.lb.last.Paths(config.PathSelection{MaximumPaths: config.DefaultMaximumPaths})
}

// announcedVIPs is each VIP c announces over BGP, with its next hops.
func announcedVIPs(c *Cloud) []string {
	var out []string
	for _, p := range desiredPaths(c) {
		out = append(out, fmt.Sprint(p.Prefix.Addr(), " via ", p.NextHops))
	}
	slices.Sort(out)
	return out
}

func pathTo(c *Cloud, vip string) string {
	for _, p := range desiredPaths(c) {
		if p.Prefix.Addr() == netip.MustParseAddr(vip) {
			return fmt.Sprintf("via %v communities %v", p.NextHops, p.Communities)
		}
	}
	return "not announced"
}

// events records the Events a cloud says, as "Kind name Reason: message"
// ("Pod Reason: message" for its own Pod).
type events struct {
	mu  sync.Mutex
	all []string
}

func recordEvents(c *Cloud) *events {
	ev := &events{}
	c.lb.report.Events = func(obj report.Object, _, reason, msg string) {
		ev.add(strings.TrimSpace(obj.Kind+" "+obj.Name) + " " + reason + ": " + msg)
	}
	return ev
}

func (e *events) add(s string) { e.mu.Lock(); e.all = append(e.all, s); e.mu.Unlock() }
func (e *events) has(prefix string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.ContainsFunc(e.all, func(s string) bool { return strings.HasPrefix(s, prefix) })
}
