package ipam

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/config"
)

func pools(t *testing.T, yaml string) []config.Pool {
	t.Helper()
	cfg, err := config.Parse([]byte("loadBalancer:\n  announce: none\n  pools:\n" + yaml))
	if err != nil {
		t.Fatal(err)
	}
	return cfg.LoadBalancer.Pools
}

func addrs(s ...string) []netip.Addr {
	var out []netip.Addr
	for _, a := range s {
		out = append(out, netip.MustParseAddr(a))
	}
	return out
}

func v4(svc string) Request {
	return Request{Service: "default/" + svc, Namespace: "default", Families: []Family{IPv4}, Ports: []Port{{"TCP", 80}}}
}

func TestAllocateInOrderAndExhaust(t *testing.T) {
	a := New(pools(t, `
  - {name: small, addresses: ["192.0.2.0-192.0.2.1"], avoidBuggyIPs: true}
  - {name: manual, addresses: [192.0.2.64/30], autoAssign: false}
  - {name: big, addresses: [198.51.100.0/30]}
`))
	got, err := a.Allocate(v4("a"))
	if err != nil || got[0] != netip.MustParseAddr("192.0.2.1") {
		t.Fatalf("first allocation = %v, %v; want 192.0.2.1 (.0 is avoided)", got, err)
	}
	got, err = a.Allocate(v4("b"))
	if err != nil || got[0] != netip.MustParseAddr("198.51.100.0") {
		t.Fatalf("second allocation = %v, %v; want the next auto pool", got, err)
	}
	// Allocating again keeps what the Service has.
	again, _ := a.Allocate(v4("a"))
	if again[0] != netip.MustParseAddr("192.0.2.1") {
		t.Errorf("re-allocation moved the Service to %v", again)
	}
	named := v4("c")
	named.Pool = "big"
	for i := 0; i < 3; i++ {
		named.Service = "default/c" + string(rune('0'+i))
		if _, err := a.Allocate(named); err != nil {
			t.Fatalf("allocating from big: %v", err)
		}
	}
	named.Service = "default/c9"
	_, err = a.Allocate(named)
	if err == nil || !strings.Contains(err.Error(), `pool "big" has no free IPv4 address (all 4 in use)`) {
		t.Errorf("exhausted pool: error %v", err)
	}
	a.Release("default/c0")
	if got, err := a.Allocate(named); err != nil || got[0] != netip.MustParseAddr("198.51.100.1") {
		t.Errorf("after a release: %v, %v; want the freed 198.51.100.1", got, err)
	}
}

func TestRequestedAddresses(t *testing.T) {
	a := New(pools(t, `
  - {name: p, addresses: [192.0.2.0/28, "2001:db8::/124"]}
  - {name: q, addresses: [198.51.100.0/28], namespaces: [team-q]}
`))
	req := v4("a")
	req.Requested = addrs("192.0.2.9")
	if got, err := a.Allocate(req); err != nil || got[0] != netip.MustParseAddr("192.0.2.9") {
		t.Fatalf("requested 192.0.2.9: %v, %v", got, err)
	}
	other := v4("b")
	other.Requested = addrs("192.0.2.9")
	if _, err := a.Allocate(other); err == nil || !strings.Contains(err.Error(), "192.0.2.9 is in use by Service default/a") {
		t.Errorf("taken address: error %v", err)
	}
	other.Requested = addrs("203.0.113.1")
	if _, err := a.Allocate(other); err == nil || !strings.Contains(err.Error(), "203.0.113.1 is in no pool") {
		t.Errorf("address outside pools: error %v", err)
	}
	other.Requested = addrs("198.51.100.1")
	if _, err := a.Allocate(other); err == nil || !strings.Contains(err.Error(), `pool "q" is not for namespace "default"`) {
		t.Errorf("pool of another namespace: error %v", err)
	}
	// Moving to a new requested address frees the old one.
	req.Requested = addrs("192.0.2.10")
	if got, _ := a.Allocate(req); got[0] != netip.MustParseAddr("192.0.2.10") {
		t.Fatalf("moved to %v", got)
	}
	other.Requested = addrs("192.0.2.9")
	if _, err := a.Allocate(other); err != nil {
		t.Errorf("the old address was not freed: %v", err)
	}
	// A failed request leaves the current addresses alone.
	req.Requested = addrs("192.0.2.9")
	if _, err := a.Allocate(req); err == nil {
		t.Fatal("took an address in use")
	}
	if got := a.Addresses("default/a"); !slices.Equal(got, addrs("192.0.2.10")) {
		t.Errorf("after a refused change the Service holds %v, want 192.0.2.10", got)
	}
	// Dual stack: a requested IPv4 address, IPv6 from the same pool.
	ds := Request{Service: "default/ds", Namespace: "default", Families: []Family{IPv6, IPv4}, Requested: addrs("192.0.2.12")}
	got, err := a.Allocate(ds)
	if err != nil || !slices.Equal(got, addrs("2001:db8::", "192.0.2.12")) {
		t.Errorf("dual stack: %v, %v", got, err)
	}
	unknown := v4("u")
	unknown.Pool = "nope"
	if _, err := a.Allocate(unknown); err == nil || !strings.Contains(err.Error(), `there is no pool "nope" (pools: p, q)`) {
		t.Errorf("unknown pool: error %v", err)
	}
}

