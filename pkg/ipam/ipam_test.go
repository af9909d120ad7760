package ipam

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

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
	if err := a.Assign(v4("a"), addrs("192.0.2.2")); err != nil {
		t.Fatal(err)
	}
	if err := a.Assign(v4("b"), addrs("192.0.2.2")); err == nil {
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
