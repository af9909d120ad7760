package rendezvous

import (
	"fmt"
	"hash/fnv"
	"net/netip"
	"slices"
	"testing"
)

// The weights are those layer 2 has chosen nodes by since its first
// release: an upgrade moves no VIP.
func TestScoreIsTheReleasedOne(t *testing.T) {
	released := func(vip netip.Addr, node string) uint64 {
		h := fnv.New64a()
		b := vip.As16()
		h.Write(b[:])
		h.Write([]byte{0})
		h.Write([]byte(node))
		x := h.Sum64()
		x ^= x >> 30
		x *= 0xbf58476d1ce4e5b9
		x ^= x >> 27
		x *= 0x94d049bb133111eb
		x ^= x >> 31
		return x
	}
	for _, vip := range []string{"10.0.100.1", "2001:db8::1", "0.0.0.0"} {
		a := netip.MustParseAddr(vip)
		for _, node := range []string{"", "a", "worker-17", "node.example.com"} {
			if got, want := For(a).Score(node), released(a, node); got != want {
				t.Errorf("%s %q: %x, want %x", vip, node, got, want)
			}
		}
	}
}

func names(n int) []string {
	var out []string
	for i := range n {
		out = append(out, fmt.Sprintf("node-%03d", i))
	}
	return out
}

func pick(addr netip.Addr, nodes []string, n int) []string {
	var out []string
	for _, i := range Top(addr, nodes, n) {
		out = append(out, nodes[i])
	}
	return out
}

func TestTop(t *testing.T) {
	vip := netip.MustParseAddr("10.0.100.7")
	all := names(40)
	tests := []struct {
		name  string
		nodes []string
		n     int
		want  int
	}{
		{"fewer nodes than n: all, ranked", all[:3], 4, 3},
		{"as many as n", all[:4], 4, 4},
		{"more", all, 4, 4},
		{"one", all, 1, 1},
		{"none", nil, 4, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := pick(vip, tt.nodes, tt.n)
			if len(got) != tt.want {
				t.Fatalf("%v, want %d", got, tt.want)
			}
			// Highest weight first, and the same as ranking everyone.
			ranked := slices.Clone(tt.nodes)
			h := For(vip)
			slices.SortFunc(ranked, func(a, b string) int {
				if h.Score(a) > h.Score(b) {
					return -1
				}
				return 1
			})
			if !slices.Equal(got, ranked[:len(got)]) {
				t.Errorf("%v, want %v", got, ranked[:len(got)])
			}
		})
	}
}

// Order of the nodes does not matter; a node leaving moves only the
// addresses that had it; a node coming takes a place only where it wins.
func TestTopIsStable(t *testing.T) {
	all := names(30)
	reversed := slices.Clone(all)
	slices.Reverse(reversed)
	gone := all[7]
	without := slices.DeleteFunc(slices.Clone(all), func(s string) bool { return s == gone })
	for i := range 200 {
		vip := netip.AddrFrom4([4]byte{10, 0, byte(i / 256), byte(i)})
		was := pick(vip, all, 4)
		if got := pick(vip, reversed, 4); !slices.Equal(sorted(got), sorted(was)) {
			t.Fatalf("%s: %v in reverse order, %v in order", vip, got, was)
		}
		is := pick(vip, without, 4)
		if !slices.Contains(was, gone) {
			if !slices.Equal(is, was) {
				t.Errorf("%s: %v became %v though %s was not among them", vip, was, is, gone)
			}
			continue
		}
		kept := slices.DeleteFunc(slices.Clone(was), func(s string) bool { return s == gone })
		for _, k := range kept {
			if !slices.Contains(is, k) {
				t.Errorf("%s: %v became %v: %s left too", vip, was, is, k)
			}
		}
	}
}

func sorted(s []string) []string { s = slices.Clone(s); slices.Sort(s); return s }

// Addresses spread evenly: over 12 nodes, 6,000 addresses with 4 each
// put 2,000 on a node, give or take a few percent.
func TestTopSpreads(t *testing.T) {
	nodes := names(12)
	count := map[string]int{}
	for i := range 6000 {
		vip := netip.AddrFrom4([4]byte{10, 1, byte(i / 256), byte(i)})
		for _, n := range pick(vip, nodes, 4) {
			count[n]++
		}
	}
	for _, n := range nodes {
		if c := count[n]; c < 1850 || c > 2150 {
			t.Errorf("%s carries %d of 24,000 places, want 2,000 ± 150: %v", n, c, count)
		}
	}
}

func BenchmarkTop(b *testing.B) {
	nodes := names(1000)
	vip := netip.MustParseAddr("10.0.100.7")
	for b.Loop() {
		Top(vip, nodes, 16)
	}
}

// The spread docs/concepts.md gives: over 12 nodes with 4 places per
// address, the most and least loaded nodes' ratio shrinks as addresses
// grow (sequential addresses, as a pool hands them out).
func TestSpreadBySize(t *testing.T) {
	nodes := names(12)
	for _, tc := range []struct {
		addrs int
		most  float64
	}{{600, 1.35}, {6000, 1.12}} {
		count := map[string]int{}
		for i := range tc.addrs {
			vip := netip.AddrFrom4([4]byte{10, 2, byte(i / 256), byte(i)})
			for _, n := range pick(vip, nodes, 4) {
				count[n]++
			}
		}
		least, most := tc.addrs, 0
		for _, n := range nodes {
			least, most = min(least, count[n]), max(most, count[n])
		}
		ratio := float64(most) / float64(least)
		t.Logf("%d addresses: max/min %d/%d = %.2f", tc.addrs, most, least, ratio)
		if ratio > tc.most {
			t.Errorf("%d addresses: max/min %.2f, want at most %.2f", tc.addrs, ratio, tc.most)
		}
	}
}