func TestSharing(t *testing.T) {
	a := New(pools(t, "  - {name: p, addresses: [192.0.2.0/30]}\n"))
	web := Request{Service: "default/web", Namespace: "default", Families: []Family{IPv4}, SharingKey: "k", Ports: []Port{{"TCP", 80}}}
	dns := Request{Service: "default/dns", Namespace: "default", Families: []Family{IPv4}, SharingKey: "k", Ports: []Port{{"UDP", 53}}}
	clash := Request{Service: "default/web2", Namespace: "default", Families: []Family{IPv4}, SharingKey: "k", Ports: []Port{{"TCP", 80}}}
	w, _ := a.Allocate(web)
	d, err := a.Allocate(dns)
	if err != nil || d[0] != w[0] {
		t.Errorf("same key, other ports: %v and %v (%v), want one address", w, d, err)
	}
	c, err := a.Allocate(clash)
	if err != nil || c[0] == w[0] {
		t.Errorf("same key, same port: got %v (%v), want another address than %v", c, err, w)
	}
	clash.Requested = w
	if _, err := a.Allocate(clash); err == nil || !strings.Contains(err.Error(), "also uses port 80/TCP") {
		t.Errorf("requesting a shared address with a clashing port: error %v", err)
	}
	a.Release("default/web")
	if got := a.Addresses("default/dns"); !slices.Equal(got, w) {
		t.Errorf("releasing one sharer took the address from the other: %v", got)
	}
}

func TestAssignAndPoolEdits(t *testing.T) {
	a := New(pools(t, "  - {name: p, addresses: [192.0.2.0/30]}\n"))
	if _, err := a.Assign(v4("a"), addrs("192.0.2.2")); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Assign(v4("b"), addrs("192.0.2.2")); err == nil {
		t.Error("two Services assigned one address without a sharing key")
	}
	if got, _ := a.Allocate(v4("c")); got[0] != netip.MustParseAddr("192.0.2.0") {
		t.Errorf("allocation after rebuild: %v", got)
	}
	outside := a.SetPools(pools(t, "  - {name: p, addresses: [192.0.2.0/31]}\n"))
	if !slices.Equal(outside, addrs("192.0.2.2")) {
		t.Errorf("addresses outside the edited pool: %v", outside)
	}
	if got, err := a.Allocate(v4("a")); err != nil || got[0] != netip.MustParseAddr("192.0.2.2") {
		t.Errorf("a VIP outside the edited pool must keep serving: %v, %v", got, err)
	}
}

