package provider

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/intstr"
)

func TestNotReady(t *testing.T) {
	a, b := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.2")
	// twenty ToRs, the first up of them up.
	tors := func(up int) readyState {
		s := readyState{synced: true, bgp: true, speaking: true, established: map[netip.Addr]bool{}}
		for i := range 20 {
			p := netip.MustParseAddr(fmt.Sprintf("10.0.%d.1", i))
			s.peers = append(s.peers, p)
			s.established[p] = i < up
		}
		return s
	}
	half, all, one := intstr.FromString("50%"), intstr.FromString("100%"), intstr.FromInt32(1)
	for _, tc := range []struct {
		name string
		s    readyState
		min  intstr.IntOrString
		want string // a part of the reason; "" for ready
	}{
		{"not listed yet", readyState{bgp: true, speaking: true}, half, "informers"},
		{"no BGP in the config, listed", readyState{synced: true}, half, ""},
		{"speaker stopped (API outage)", readyState{synced: true, bgp: true, peers: []netip.Addr{a}, established: map[netip.Addr]bool{a: true}}, half, "speaker is not running"},
		{"no peer configured", readyState{synced: true, bgp: true, speaking: true}, half, "no BGP peer"},
		{"one of two sessions up: one router in maintenance", readyState{synced: true, bgp: true, speaking: true, peers: []netip.Addr{a, b}, established: map[netip.Addr]bool{a: true}}, half, ""},
		{"one of two sessions up, every peer required", readyState{synced: true, bgp: true, speaking: true, peers: []netip.Addr{a, b}, established: map[netip.Addr]bool{a: true}}, all, "192.0.2.2"},
		{"the only session down", readyState{synced: true, bgp: true, speaking: true, peers: []netip.Addr{a}, established: map[netip.Addr]bool{a: false}}, half, "192.0.2.1"},
		{"no session of two", readyState{synced: true, bgp: true, speaking: true, peers: []netip.Addr{a, b}, established: map[netip.Addr]bool{}}, half, "0 of 2"},
		{"no session of two, one required", readyState{synced: true, bgp: true, speaking: true, peers: []netip.Addr{a, b}, established: map[netip.Addr]bool{}}, one, "0 of 2"},
		{"every session up", readyState{synced: true, bgp: true, speaking: true, peers: []netip.Addr{a, b}, established: map[netip.Addr]bool{a: true, b: true}}, all, ""},
		{"an established peer that left the config does not count", readyState{synced: true, bgp: true, speaking: true, peers: []netip.Addr{b}, established: map[netip.Addr]bool{a: true}}, half, "192.0.2.2"},
		{"twenty ToRs, one in maintenance", tors(19), half, ""},
		{"twenty ToRs, a pair in maintenance", tors(18), half, ""},
		{"twenty ToRs, ten up", tors(10), half, ""},
		{"twenty ToRs, nine up", tors(9), half, "9 of 20"},
		{"leader, layer 2 interface not open", readyState{synced: true, l2: []string{"eth1"}, open: map[string]bool{}}, half, "eth1"},
		{"leader, layer 2 socket down", readyState{synced: true, l2: []string{"eth1"}, open: map[string]bool{"eth1": true}, socketDown: map[string]bool{"eth1/arp": true}}, half, "eth1/arp"},
		{"leader, layer 2 sockets open", readyState{synced: true, l2: []string{"eth1"}, open: map[string]bool{"eth1": true}, socketDown: map[string]bool{"eth1/arp": false}}, half, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := notReady(tc.s, tc.min)
			if (got == "") != (tc.want == "") || !strings.Contains(got, tc.want) {
				t.Errorf("notReady = %q, want %q", got, tc.want)
			}
		})
	}
}
