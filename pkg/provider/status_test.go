package provider

import (
	"net/netip"
	"reflect"
	"testing"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/report"
)

func TestVIPProblemsAreTheServicesWarningsByVIP(t *testing.T) {
	vip := netip.MustParseAddr("10.0.100.1")
	vip6 := netip.MustParseAddr("2001:db8:100::1")
	svc := report.Service("default", "web")
	for _, tc := range []struct {
		name string
		said []report.Problem
		want map[netip.Addr][]string
	}{
		{"none", nil, map[netip.Addr][]string{}},
		{"one per VIP, as Reason: message",
			[]report.Problem{
				{Reason: "VIPNotAnnounced", Object: svc, Subject: vip6.String(), Message: "no IPv6 node"},
				{Reason: "VIPNotAnswered", Object: svc, Subject: vip.String(), Message: "no MAC"},
			},
			map[netip.Addr][]string{vip: {"VIPNotAnswered: no MAC"}, vip6: {"VIPNotAnnounced: no IPv6 node"}}},
		{"two on one VIP, sorted",
			[]report.Problem{
				{Reason: "VIPOffSegment", Object: svc, Subject: vip.String(), Message: "b"},
				{Reason: "AddressOutsidePools", Object: svc, Subject: vip.String(), Message: "a"},
			},
			map[netip.Addr][]string{vip: {"AddressOutsidePools: a", "VIPOffSegment: b"}}},
		{"problems of Nodes, of the Pod, or about interfaces are not a VIP's",
			[]report.Problem{
				{Reason: "NodeAddressesRefused", Object: report.Node("n1"), Subject: vip.String(), Message: "x"},
				{Reason: "Layer2InterfaceFailed", Object: report.Self, Subject: "eth0", Message: "y"},
				{Reason: "SomethingOfTheService", Object: svc, Message: "no subject"},
			},
			map[netip.Addr][]string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := vipProblems(tc.said); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}