// Two Services with one sharing key share an address only when they are
// announced alike and, across namespaces, only under a key the pool lists.
func TestSharingRules(t *testing.T) {
	base := func(ns, name string, port int32) Request {
		return Request{Service: ns + "/" + name, Namespace: ns, Families: []Family{IPv4}, SharingKey: "k", Ports: []Port{{"TCP", port}}}
	}
	local := func(r Request, selector string) Request { r.TrafficLocal, r.Selector = true, selector; return r }
	for _, tc := range []struct {
		name        string
		pool        string
		first, next Request
		shares      bool
		why         string // in the error when next asks for first's address
	}{
		{name: "Cluster with Cluster", first: base("a", "web", 80), next: base("a", "dns", 53), shares: true},
		{name: "Local with Local, same pods", first: local(base("a", "web", 80), "app=x"), next: local(base("a", "dns", 53), "app=x"), shares: true},
		{name: "Local with Local, other pods", first: local(base("a", "web", 80), "app=x"), next: local(base("a", "dns", 53), "app=y"),
			why: "must have the same selector"},
		{name: "Local with Cluster", first: local(base("a", "web", 80), "app=x"), next: base("a", "dns", 53),
			why: "whose externalTrafficPolicy is Local"},
		{name: "Cluster with Local", first: base("a", "web", 80), next: local(base("a", "dns", 53), "app=x"),
			why: "whose externalTrafficPolicy is Cluster"},
		{name: "another namespace", first: base("a", "web", 80), next: base("b", "dns", 53),
			why: "of another namespace; a key joins namespaces only when its pool lists it in sharedAcrossNamespaces"},
		{name: "another namespace, key listed", pool: ", sharedAcrossNamespaces: [k]", first: base("a", "web", 80), next: base("b", "dns", 53), shares: true},
		{name: "same port", first: base("a", "web", 80), next: base("a", "web2", 80), why: "also uses port 80/TCP"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := New(pools(t, "  - {name: p, addresses: [192.0.2.0/30]"+tc.pool+"}\n"))
			first, err := a.Allocate(tc.first)
			if err != nil {
				t.Fatal(err)
			}
			next, err := a.Allocate(tc.next)
			if err != nil {
				t.Fatal(err)
			}
			if shared := next[0] == first[0]; shared != tc.shares {
				t.Fatalf("%s got %v, %s %v: shared %v, want %v", tc.next.Service, next, tc.first.Service, first, shared, tc.shares)
			}
			if tc.shares {
				return
			}
			asks := tc.next
			asks.Service += "-asks"
			asks.Requested = first
			if _, err := a.Allocate(asks); err == nil || !strings.Contains(err.Error(), tc.why) {
				t.Errorf("asking for %v: error %v, want it to say %q", first, err, tc.why)
			}
			// The same refusal when a held share is rebuilt at start.
			b := New(pools(t, "  - {name: p, addresses: [192.0.2.0/30]"+tc.pool+"}\n"))
			b.Assign(tc.first, first)
			if kept, err := b.Assign(tc.next, first); len(kept) != 0 || err == nil || !strings.Contains(err.Error(), tc.why) {
				t.Errorf("rebuilding %s on %v: kept %v, error %v", tc.next.Service, first, kept, err)
			}
		})
	}
}

// An edit that would break a share the Service holds is refused, and the
// Service keeps its address; an edit that keeps the share is taken.
func TestEditsThatBreakASharedAddressAreRefused(t *testing.T) {
	a := New(pools(t, "  - {name: p, addresses: [192.0.2.0/30]}\n"))
	web := Request{Service: "a/web", Namespace: "a", Families: []Family{IPv4}, SharingKey: "k", Ports: []Port{{"TCP", 80}}}
	dns := Request{Service: "a/dns", Namespace: "a", Families: []Family{IPv4}, SharingKey: "k", Ports: []Port{{"UDP", 53}}}
	w, _ := a.Allocate(web)
	a.Allocate(dns)
	for _, tc := range []struct {
		name string
		edit func(*Request)
		why  string
	}{
		{"a port the sharer uses", func(r *Request) { r.Ports = append(r.Ports, Port{"TCP", 80}) }, "also uses port 80/TCP"},
		{"another traffic policy", func(r *Request) { r.TrafficLocal, r.Selector = true, "app=dns" }, "whose externalTrafficPolicy is Cluster"},
	} {
		edited := dns
		tc.edit(&edited)
		if _, err := a.Allocate(edited); err == nil || !strings.Contains(err.Error(), tc.why) || !strings.Contains(err.Error(), "keeps its address") {
			t.Errorf("%s: error %v, want a refusal saying %q", tc.name, err, tc.why)
		}
		if got := a.Addresses("a/dns"); !slices.Equal(got, w) {
			t.Errorf("%s: the Service now holds %v, want %v", tc.name, got, w)
		}
	}
	dns.Ports = append(dns.Ports, Port{"TCP", 53})
	if got, err := a.Allocate(dns); err != nil || !slices.Equal(got, w) {
		t.Errorf("a port no sharer uses: %v, %v; want %v", got, err, w)
	}
}

