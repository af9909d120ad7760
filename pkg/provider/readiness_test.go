package provider

import (
	"net/netip"
	"strings"
	"testing"
)

func TestNotReady(t *testing.T) {
	a, b := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.2")
	for _, tc := range []struct {
		name string
		s    readyState
		want string // a part of the reason; "" for ready
	}{
		{"not listed yet", readyState{bgp: true, speaking: true}, "informers"},
		{"no BGP in the config, listed", readyState{synced: true}, ""},
		{"speaker stopped (API outage)", readyState{synced: true, bgp: true, peers: []netip.Addr{a}, established: map[netip.Addr]bool{a: true}}, "speaker is not running"},
		{"no peer configured", readyState{synced: true, bgp: true, speaking: true}, "no BGP peer"},
		{"one of two sessions up", readyState{synced: true, bgp: true, speaking: true, peers: []netip.Addr{a, b}, established: map[netip.Addr]bool{a: true}}, "192.0.2.2"},
		{"a session that went down", readyState{synced: true, bgp: true, speaking: true, peers: []netip.Addr{a}, established: map[netip.Addr]bool{a: false}}, "192.0.2.1"},
		{"every session up", readyState{synced: true, bgp: true, speaking: true, peers: []netip.Addr{a, b}, established: map[netip.Addr]bool{a: true, b: true}}, ""},
		{"an established peer that left the config does not count", readyState{synced: true, bgp: true, speaking: true, peers: []netip.Addr{b}, established: map[netip.Addr]bool{a: true}}, "192.0.2.2"},
		{"leader, layer 2 interface not open", readyState{synced: true, l2: []string{"eth1"}, open: map[string]bool{}}, "eth1"},
		{"leader, layer 2 socket down", readyState{synced: true, l2: []string{"eth1"}, open: map[string]bool{"eth1": true}, socketDown: map[string]bool{"eth1/arp": true}}, "eth1/arp"},
		{"leader, layer 2 sockets open", readyState{synced: true, l2: []string{"eth1"}, open: map[string]bool{"eth1": true}, socketDown: map[string]bool{"eth1/arp": false}}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := notReady(tc.s)
			if (got == "") != (tc.want == "") || !strings.Contains(got, tc.want) {
				t.Errorf("notReady = %q, want %q", got, tc.want)
			}
		})
	}
}
