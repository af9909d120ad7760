package provider

import "testing"

func TestReloadKeepsStartSettings(t *testing.T) {
	on := newCloud(t, "inventory: {}\nroutes:\n  nextHopAddressType: ExternalIP\n"+speaker)
	on.apply(mustParse(t, "inventory: {}\n"+speaker))
	if _, ok := on.Routes(); !ok {
		t.Errorf("a reload without a routes section switched routes off")
	}
	if got := on.lb.cfg.Routes; got == nil || got.NextHopAddressType != "ExternalIP" {
		t.Errorf("routes section in force after the reload: %+v", got)
	}
	on.apply(mustParse(t, "inventory: {}\nroutes:\n  nextHopAddressType: InternalIP\n"+speaker))
	if got := on.lb.cfg.Routes; got == nil || got.NextHopAddressType != "InternalIP" {
		t.Errorf("a change within the routes section was not applied: %+v", got)
	}

	off := newCloud(t, "inventory: {}\n"+speaker)
	off.apply(mustParse(t, "inventory: {}\nroutes: {}\n"+speaker))
	if _, ok := off.Routes(); ok {
		t.Errorf("a reload switched routes on; the route controller was not started for them")
	}

	// The speaker's identity and listener stay; its peers change.
	c := newCloud(t, "inventory: {}\nbgp:\n  localASN: 64512\n  routerID: 10.0.0.254\n  listenPort: 1790\n")
	c.apply(mustParse(t, "inventory: {}\nbgp:\n  localASN: 64513\n  routerID: 10.0.0.253\n  peers: [{address: 10.0.0.1, asn: 64500}]\n"))
	got := c.lb.cfg.BGP
	if got.LocalASN != 64512 || got.RouterID != "10.0.0.254" || got.ListenPort != 1790 {
		t.Errorf("a reload changed the speaker's identity or listener: %+v", got)
	}
	if len(got.Peers) != 1 {
		t.Errorf("the reload's peers were not put in force: %+v", got.Peers)
	}
}