// An address a Service keeps asking for never changes: not when it turns
// dual-stack or single-stack, nor when it asks for another address of the
// other family.
func TestDualStackKeepsTheOtherFamily(t *testing.T) {
	dual := pools(t, `
  - {name: p, addresses: [192.0.2.0/28, "2001:db8::/124"]}
  - {name: q, addresses: [198.51.100.0/28, "2001:db8:1::/124"]}
`)
	v4only := Request{Service: "a/s", Namespace: "a", Families: []Family{IPv4}}
	both := Request{Service: "a/s", Namespace: "a", Families: []Family{IPv4, IPv6}}
	v6first := Request{Service: "a/s", Namespace: "a", Families: []Family{IPv6, IPv4}}
	v6only := Request{Service: "a/s", Namespace: "a", Families: []Family{IPv6}}
	for _, tc := range []struct {
		name  string
		steps []Request
	}{
		{"single to dual stack", []Request{v4only, both}},
		{"dual to single stack", []Request{both, v4only}},
		{"dual to IPv6 only", []Request{both, v6only}},
		{"families reordered", []Request{both, v6first}},
		{"another IPv6 address requested", []Request{both, func() Request {
			r := both
			r.Requested = addrs("2001:db8::9")
			return r
		}()}},
		{"an IPv6 address of another pool requested", []Request{both, func() Request {
			r := both
			r.Requested = addrs("2001:db8:1::5")
			return r
		}()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Another Service first, so that the lowest free address is
			// not what the Service had.
			a := New(dual)
			held := map[Family]netip.Addr{}
			for i, req := range tc.steps {
				got, err := a.Allocate(req)
				if err != nil {
					t.Fatalf("step %d: %v", i, err)
				}
				if i == 0 {
					a.Allocate(Request{Service: "a/other", Namespace: "a", Families: []Family{IPv4, IPv6}})
				}
				for _, addr := range got {
					f := FamilyOf(addr)
					requested := slices.ContainsFunc(req.Requested, func(r netip.Addr) bool { return FamilyOf(r) == f })
					if was, ok := held[f]; ok && !requested && was != addr {
						t.Errorf("step %d: %v moved from %s to %s", i, f, was, addr)
					}
					held[f] = addr
				}
			}
		})
	}
}

// A requested address in another pool than the one the Service names is
// refused, whether the Service holds it already or asks for it fresh; the
// Service keeps what it had.
func TestRequestedAddressOutsideTheNamedPoolIsRefusedOneWay(t *testing.T) {
	two := pools(t, `
  - {name: p, addresses: [192.0.2.0/28]}
  - {name: q, addresses: [198.51.100.0/28]}
`)
	req := v4("s")
	req.Requested = addrs("192.0.2.9")
	named := req
	named.Pool = "q"
	a := New(two)
	if _, err := a.Allocate(req); err != nil {
		t.Fatal(err)
	}
	_, heldErr := a.Allocate(named)
	_, freshErr := New(two).Allocate(named)
	want := `requested address 192.0.2.9 is in pool "p", not in the requested pool "q"`
	for what, err := range map[string]error{"held": heldErr, "fresh": freshErr} {
		if err == nil || err.Error() != want {
			t.Errorf("%s: error %v, want %q", what, err, want)
		}
	}
	if got := a.Addresses(req.Service); !slices.Equal(got, addrs("192.0.2.9")) {
		t.Errorf("after the refused edit the Service holds %v", got)
	}
}

func TestExhaustionCountsOnlyAddressesHandedOut(t *testing.T) {
	a := New(pools(t, "  - {name: p, addresses: [192.0.2.0/24], avoidBuggyIPs: true}\n"))
	for i := range 254 {
		if _, err := a.Allocate(v4(fmt.Sprint("s", i))); err != nil {
			t.Fatal(err)
		}
	}
	_, err := a.Allocate(v4("one-more"))
	if want := `pool "p" has no free IPv4 address (all 254 in use)`; err == nil || err.Error() != want {
		t.Errorf("error %v, want %q", err, want)
	}
	if got := endingIn(0, 511, 0) + endingIn(0, 511, 255); got != 4 {
		t.Errorf("addresses ending in .0 or .255 among 512: %d", got)
	}
}

// A Service that may not share under its key is told why.
func TestShareRefusalsSayWhy(t *testing.T) {
	a := New(pools(t, "  - {name: p, addresses: [192.0.2.0/30]}\n"))
	web := Request{Service: "a/web", Namespace: "a", Families: []Family{IPv4}, SharingKey: "k", Ports: []Port{{"TCP", 80}}}
	a.Allocate(web)
	dns := web
	dns.Service, dns.Ports = "a/dns", []Port{{"UDP", 53}}
	a.Allocate(dns)
	if r := a.ShareRefusals(dns); r != nil {
		t.Errorf("a Service that shares is told %v", r)
	}
	tenant := dns
	tenant.Service, tenant.Namespace = "b/dns", "b"
	a.Allocate(tenant)
	r := a.ShareRefusals(tenant)
	if len(r) != 1 || !strings.Contains(r[0].Error(), "of another namespace") {
		t.Errorf("another namespace's Service is told %v", r)
	}
}

