package bgp

import (
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"testing"
)

func addrsN(n int) []netip.Addr {
	var out []netip.Addr
	for i := range n {
		out = append(out, netip.MustParseAddr(fmt.Sprintf("198.51.%d.%d", 100+i/250, i%250+1)))
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return out
}

// Past MaxNextHops a prefix keeps a subset of its next hops that does not
// depend on their order, and losing one of the kept ones replaces only it.
func TestCapNextHopsKeepsAStableSubset(t *testing.T) {
	prefix := netip.MustParsePrefix("192.0.2.30/32")
	if kept, cut := capNextHops(prefix, addrsN(100)); cut || len(kept) != 100 {
		t.Errorf("100 next hops: kept %d, cut %v", len(kept), cut)
	}
	many := addrsN(MaxNextHops + 45)
	kept, cut := capNextHops(prefix, many)
	if !cut || len(kept) != MaxNextHops {
		t.Fatalf("kept %d of %d, cut %v; want %d", len(kept), len(many), cut, MaxNextHops)
	}
	reversed := slices.Clone(many)
	slices.Reverse(reversed)
	if again, _ := capNextHops(prefix, sortedUnique(reversed)); !slices.Equal(again, kept) {
		t.Errorf("the kept next hops depend on the order they come in")
	}
	gone := slices.Index(many, kept[0])
	fewer, _ := capNextHops(prefix, slices.Delete(slices.Clone(many), gone, gone+1))
	if changed := slices.DeleteFunc(slices.Clone(fewer), func(h netip.Addr) bool { return slices.Contains(kept, h) }); len(fewer) != MaxNextHops || len(changed) != 1 {
		t.Errorf("taking out one kept next hop changed %d of the kept ones", len(changed))
	}
	other, _ := capNextHops(netip.MustParsePrefix("192.0.2.31/32"), many)
	if slices.Equal(other, kept) {
		t.Errorf("two prefixes keep the same subset: the load does not spread")
	}
}

// A speaker with no peers needs no network: a convergence is counted in
// what it announces, and paths keep their identifiers.
func TestSetPathsCountsWhatChanged(t *testing.T) {
	s, err := Start(t.Context(), Config{ASN: 64512, RouterID: netip.MustParseAddr("127.0.0.2")}, slog.New(slog.NewTextHandler(t.Output(), nil)), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop(t.Context(), false)
	hops := addrsN(3)
	a := []Announcement{{Prefix: netip.MustParsePrefix("192.0.2.10/32"), NextHops: hops}}
	if ch, err := s.SetPaths(a); err != nil || ch != (Change{Announced: 3}) {
		t.Fatalf("first: %+v, %v", ch, err)
	}
	if ch, _ := s.SetPaths(a); ch != (Change{}) {
		t.Errorf("the same paths again sent %+v", ch)
	}
	a[0].NextHops = hops[1:]
	if ch, _ := s.SetPaths(a); ch != (Change{Withdrawn: 1}) || s.Announced() != 2 {
		t.Errorf("one next hop fewer: %+v, %d announced", ch, s.Announced())
	}
}
