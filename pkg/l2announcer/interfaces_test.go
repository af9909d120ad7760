package l2announcer

import (
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/config"
	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/desired"
	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/l2"
)

// vlanSegment is an interface on one subnet, where every node's MAC is
// known from the inventory.
type vlanSegment struct{ subnet netip.Prefix }

func (v vlanSegment) Subnets() []netip.Prefix                   { return []netip.Prefix{v.subnet} }
func (vlanSegment) Learned(netip.Addr) (net.HardwareAddr, bool) { return nil, false }
func (vlanSegment) Set(l2.Table)                                {}

// A pool with l2.interfaces has each VIP answered on the interfaces whose
// subnets hold it: a pool over two VLANs answers each address on its own
// VLAN, never on the other; an address on none is refused with the
// interfaces named; a closed interface is said where it fails to open.
func TestSeveralInterfaces(t *testing.T) {
	a := &desired.Node{Name: "a", IPs: []netip.Addr{netip.MustParseAddr("10.10.0.11"), netip.MustParseAddr("10.20.0.11")}, MACs: []net.HardwareAddr{mustMAC("02:00:00:00:00:0a")}}
	segs := map[string]Segment{
		"vlan10": vlanSegment{netip.MustParsePrefix("10.10.0.0/24")},
		"vlan20": vlanSegment{netip.MustParsePrefix("10.20.0.0/24")},
		"also10": vlanSegment{netip.MustParsePrefix("10.10.0.0/24")},
	}
	for _, c := range []struct {
		name       string
		vip        string
		interfaces []string
		want       []string // interfaces answered on
		problem    string
	}{
		{"one interface", "10.10.0.200", []string{"vlan10"}, []string{"vlan10"}, ""},
		{"first VLAN of two", "10.10.0.200", []string{"vlan10", "vlan20"}, []string{"vlan10"}, ""},
		{"second VLAN of two", "10.20.0.200", []string{"vlan10", "vlan20"}, []string{"vlan20"}, ""},
		{"two interfaces on the subnet", "10.10.0.200", []string{"vlan10", "also10"}, []string{"vlan10", "also10"}, ""},
		{"on no interface's subnet", "10.30.0.200", []string{"vlan10", "vlan20"}, nil,
			"address 10.30.0.200 is in no subnet of interface vlan10 ([10.10.0.0/24]), vlan20 ([10.20.0.0/24]) named by its pool's l2.interfaces"},
		{"its one open interface is the wrong one", "10.10.0.200", []string{"closed", "vlan20"}, nil,
			"address 10.10.0.200 is in no subnet of interface vlan20 ([10.20.0.0/24]) named by its pool's l2.interfaces"},
		{"only closed interfaces: said where they fail to open", "10.10.0.200", []string{"closed"}, nil, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			st := &desired.State{Carrying: []*desired.Node{a}, VIPs: []desired.VIP{{
				Addr: netip.MustParseAddr(c.vip), Namespace: "ns", Name: "svc", Announce: config.AnnounceL2,
				Interfaces: c.interfaces, Carriers: []*desired.Node{a}}}}
			got := answer(st, segs)
			var on []string
			for _, ans := range got.chosen[netip.MustParseAddr(c.vip)] {
				on = append(on, ans.Interface)
				if _, ok := got.tables[ans.Interface][netip.MustParseAddr(c.vip)]; !ok || ans.Node != "a" {
					t.Errorf("%s: answer %+v is not in the interface's table", c.vip, ans)
				}
			}
			if !slices.Equal(on, c.want) {
				t.Errorf("answered on %v, want %v", on, c.want)
			}
			for iface, table := range got.tables {
				if _, ok := table[netip.MustParseAddr(c.vip)]; ok && !slices.Contains(c.want, iface) {
					t.Errorf("answered on %s too", iface)
				}
			}
			if wantUnanswered := len(c.want) == 0; (got.unanswered == 1) != wantUnanswered {
				t.Errorf("unanswered %d", got.unanswered)
			}
			var said []string
			for _, p := range got.problems {
				said = append(said, p.Message)
			}
			if c.problem == "" && len(said) > 0 || c.problem != "" && (len(said) != 1 || !strings.HasPrefix(said[0], c.problem)) {
				t.Errorf("problems %q, want %q", said, c.problem)
			}
		})
	}
}