// Usage counts what a pool hands out (not the addresses avoidBuggyIPs
// skips), a shared address once, and IPv6 ranges too big for an int.
func TestUsage(t *testing.T) {
	a := New(pools(t, `
  - {name: small, addresses: [192.0.2.0/24], avoidBuggyIPs: true}
  - {name: dual, addresses: [198.51.100.0/30, "2001:db8::/64"]}
`))
	for _, svc := range []string{"a", "b"} {
		req := v4(svc)
		req.SharingKey = "k"
		req.Ports = []Port{{"TCP", int32(len(svc)) + int32(svc[0])}}
		if _, err := a.Allocate(req); err != nil {
			t.Fatal(err)
		}
	}
	dual := Request{Service: "default/d", Namespace: "default", Pool: "dual", Families: []Family{IPv4, IPv6}, Ports: []Port{{"TCP", 80}}}
	if _, err := a.Allocate(dual); err != nil {
		t.Fatal(err)
	}
	want := []PoolUsage{
		{Pool: "small", Family: IPv4, Size: 254, Used: 1},
		{Pool: "dual", Family: IPv4, Size: 4, Used: 1},
		{Pool: "dual", Family: IPv6, Size: 1 << 64, Used: 1},
	}
	if got := a.Usage(); !slices.Equal(got, want) {
		t.Errorf("usage = %+v\nwant %+v", got, want)
	}
	if free := want[0].Free(); free != 253 {
		t.Errorf("free = %v, want 253", free)
	}
	a.Release("default/d")
	if got := a.Usage(); got[1].Used != 0 || got[2].Used != 0 {
		t.Errorf("after a release: %+v", got)
	}
}

// TestRebuildRestoresWhatTheStatusesSay: A and B share an address; an edit
// of one of them that the CCM refused (it kept the address) must not, at
// the next rebuild, cost the other its address. Whatever the order the
// claims come in, both keep it, the edited one is refused and the other
// is free to be ensured again.
func TestRebuildRestoresWhatTheStatusesSay(t *testing.T) {
	ps := pools(t, `  - {name: p, addresses: [192.0.2.0/28]}`)
	shared := func(svc string, port int32) Request {
		r := v4(svc)
		r.SharingKey, r.Ports = "k", []Port{{"TCP", port}}
		return r
	}
	a, b := shared("a", 80), shared("b", 443)
	clashing := shared("b", 80)
	unkeyed := shared("b", 443)
	unkeyed.SharingKey = ""
	local := shared("b", 443)
	local.TrafficLocal = true
	x := addrs("192.0.2.1")
	for _, tc := range []struct {
		name    string
		claims  []Claim
		keep    map[string]int // Service -> addresses kept
		refused string         // the Service refused, "" for none
		lost    string         // the Service that lost an address, "" for none
	}{
		{name: "no edit", claims: []Claim{{a, x, true, false, time.Time{}}, {b, x, true, false, time.Time{}}}, keep: map[string]int{"a": 1, "b": 1}},
		{name: "B's ports clash, A first", claims: []Claim{{a, x, true, false, time.Time{}}, {clashing, x, true, true, time.Time{}}}, keep: map[string]int{"a": 1, "b": 1}, refused: "b"},
		{name: "B's ports clash, B first", claims: []Claim{{clashing, x, true, true, time.Time{}}, {a, x, true, false, time.Time{}}}, keep: map[string]int{"a": 1, "b": 1}, refused: "b"},
		{name: "B's sharing key removed", claims: []Claim{{unkeyed, x, true, true, time.Time{}}, {a, x, true, false, time.Time{}}}, keep: map[string]int{"a": 1, "b": 1}, refused: "b"},
		{name: "B's traffic policy changed", claims: []Claim{{a, x, true, false, time.Time{}}, {local, x, true, true, time.Time{}}}, keep: map[string]int{"a": 1, "b": 1}, refused: "b"},
		{name: "a hand edit claims A's address", claims: []Claim{{a, x, true, false, time.Time{}}, {clashing, x, false, true, time.Time{}}}, keep: map[string]int{"a": 1}, lost: "b"},
		{name: "two statuses the CCM wrote, never shared and never edited", claims: []Claim{{v4("a"), x, true, false, time.Time{}}, {v4("b"), x, true, false, time.Time{}}}, keep: map[string]int{"a": 1}, lost: "b"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			alloc, restored := Rebuild(ps, tc.claims)
			for _, svc := range []string{"a", "b"} {
				if got := len(alloc.Addresses("default/" + svc)); got != tc.keep[svc] {
					t.Errorf("%s keeps %d addresses, want %d", svc, got, tc.keep[svc])
				}
			}
			for _, r := range restored {
				name := strings.TrimPrefix(r.Service, "default/")
				if (r.Refused != nil) != (name == tc.refused) {
					t.Errorf("%s refused: %v", name, r.Refused)
				}
				if (r.Lost != nil) != (name == tc.lost) {
					t.Errorf("%s lost: %v", name, r.Lost)
				}
			}
			if tc.refused == "" {
				return
			}
			// The service controller ensures both again: the innocent one
			// is ensured, the edited one refused, and nothing moves.
			for _, c := range tc.claims {
				got, err := alloc.Allocate(c.Request)
				name := strings.TrimPrefix(c.Request.Service, "default/")
				if name == tc.refused {
					if err == nil {
						t.Errorf("the edited %s was ensured: %v", name, got)
					}
				} else if err != nil || !slices.Equal(got, x) {
					t.Errorf("the innocent %s: %v %v, want %v", name, got, err, x)
				}
			}
			for _, svc := range []string{"a", "b"} {
				if got := alloc.Addresses("default/" + svc); !slices.Equal(got, x) {
					t.Errorf("after ensuring: %s holds %v, want %v", svc, got, x)
				}
			}
			// Undoing the edit is ensured and clears the refusal.
			if got, err := alloc.Allocate(shared(tc.refused, 443)); err != nil || !slices.Equal(got, x) {
				t.Errorf("the edit undone: %v %v", got, err)
			}
			if got, err := alloc.Allocate(a); err != nil || !slices.Equal(got, x) {
				t.Errorf("a after the edit was undone: %v %v", got, err)
			}
		})
	}
}

