package provider

import (
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/config"
)

// keepStartSettings returns cfg with the settings that only a restart can
// change put back to those in force, and says which ones a reload tried
// to change (a log line, and an Event on the CCM's Pod):
//   - the routes section on or off: the framework starts the route
//     controller only when Routes() says so at start, so a reload cannot
//     switch routes on, and switching them off would withdraw every pod
//     route while the Nodes' status still says their network is fine;
//   - the speaker's own identity and listener (bgp.localASN, routerID,
//     listenPort, listenAddresses): GoBGP takes them once, at its start.
//
// Everything else in cfg, within the routes section and the peers too, is
// put in force.
func (c *Cloud) keepStartSettings(cfg *config.Config) *config.Config {
	c.lb.mu.Lock()
	inForce := c.lb.cfg
	c.lb.mu.Unlock()
	kept := *cfg
	var changes []string
	switch {
	case cfg.Routes == nil && inForce.Routes != nil:
		kept.Routes = inForce.Routes
		changes = append(changes, "removes the routes section (pod routes stay announced with the routes section in force)")
	case cfg.Routes != nil && inForce.Routes == nil:
		kept.Routes = nil
		changes = append(changes, "adds a routes section (routes stay off)")
	}
	old, cur := inForce.BGP, cfg.BGP
	if old.LocalASN != cur.LocalASN || old.RouterID != cur.RouterID || old.ListenPort != cur.ListenPort || !slices.Equal(old.ListenAddresses, cur.ListenAddresses) {
		kept.BGP.LocalASN, kept.BGP.RouterID, kept.BGP.ListenPort, kept.BGP.ListenAddresses = old.LocalASN, old.RouterID, old.ListenPort, old.ListenAddresses
		changes = append(changes, "changes bgp.localASN, bgp.routerID, bgp.listenPort or bgp.listenAddresses (the speaker keeps those it started with)")
	}
	if len(changes) == 0 {
		return cfg
	}
	what := strings.Join(changes, "; ")
	klog.ErrorS(nil, "Cloud config changes what needs a restart of the CCM; the rest of it is in force", "path", c.configPath, "change", what)
	c.podEvent(v1.EventTypeWarning, "CloudConfigNeedsRestart", "cloud config %s %s until the CCM restarts; the rest of it is in force", c.configPath, what)
	return &kept
}
