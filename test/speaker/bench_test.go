package speaker

import (
	"flag"
	"net/netip"
	"runtime"
	"testing"

	. "github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/bgp"
	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/test/framework"
)

var (
	benchPrefixes = flag.Int("bench-prefixes", 1000, "VIPs in the SetPaths benchmarks")
	benchHops     = flag.Int("bench-hops", 100, "next hops of each VIP in the SetPaths benchmarks")
)

// benchPaths is every one of the first n VIPs via each of hops next hops.
// The next hops are one slice shared by every VIP, as the provider does.
func benchPaths(n, hops int) []Announcement {
	nhs := make([]netip.Addr, hops)
	for h := range nhs {
		nhs[h] = netip.AddrFrom4([4]byte{198, 18, byte(h / 250), byte(h%250 + 1)})
	}
	attrs := Attributes{Communities: []uint32{64512<<16 | 100}}
	out := make([]Announcement, n)
	for i := range out {
		out[i] = Announcement{Prefix: netip.PrefixFrom(netip.AddrFrom4([4]byte{198, 19, byte(i / 256), byte(i % 256)}), 32), NextHops: nhs, Attributes: attrs}
	}
	return out
}

// BenchmarkSetPathsNodeChurn is the convergence a Node joining or leaving
// costs at a site with every VIP announced via every node: one next hop
// more, or less, on every prefix. The speaker peers with gobgpd, so
// GoBGP's work for the session is counted too. heap-MiB is what the
// speaker and GoBGP hold with the table announced.
func BenchmarkSetPathsNodeChurn(b *testing.B) {
	peer := startPeer(b, framework.GoBGPNeighbor{Address: "127.0.0.1", ASN: 64512, AddPath: true})
	s, established := startSpeaker(b, peer, "")
	<-established
	without, with := benchPaths(*benchPrefixes, *benchHops), benchPaths(*benchPrefixes, *benchHops+1)
	if _, err := s.SetPaths(without); err != nil {
		b.Fatal(err)
	}
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	heap := float64(ms.HeapAlloc) / (1 << 20)
	b.ResetTimer()
	for i := range b.N {
		paths := with
		if i%2 == 1 {
			paths = without
		}
		if _, err := s.SetPaths(paths); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(heap, "heap-MiB")
}