// TestByHolder: whatever order the Services are listed in, the claims
// come in the same order, the true holder first: a status the CCM wrote
// before a hand-edited one, then the oldest, then by name.
func TestByHolder(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	claim := func(svc string, ours bool, created time.Time) Claim {
		return Claim{Request: v4(svc), Ours: ours, Created: created}
	}
	for _, tc := range []struct {
		name   string
		claims []Claim
		want   []string
	}{
		{"ours before a hand edit, however young", []Claim{claim("old-edit", false, t0), claim("young", true, t0.Add(time.Hour))}, []string{"young", "old-edit"}},
		{"then the oldest", []Claim{claim("young", true, t0.Add(time.Minute)), claim("old", true, t0)}, []string{"old", "young"}},
		{"then by name", []Claim{claim("b", true, t0), claim("a", true, t0)}, []string{"a", "b"}},
		{"hand edits among themselves: the oldest", []Claim{claim("y", false, t0.Add(time.Second)), claim("z", false, t0)}, []string{"z", "y"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reversed := slices.Clone(tc.claims)
			slices.Reverse(reversed)
			for _, claims := range [][]Claim{tc.claims, reversed} {
				var got []string
				for _, c := range ByHolder(claims) {
					got = append(got, strings.TrimPrefix(c.Request.Service, "default/"))
				}
				if !slices.Equal(got, tc.want) {
					t.Errorf("order %v, want %v", got, tc.want)
				}
			}
		})
	}
}

// TestRebuildTakesNoForeignAddress: whoever may write a Service's status
// could otherwise have any address announced. An address outside every
// pool is kept only if this CCM wrote it (a pool edit left it outside);
// one another writer put there is refused, said in Foreign, and the
// Service's addresses inside a pool are kept.
func TestRebuildTakesNoForeignAddress(t *testing.T) {
	ps := pools(t, `  - {name: p, addresses: [192.0.2.0/28]}`)
	for _, tc := range []struct {
		name          string
		ours          bool
		addrs         []netip.Addr
		kept, foreign []netip.Addr
	}{
		{"another writer's address outside every pool", false, addrs("198.51.100.7"), nil, addrs("198.51.100.7")},
		{"another writer's address in a pool", false, addrs("192.0.2.3"), addrs("192.0.2.3"), nil},
		{"another writer's addresses, one outside", false, addrs("192.0.2.3", "198.51.100.7"), addrs("192.0.2.3"), addrs("198.51.100.7")},
		{"ours, left outside by a pool edit", true, addrs("198.51.100.7"), addrs("198.51.100.7"), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			alloc, restored := Rebuild(ps, []Claim{{Request: v4("a"), Addresses: tc.addrs, Ours: tc.ours}})
			if got := alloc.Addresses("default/a"); !slices.Equal(got, tc.kept) {
				t.Errorf("kept %v, want %v", got, tc.kept)
			}
			if got := restored[0].Foreign; !slices.Equal(got, tc.foreign) {
				t.Errorf("refused as foreign %v, want %v", got, tc.foreign)
			}
		})
	}
}

