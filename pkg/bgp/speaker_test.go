package bgp

import (
	"fmt"
	"log/slog"
	"net/netip"
	"reflect"
	"slices"
	"testing"

	"github.com/osrg/gobgp/v4/api"
	"github.com/osrg/gobgp/v4/pkg/apiutil"
	gobgp "github.com/osrg/gobgp/v4/pkg/packet/bgp"
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

// localIDs are the ADD-PATH identifiers GoBGP sends prefix's paths with,
// by next hop.
func localIDs(t *testing.T, s *Speaker, prefix string) map[netip.Addr]uint32 {
	t.Helper()
	out := map[netip.Addr]uint32{}
	err := s.srv.ListPath(apiutil.ListPathRequest{TableType: api.TableType_TABLE_TYPE_GLOBAL, Family: gobgp.RF_IPv4_UC},
		func(nlri gobgp.NLRI, paths []*apiutil.Path) {
			if nlri.String() != prefix {
				return
			}
			for _, p := range paths {
				out[nextHopOf(p)] = p.LocalID
			}
		})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// A VIP whose nodes change keeps the ADD-PATH identifiers 1 to its count of
// paths on the wire: a new next hop takes the place of one leaving, so a
// restarted speaker sends the same identifiers again and a strict router
// replaces every path it kept as stale. Withdrawing one path and adding
// another gave the new one an identifier never used before.
func TestReplacedNextHopsKeepTheirIdentifiers(t *testing.T) {
	s, err := Start(t.Context(), Config{ASN: 64512, RouterID: netip.MustParseAddr("127.0.0.2")}, slog.New(slog.NewTextHandler(t.Output(), nil)), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop(t.Context(), false)
	const prefix = "192.0.2.10/32"
	all := addrsN(40)
	steps := []struct {
		name   string
		hops   []netip.Addr
		change Change
		maxID  uint32
	}{
		{"first", all[0:4], Change{Announced: 4}, 4},
		{"one node replaces another", []netip.Addr{all[0], all[1], all[2], all[4]}, Change{Announced: 1, Replaced: 1}, 4},
		{"two replace two", []netip.Addr{all[0], all[1], all[5], all[6]}, Change{Announced: 2, Replaced: 2}, 4},
		{"every node replaced", all[10:14], Change{Announced: 4, Replaced: 4}, 4},
		{"one more", all[10:15], Change{Announced: 1}, 5},
		{"one fewer", all[10:14], Change{Withdrawn: 1}, 4},
		{"two replace three", []netip.Addr{all[10], all[20], all[21]}, Change{Announced: 2, Replaced: 2, Withdrawn: 1}, 3},
	}
	for _, step := range steps {
		ch, err := s.SetPaths([]Announcement{{Prefix: netip.MustParsePrefix(prefix), NextHops: step.hops}})
		if err != nil {
			t.Fatal(err)
		}
		if ch != step.change {
			t.Errorf("%s: sent %+v, want %+v", step.name, ch, step.change)
		}
		ids := localIDs(t, s, prefix)
		var got []uint32
		for _, h := range step.hops {
			id, ok := ids[h]
			if !ok {
				t.Fatalf("%s: no path via %s in GoBGP's table: %v", step.name, h, ids)
			}
			got = append(got, id)
		}
		slices.Sort(got)
		if len(ids) != len(step.hops) || got[len(got)-1] > step.maxID {
			t.Errorf("%s: identifiers on the wire %v (%d paths), want %d paths within 1 to %d", step.name, ids, len(ids), len(step.hops), step.maxID)
		}
	}
}

// The identifiers kept with the paths are those GoBGP sends: after paths
// were withdrawn (whose identifiers GoBGP does not give again) and others
// added. A speaker that loads another's table sends every path under the
// same identifier, and converges from it as the other would.
func TestALoadedTableKeepsTheWireIdentifiers(t *testing.T) {
	start := func() *Speaker {
		s, err := Start(t.Context(), Config{ASN: 64512, RouterID: netip.MustParseAddr("127.0.0.2")}, slog.New(slog.NewTextHandler(t.Output(), nil)), nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Stop(t.Context(), false) })
		return s
	}
	all := addrsN(20)
	const one, two = "192.0.2.10/32", "192.0.2.11/32"
	table := func(a, b []netip.Addr) []Announcement {
		return []Announcement{{Prefix: netip.MustParsePrefix(one), NextHops: a}, {Prefix: netip.MustParsePrefix(two), NextHops: b, Attributes: Attributes{Communities: []uint32{65000<<16 | 1}}}}
	}
	wire := func(s *Speaker) map[string]map[netip.Addr]uint32 {
		return map[string]map[netip.Addr]uint32{one: localIDs(t, s, one), two: localIDs(t, s, two)}
	}
	kept := func(s *Speaker) map[string]map[netip.Addr]uint32 {
		out := map[string]map[netip.Addr]uint32{one: {}, two: {}}
		for prefix, a := range s.Table().prefixes {
			for _, h := range a.hops {
				out[prefix.String()][h.addr] = h.id
			}
		}
		return out
	}
	old := start()
	for _, step := range [][]Announcement{
		table(all[0:4], all[0:2]),
		table(all[0:2], all[0:2]),                                    // two withdrawn: 3 and 4 are not given again
		table(append(slices.Clone(all[0:2]), all[5:7]...), all[0:3]), // two added
		table([]netip.Addr{all[0], all[5], all[6], all[8]}, []netip.Addr{all[0], all[2]}),
	} {
		if _, err := old.SetPaths(step); err != nil {
			t.Fatal(err)
		}
		if w, k := wire(old), kept(old); !reflect.DeepEqual(w, k) {
			t.Fatalf("identifiers on the wire %v, kept %v", w, k)
		}
	}
	if w := wire(old)[one]; w[all[5]] != 5 || w[all[8]] != 2 {
		t.Fatalf("GoBGP gave the identifiers %v; the test expects 5 for a node added after two left, 2 for one taking the place of the node that had 2", w)
	}
	loaded := start()
	if err := loaded.Load(old.Table()); err != nil {
		t.Fatal(err)
	}
	if w, want := wire(loaded), wire(old); !reflect.DeepEqual(w, want) {
		t.Errorf("the loaded speaker sends %v, want what the other sent: %v", w, want)
	}
	if loaded.Announced() != old.Announced() {
		t.Errorf("the loaded speaker counts %d paths, want %d", loaded.Announced(), old.Announced())
	}
	next := table([]netip.Addr{all[0], all[9]}, []netip.Addr{all[3], all[2], all[4]})
	for _, s := range []*Speaker{old, loaded} {
		if _, err := s.SetPaths(next); err != nil {
			t.Fatal(err)
		}
	}
	if w, want := wire(loaded), wire(old); !reflect.DeepEqual(w, want) {
		t.Errorf("after the same convergence the loaded speaker sends %v, the other %v", w, want)
	}
}
