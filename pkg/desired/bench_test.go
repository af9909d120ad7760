package desired

import (
	"fmt"
	"net/netip"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/config"
	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/inventory"
)

// BenchmarkCompute is one convergence's pure part at the size the README
// claims: 100 nodes and 1,000 Services, and 1,000 nodes and 5,000; with
// the routers' table of maximumPaths 16, each VIP's 16 of its nodes by
// rendezvous hashing. Each computation after the first reuses the last
// one's choices, as a convergence in a burst of Services does.
func BenchmarkCompute(b *testing.B) {
	for _, size := range []struct{ nodes, services int }{{100, 1000}, {1000, 5000}} {
		b.Run(fmt.Sprintf("nodes=%d,services=%d", size.nodes, size.services), func(b *testing.B) {
			cfg, err := config.Parse([]byte("inventory: {unlistedNodes: allow}\nloadBalancer: {pools: [{name: site, addresses: [10.128.0.0/9]}]}\nbgp: {localASN: 64512, routerID: 10.0.0.254}\n"))
			if err != nil {
				b.Fatal(err)
			}
			var nodes []*v1.Node
			for i := range size.nodes {
				nodes = append(nodes, node(fmt.Sprintf("n%d", i), fmt.Sprintf("10.0.%d.%d", i/250, i%250+1)))
			}
			var services []Service
			for i := range size.services {
				vip := netip.AddrFrom4([4]byte{10, 128, byte(i / 250), byte(i%250 + 1)})
				services = append(services, Service{Namespace: "ns", Name: fmt.Sprint("s", i), VIPs: []Held{{Addr: vip, Pool: "site"}}})
			}
			inv := inventory.New(cfg.Inventory)
			sel := config.PathSelection{MaximumPaths: 16}
			b.ReportAllocs()
			var last *State
			for b.Loop() {
				last = Compute(Input{LoadBalancer: &cfg.LoadBalancer, Nodes: Judge(nodes, inv, nil), Services: services, Previous: last, Selections: []config.PathSelection{sel}})
			}
			if len(last.VIPs) != size.services || len(last.VIPs[0].NextHops) != size.nodes {
				b.Fatalf("%d VIPs via %d nodes", len(last.VIPs), len(last.VIPs[0].NextHops))
			}
			if table := last.Tables[sel.Key()]; len(table) != size.services || len(table[0].NextHops) != sel.MaximumPaths {
				b.Fatalf("the routers' table: %d prefixes, the first via %d nodes", len(table), len(table[0].NextHops))
			}
		})
	}
}