// TestRefusedPolicyEditKeepsTheSharersPolicy: two Services share an
// address; one is edited to externalTrafficPolicy Local, which the leader
// refuses. The address's policy stays Cluster on the leader (its refused
// Allocate changes nothing) and on a standby or a new leader (a rebuild
// from the statuses, in either order): every replica announces it alike.
func TestRefusedPolicyEditKeepsTheSharersPolicy(t *testing.T) {
	ps := pools(t, `  - {name: p, addresses: [192.0.2.0/28]}`)
	shared := func(svc string, port int32, local bool) Request {
		r := v4(svc)
		r.SharingKey, r.Ports, r.TrafficLocal = "k", []Port{{"TCP", port}}, local
		return r
	}
	a, b, bLocal := shared("a", 80, false), shared("b", 443, false), shared("b", 443, true)

	leader := New(ps)
	x, err := leader.Allocate(a)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := leader.Allocate(b); err != nil || !slices.Equal(got, x) {
		t.Fatalf("b shares %v: %v %v", x, got, err)
	}
	if _, err := leader.Allocate(bLocal); err == nil {
		t.Fatal("the edit to Local was not refused")
	}
	if leader.TrafficLocal(x[0]) {
		t.Errorf("on the leader, after the refused edit, %s is Local", x[0])
	}

	for _, claims := range [][]Claim{
		{{Request: a, Addresses: x, Ours: true}, {Request: bLocal, Addresses: x, Ours: true, Edited: true}},
		{{Request: bLocal, Addresses: x, Ours: true, Edited: true}, {Request: a, Addresses: x, Ours: true}},
	} {
		standby, _ := Rebuild(ps, ByHolder(claims))
		if standby.TrafficLocal(x[0]) {
			t.Errorf("rebuilt from %s first, %s is Local", claims[0].Request.Service, x[0])
		}
	}
	// Undone on every sharer, the policy follows: a and b both Local.
	both := New(ps)
	aLocal := shared("a", 80, true)
	both.Allocate(aLocal)
	both.Allocate(bLocal)
	if !both.TrafficLocal(x[0]) {
		t.Errorf("two Local sharers: %s is not Local", x[0])
	}
}

// TestRebuildKeepsSharesAcrossNamespaces: MetalLB shares an address under
// one allow-shared-ip key across namespaces; this CCM only where the pool
// lists the key in sharedAcrossNamespaces. At takeover every share the
// statuses show is kept (both Services keep the address, and are ensured
// with it); a new Service of a third namespace with the key gets an
// address of its own.
func TestRebuildKeepsSharesAcrossNamespaces(t *testing.T) {
	ps := pools(t, `  - {name: p, addresses: [192.0.2.0/28]}`)
	in := func(ns, svc string, port int32) Request {
		r := v4(svc)
		r.Service, r.Namespace = ns+"/"+svc, ns
		r.SharingKey, r.Ports = "dns", []Port{{"TCP", port}}
		return r
	}
	udp, tcp, third := in("a", "dns-udp", 53), in("b", "dns-tcp", 54), in("c", "dns-other", 55)
	x := addrs("192.0.2.5")
	for _, claims := range [][]Claim{
		{{Request: udp, Addresses: x}, {Request: tcp, Addresses: x}},
		{{Request: tcp, Addresses: x}, {Request: udp, Addresses: x}},
	} {
		alloc, restored := Rebuild(ps, ByHolder(claims))
		for _, r := range restored {
			if !slices.Equal(r.Kept, x) || r.Lost != nil {
				t.Errorf("%s after the takeover: kept %v, lost %v; want %v kept", r.Service, r.Kept, r.Lost, x)
			}
		}
		for _, req := range []Request{udp, tcp} {
			if got, err := alloc.Allocate(req); err != nil || !slices.Equal(got, x) {
				t.Errorf("%s ensured after the takeover: %v %v, want %v", req.Service, got, err, x)
			}
		}
		third.Requested = x
		if got, err := alloc.Allocate(third); err == nil {
			t.Errorf("a new Service of a third namespace took the shared address: %v", got)
		}
	}
}

// TestAddressesHeldElsewhere: beside another implementation whose pools
// overlap this CCM's, an address one of its Services holds is neither
// handed out nor given on request nor shared, and is reported with its
// pool; once that Service lets it go, it is free again.
func TestAddressesHeldElsewhere(t *testing.T) {
	a := New(pools(t, `
  - {name: trial, addresses: ["192.0.2.1-192.0.2.3"]}
`))
	a.SetElsewhere(map[netip.Addr]string{netip.MustParseAddr("192.0.2.1"): "legacy/web", netip.MustParseAddr("203.0.113.9"): "legacy/far"})
	got, err := a.Allocate(v4("a"))
	if err != nil || got[0] != netip.MustParseAddr("192.0.2.2") {
		t.Errorf("allocation = %v, %v; want 192.0.2.2 (192.0.2.1 is legacy/web's)", got, err)
	}
	req := v4("b")
	req.Requested = addrs("192.0.2.1")
	if _, err := a.Allocate(req); err == nil || !strings.Contains(err.Error(), "192.0.2.1 is held by Service legacy/web, which another implementation serves") {
		t.Errorf("requesting legacy/web's address: %v, want a refusal naming it", err)
	}
	shared := v4("c")
	shared.SharingKey = "k"
	shared.Requested = addrs("192.0.2.1")
	if _, err := a.Allocate(shared); err == nil {
		t.Errorf("sharing legacy/web's address under a key was allowed")
	}
	want := []PoolAddress{{Pool: "trial", Address: netip.MustParseAddr("192.0.2.1"), Service: "legacy/web"}}
	if got := a.Elsewhere(); !slices.Equal(got, want) {
		t.Errorf("Elsewhere() = %v, want %v (203.0.113.9 is in no pool)", got, want)
	}
	a.SetElsewhere(nil)
	if got, err := a.Allocate(req); err != nil || got[0] != netip.MustParseAddr("192.0.2.1") {
		t.Errorf("after legacy/web let it go: %v, %v; want 192.0.2.1", got, err)
	}
}

// TestNamespaceSelector: a pool with a namespaceSelector serves the
// Services of the Namespaces whose labels match, and no other; beside
// namespaces, both must allow the Service.
func TestNamespaceSelector(t *testing.T) {
	a := New(pools(t, `
  - {name: teams, addresses: [192.0.2.0/30], namespaceSelector: {matchLabels: {team: a}}}
  - {name: team-web, addresses: [192.0.2.8/30], autoAssign: false, namespaces: [web], namespaceSelector: {matchExpressions: [{key: tier, operator: In, values: [front]}]}}
  - {name: rest, addresses: [198.51.100.0/30]}
`))
	for _, tc := range []struct {
		name      string
		namespace string
		labels    map[string]string
		pool      string
		want      string // an address, or an error's text
	}{
		{"a matching namespace gets the selecting pool", "shop", map[string]string{"team": "a"}, "", "192.0.2.0"},
		{"another namespace goes on to the next pool", "other", map[string]string{"team": "b"}, "", "198.51.100.0"},
		{"a namespace without labels too", "bare", nil, "", "198.51.100.1"},
		{"naming the pool from another namespace is refused", "other", map[string]string{"team": "b"}, "teams", `pool "teams" serves only namespaces whose labels match team=a`},
		{"both namespaces and the selector allow", "web", map[string]string{"tier": "front"}, "team-web", "192.0.2.8"},
		{"the selector alone is not enough", "api", map[string]string{"tier": "front"}, "team-web", `pool "team-web" is not for namespace "api"`},
		{"the list alone is not enough", "web", map[string]string{"tier": "back"}, "team-web", `serves only namespaces whose labels match tier in (front)`},
	} {
		req := v4(tc.name)
		req.Service, req.Namespace, req.NamespaceLabels, req.Pool = tc.namespace+"/"+tc.name, tc.namespace, tc.labels, tc.pool
		got, err := a.Allocate(req)
		switch {
		case err != nil && !strings.Contains(err.Error(), tc.want):
			t.Errorf("%s: %v, want %s", tc.name, err, tc.want)
		case err == nil && got[0].String() != tc.want:
			t.Errorf("%s: got %v, want %s", tc.name, got, tc.want)
		}
	}
}
