// Package ipam allocates LoadBalancer addresses from the pools of the cloud
// config. It keeps no state of its own on disk: the provider rebuilds it
// from the Services' status at start (Assign) before it allocates anything.
package ipam

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"math/big"
	"net/netip"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/config"
)

// Port is one port a Service exposes; two Services may share an address
// only where they have no Port in common.
type Port struct {
	Protocol string
	Port     int32
}

// Request is what a Service asks for.
type Request struct {
	// Service is "namespace/name".
	Service   string
	Namespace string
	// NamespaceLabels are the labels of the Service's Namespace.
	NamespaceLabels map[string]string
	Labels          map[string]string
	// Families lists, in order, the IP families wanted.
	Families []Family
	// Requested are addresses the Service asks for by name; families not
	// covered come from the same pool.
	Requested []netip.Addr
	// Pool, if set, is the pool to allocate from.
	Pool       string
	SharingKey string
	Ports      []Port
	// TrafficLocal is externalTrafficPolicy: Local; Selector the Service's
	// pod selector, written canonically. Services share an address only
	// when they are announced alike: Cluster with Cluster, or Local with
	// Local selecting the same pods (so the same nodes have endpoints).
	TrafficLocal bool
	Selector     string
}

// Family is an IP family.
type Family int

const (
	IPv4 Family = 4
	IPv6 Family = 6
)

func (f Family) String() string { return fmt.Sprintf("IPv%d", int(f)) }

// FamilyOf returns the family of a.
func FamilyOf(a netip.Addr) Family {
	if a.Is4() {
		return IPv4
	}
	return IPv6
}

type pool struct {
	config.Pool
	ranges            []config.AddressRange
	selector          labels.Selector
	namespaceSelector labels.Selector
}

type owner struct {
	service, namespace string
	sharingKey         string
	ports              []Port
	trafficLocal       bool
	selector           string
	// refused marks a sharer restored by a rebuild whose spec, edited
	// since, may no longer share: it keeps the address, the others that
	// hold it are not judged against its new spec, and its own next
	// Allocate is refused until the edit is undone.
	refused bool
}

// Allocator hands out addresses. It is not safe for concurrent use.
type Allocator struct {
	pools     []*pool
	owners    map[netip.Addr][]owner
	byService map[string][]netip.Addr
	// elsewhere are addresses Services of another implementation hold
	// (their status says so), by address: never handed out.
	elsewhere map[netip.Addr]string
}

// SetElsewhere replaces the addresses Services this CCM does not serve
// hold (another implementation's, beside it), each with its Service: none
// of them is handed out or shared, whatever the pools say.
func (a *Allocator) SetElsewhere(held map[netip.Addr]string) { a.elsewhere = held }

// Elsewhere are the addresses of pools that another implementation's
// Services hold, sorted, each with its pool.
func (a *Allocator) Elsewhere() []PoolAddress {
	var out []PoolAddress
	for addr, svc := range a.elsewhere {
		if p := a.poolOf(addr); p != nil {
			out = append(out, PoolAddress{Pool: p.Name, Address: addr, Service: svc})
		}
	}
	slices.SortFunc(out, func(x, y PoolAddress) int { return x.Address.Compare(y.Address) })
	return out
}

// PoolAddress is an address of a pool, and the Service holding it.
type PoolAddress struct {
	Pool    string
	Address netip.Addr
	Service string
}

// New returns an allocator for pools that passed config validation.
func New(pools []config.Pool) *Allocator {
	a := &Allocator{owners: map[netip.Addr][]owner{}, byService: map[string][]netip.Addr{}}
	a.SetPools(pools)
	return a
}

// SetPools puts new pools in force. Allocations stay, even those that no
// longer fall in any pool: they keep serving until their Service changes.
// It returns the addresses in use that are now outside every pool.
func (a *Allocator) SetPools(pools []config.Pool) []netip.Addr {
	a.pools = nil
	for _, cfg := range pools {
		p := &pool{Pool: cfg, selector: labels.Everything(), namespaceSelector: labels.Everything()}
		for _, s := range cfg.Addresses {
			if r, err := config.ParseAddressRange(s); err == nil {
				p.ranges = append(p.ranges, r)
			}
		}
		if sel := cfg.ServiceSelector; sel != nil {
			p.selector = sel.Selector()
		}
		if sel := cfg.NamespaceSelector; sel != nil {
			p.namespaceSelector = sel.Selector()
		}
		a.pools = append(a.pools, p)
	}
	return a.Outside()
}

// Outside returns the addresses in use that no pool contains.
func (a *Allocator) Outside() []netip.Addr {
	var outside []netip.Addr
	for addr := range a.owners {
		if a.poolOf(addr) == nil {
			outside = append(outside, addr)
		}
	}
	slices.SortFunc(outside, netip.Addr.Compare)
	return outside
}

// Addresses returns what the Service holds.
func (a *Allocator) Addresses(service string) []netip.Addr {
	return slices.Clone(a.byService[service])
}

// TrafficLocal is the externalTrafficPolicy an address is announced with:
// that of the Services holding it whose edits were not refused (they
// agree: sharing requires it), the first by name; a refused edit does not
// move it. Every replica derives it alike, from the Services alone.
func (a *Allocator) TrafficLocal(addr netip.Addr) bool {
	owners := a.owners[addr]
	if len(owners) == 0 {
		return false
	}
	return slices.MinFunc(owners, func(x, y owner) int {
		return cmp.Or(cmpBool(x.refused, y.refused), strings.Compare(x.service, y.service))
	}).trafficLocal
}

// cmpBool orders false before true.
func cmpBool(x, y bool) int {
	switch {
	case x == y:
		return 0
	case !x:
		return -1
	}
	return 1
}

// PoolOf names the pool an address is in, or "".
func (a *Allocator) PoolOf(addr netip.Addr) string {
	if p := a.poolOf(addr); p != nil {
		return p.Name
	}
	return ""
}

func (a *Allocator) poolOf(addr netip.Addr) *pool {
	for _, p := range a.pools {
		for _, r := range p.ranges {
			if r.Contains(addr) {
				return p
			}
		}
	}
	return nil
}

// Release frees what the Service holds.
func (a *Allocator) Release(service string) {
	for _, addr := range a.byService[service] {
		a.owners[addr] = slices.DeleteFunc(a.owners[addr], func(o owner) bool { return o.service == service })
		if len(a.owners[addr]) == 0 {
			delete(a.owners, addr)
		}
	}
	delete(a.byService, service)
}

// Assign records addresses a Service already has (from its status), as they
// are, at start. An address another Service holds in a way req may not
// share is left out, with an error naming it; the others are recorded, so
// a Service that loses one family keeps the other. An address outside
// every pool is kept.
func (a *Allocator) Assign(req Request, addrs []netip.Addr) ([]netip.Addr, error) {
	var kept []netip.Addr
	var errs []string
	for _, addr := range addrs {
		if err := a.shareable(addr, req); err != nil {
			errs = append(errs, err.Error())
			continue
		}
		kept = append(kept, addr)
	}
	if len(kept) > 0 {
		a.take(req, kept)
	}
	if len(errs) > 0 {
		return kept, errors.New(strings.Join(errs, "; "))
	}
	return kept, nil
}

// Claim is what a Service's status says it holds, for a rebuild.
type Claim struct {
	Request   Request
	Addresses []netip.Addr
	// Ours is set when this CCM wrote the addresses into the status (a hand
	// edit or another tool's write is not ours).
	Ours bool
	// Edited is set when the Service's spec or annotations changed after
	// its status was written.
	Edited bool
	// Created is when the Service was created.
	Created time.Time
}

// Restored is what a rebuild gave one claim.
type Restored struct {
	Service string
	Kept    []netip.Addr
	// Lost says which claimed addresses another Service holds, so the
	// claim lost them; nil when it kept all.
	Lost error
	// Refused says which addresses the claim keeps although its edited
	// spec may no longer share them; nil when none.
	Refused error
	// Foreign are the claimed addresses outside every pool that this CCM
	// did not write: not taken, so never announced. Whoever may write a
	// Service's status cannot have any address sent to the routers.
	Foreign []netip.Addr
}

// ByHolder orders claims for Rebuild so that in a conflict the true holder
// keeps the address, the same one at every rebuild whatever order the
// claims were listed in: first those whose addresses this CCM wrote (a hand
// edit or a tool's is not), then the oldest, then by Service.
func ByHolder(claims []Claim) []Claim {
	out := slices.Clone(claims)
	slices.SortStableFunc(out, func(a, b Claim) int {
		if a.Ours != b.Ours {
			if a.Ours {
				return -1
			}
			return 1
		}
		if c := a.Created.Compare(b.Created); c != 0 {
			return c
		}
		return strings.Compare(a.Request.Service, b.Request.Service)
	})
	return out
}

// Rebuild restores the allocations the Services' statuses record, claims
// in order of precedence (the true holder first: see ByHolder). An address claimed by
// several Services stays with each of them when the CCM wrote all their
// statuses and the sharing they had broke only because a spec was edited
// since (its ports, traffic policy, selector, sharing key, an annotation):
// the CCM refused that edit and kept the address, so the rebuild keeps it
// too, and the edited Service is the one refused, never the other. Any
// other contested address goes to the first claim; the later ones lose it
// and keep the rest.
func Rebuild(pools []config.Pool, claims []Claim) (*Allocator, []Restored) {
	a := New(pools)
	out := make([]Restored, 0, len(claims))
	index := map[string]int{} // Service -> its entry in out
	ours, edited := map[string]bool{}, map[string]bool{}
	for _, c := range claims {
		req := c.Request
		ours[req.Service], edited[req.Service] = c.Ours, c.Ours && c.Edited
		var kept, refusedHere, foreign []netip.Addr
		var lost, refused []string
		for _, addr := range c.Addresses {
			if !c.Ours && a.poolOf(addr) == nil {
				foreign = append(foreign, addr)
				continue
			}
			// A share the statuses show is one the site has: kept across
			// namespaces too (MetalLB's allow-shared-ip joins them).
			err := a.shareableSkipping(addr, req, false, true)
			if err == nil {
				kept = append(kept, addr)
				continue
			}
			holders := a.owners[addr]
			wasShared := c.Ours && !slices.ContainsFunc(holders, func(o owner) bool { return !ours[o.service] })
			switch {
			case wasShared && edited[req.Service]:
				kept, refusedHere = append(kept, addr), append(refusedHere, addr)
				refused = append(refused, err.Error())
			case wasShared && slices.ContainsFunc(holders, func(o owner) bool { return edited[o.service] }):
				// A holder that was edited is the one refused.
				for i := range holders {
					if o := &holders[i]; edited[o.service] && !o.refused {
						o.refused = true
						r := &out[index[o.service]]
						r.Refused = errors.Join(r.Refused, fmt.Errorf("the Service keeps %s, but its spec may no longer share it with Service %s", addr, req.Service))
					}
				}
				if err := a.shareableSkipping(addr, req, true, true); err != nil {
					lost = append(lost, err.Error())
					continue
				}
				kept = append(kept, addr)
			default:
				lost = append(lost, err.Error())
			}
		}
		if len(kept) > 0 {
			a.take(req, kept)
			for _, addr := range refusedHere {
				for i := range a.owners[addr] {
					if a.owners[addr][i].service == req.Service {
						a.owners[addr][i].refused = true
					}
				}
			}
		}
		r := Restored{Service: req.Service, Kept: kept, Foreign: foreign}
		if len(lost) > 0 {
			r.Lost = errors.New(strings.Join(lost, "; "))
		}
		if len(refused) > 0 {
			r.Refused = fmt.Errorf("the Service keeps its address, but its spec may no longer share it: %s", strings.Join(refused, "; "))
		}
		index[req.Service] = len(out)
		out = append(out, r)
	}
	return a, out
}

func (a *Allocator) take(req Request, addrs []netip.Addr) {
	a.Release(req.Service)
	for _, addr := range addrs {
		a.owners[addr] = append(a.owners[addr], owner{service: req.Service, namespace: req.Namespace, sharingKey: req.SharingKey,
			ports: req.Ports, trafficLocal: req.TrafficLocal, selector: req.Selector})
	}
	a.byService[req.Service] = slices.Clone(addrs)
}

// shareable says why req may not use addr, or nil if it may. A sharer
// whose edit was refused does not count against the others holding addr;
// a Service that holds addr already keeps it across namespaces.
func (a *Allocator) shareable(addr netip.Addr, req Request) error {
	held := slices.Contains(a.byService[req.Service], addr)
	return a.shareableSkipping(addr, req, held, held)
}

// shareableSkipping is shareable; existing says the share exists already
// (req holds addr, or the statuses say it does): the namespaces rule
// (sharedAcrossNamespaces) is for new shares, and every share a site had
// when this CCM took over (MetalLB shares across namespaces) is kept.
func (a *Allocator) shareableSkipping(addr netip.Addr, req Request, skipRefused, existing bool) error {
	if svc, ok := a.elsewhere[addr]; ok && svc != req.Service {
		return fmt.Errorf("%s is held by Service %s, which another implementation serves (its loadBalancerClass is not this CCM's)", addr, svc)
	}
	for _, o := range a.owners[addr] {
		if o.service == req.Service || (o.refused && skipRefused) {
			continue
		}
		if req.SharingKey == "" || o.sharingKey != req.SharingKey {
			return fmt.Errorf("%s is in use by Service %s", addr, o.service)
		}
		if o.namespace != req.Namespace && !existing && !a.sharedAcrossNamespaces(addr, req.SharingKey) {
			return fmt.Errorf("%s is shared under key %q by Service %s of another namespace; a key joins namespaces only when its pool lists it in sharedAcrossNamespaces", addr, req.SharingKey, o.service)
		}
		if o.trafficLocal != req.TrafficLocal {
			return fmt.Errorf("%s is shared with Service %s, whose externalTrafficPolicy is %s: Services sharing an address must have the same policy", addr, o.service, policyName(o.trafficLocal))
		}
		if o.trafficLocal && o.selector != req.Selector {
			return fmt.Errorf("%s is shared with Service %s, which selects other pods (%s): with externalTrafficPolicy Local, Services sharing an address must have the same selector", addr, o.service, o.selector)
		}
		for _, p := range req.Ports {
			if slices.Contains(o.ports, p) {
				return fmt.Errorf("%s is shared with Service %s, which also uses port %d/%s", addr, o.service, p.Port, p.Protocol)
			}
		}
	}
	return nil
}

// ShareRefusals says why req shares none of the addresses other Services
// hold under its sharing key, one error for each such address; nil when it
// has no key or shares one of them.
func (a *Allocator) ShareRefusals(req Request) []error {
	if req.SharingKey == "" {
		return nil
	}
	var refusals []error
	for _, addr := range slices.SortedFunc(maps.Keys(a.owners), netip.Addr.Compare) {
		others := slices.ContainsFunc(a.owners[addr], func(o owner) bool { return o.service != req.Service && o.sharingKey == req.SharingKey })
		if !others {
			continue
		}
		if slices.Contains(a.byService[req.Service], addr) {
			return nil
		}
		if err := a.shareable(addr, req); err != nil {
			refusals = append(refusals, err)
		}
	}
	return refusals
}

func policyName(local bool) string {
	if local {
		return "Local"
	}
	return "Cluster"
}

func (a *Allocator) sharedAcrossNamespaces(addr netip.Addr, key string) bool {
	p := a.poolOf(addr)
	return p != nil && slices.Contains(p.SharedAcrossNamespaces, key)
}

// Allocate returns the addresses the Service should have, allocating what it
// lacks. Each address it holds is kept while the request still allows it,
// whatever happens to the other family: a Service that becomes dual-stack,
// single-stack, or asks for another address of one family keeps the other.
// An edit that breaks the sharing of an address it holds (a port another
// sharer uses, another traffic policy) is refused. On error nothing
// changes: the Service keeps what it had.
func (a *Allocator) Allocate(req Request) ([]netip.Addr, error) {
	if len(req.Families) == 0 {
		return nil, fmt.Errorf("the Service asks for no IP family")
	}
	keep, err := a.keepable(req)
	if err != nil {
		return nil, err
	}
	byFamily, err := a.choose(req, keep)
	if err != nil {
		return nil, err
	}
	out := make([]netip.Addr, 0, len(req.Families))
	for _, f := range req.Families {
		out = append(out, byFamily[f])
	}
	a.take(req, out)
	return slices.Clone(out), nil
}

// keepable are the addresses the Service holds that req still allows, by
// family: of a wanted family, the one requested for it if any, in the
// requested pool if any. A requested address is left to choose, so that
// a request held and a request made fresh follow one rule.
func (a *Allocator) keepable(req Request) (map[Family]netip.Addr, error) {
	keep := map[Family]netip.Addr{}
	for _, addr := range a.byService[req.Service] {
		f := FamilyOf(addr)
		if !slices.Contains(req.Families, f) || slices.ContainsFunc(req.Requested, func(r netip.Addr) bool { return FamilyOf(r) == f }) {
			continue
		}
		if req.Pool != "" && a.PoolOf(addr) != req.Pool {
			continue
		}
		if err := a.shareable(addr, req); err != nil {
			return nil, fmt.Errorf("the Service keeps its address: %w", err)
		}
		keep[f] = addr
	}
	return keep, nil
}

// choose completes keep with the requested addresses and new ones. New
// addresses come from the pool of the requested ones, else of a kept one,
// else the first pool that serves the Service.
func (a *Allocator) choose(req Request, keep map[Family]netip.Addr) (map[Family]netip.Addr, error) {
	byFamily := maps.Clone(keep)
	var from *pool
	var fromAddr netip.Addr
	for _, r := range req.Requested {
		f := FamilyOf(r)
		if !slices.Contains(req.Families, f) {
			return nil, fmt.Errorf("requested address %s is %s, but the Service's IP families are %v", r, f, req.Families)
		}
		if _, dup := byFamily[f]; dup {
			return nil, fmt.Errorf("more than one %s address requested", f)
		}
		p := a.poolOf(r)
		if p == nil {
			return nil, fmt.Errorf("requested address %s is in no pool (pools: %s)", r, a.poolNames())
		}
		if req.Pool != "" && p.Name != req.Pool {
			return nil, fmt.Errorf("requested address %s is in pool %q, not in the requested pool %q", r, p.Name, req.Pool)
		}
		if err := a.allowed(p, req); err != nil {
			return nil, err
		}
		if from != nil && from != p {
			return nil, fmt.Errorf("requested addresses %s and %s are in different pools (%q, %q)", fromAddr, r, from.Name, p.Name)
		}
		if err := a.shareable(r, req); err != nil {
			return nil, fmt.Errorf("requested address %w", err)
		}
		from, fromAddr = p, r
		byFamily[f] = r
	}
	var missing []Family
	for _, f := range req.Families {
		if _, ok := byFamily[f]; !ok {
			missing = append(missing, f)
		}
	}
	if len(missing) == 0 {
		return byFamily, nil
	}
	if from == nil {
		for _, addr := range keep {
			if p := a.poolOf(addr); p != nil && a.allowed(p, req) == nil {
				from = p
			}
		}
	}
	candidates, err := a.candidatePools(req, from, missing)
	if err != nil {
		return nil, err
	}
	var errs []string
	for _, p := range candidates {
		picked, err := a.pick(p, req, byFamily)
		if err == nil {
			return picked, nil
		}
		errs = append(errs, err.Error())
	}
	return nil, errors.New(strings.Join(errs, "; "))
}

func (a *Allocator) poolNames() string {
	var names []string
	for _, p := range a.pools {
		names = append(names, p.Name)
	}
	if len(names) == 0 {
		return "none configured"
	}
	return strings.Join(names, ", ")
}

// candidatePools are the pools req may allocate the missing families
// from, in config order.
func (a *Allocator) candidatePools(req Request, fixed *pool, missing []Family) ([]*pool, error) {
	if fixed != nil {
		return []*pool{fixed}, nil
	}
	if req.Pool != "" {
		for _, p := range a.pools {
			if p.Name == req.Pool {
				if err := a.allowed(p, req); err != nil {
					return nil, err
				}
				return []*pool{p}, nil
			}
		}
		return nil, fmt.Errorf("there is no pool %q (pools: %s)", req.Pool, a.poolNames())
	}
	var out []*pool
	for _, p := range a.pools {
		if p.Auto() && a.allowed(p, req) == nil && p.hasFamilies(missing) {
			out = append(out, p)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no pool that assigns addresses automatically serves this Service with %v addresses (pools: %s)", req.Families, a.poolNames())
	}
	return out, nil
}

func (p *pool) hasFamilies(fs []Family) bool {
	for _, f := range fs {
		if !slices.ContainsFunc(p.ranges, func(r config.AddressRange) bool { return FamilyOf(r.First) == f }) {
			return false
		}
	}
	return true
}

func (a *Allocator) allowed(p *pool, req Request) error {
	if len(p.Namespaces) > 0 && !slices.Contains(p.Namespaces, req.Namespace) {
		return fmt.Errorf("pool %q is not for namespace %q (it serves %s)", p.Name, req.Namespace, strings.Join(p.Namespaces, ", "))
	}
	if !p.namespaceSelector.Matches(labels.Set(req.NamespaceLabels)) {
		return fmt.Errorf("pool %q serves only namespaces whose labels match %s", p.Name, p.namespaceSelector)
	}
	if !p.selector.Matches(labels.Set(req.Labels)) {
		return fmt.Errorf("pool %q serves only Services matching %s", p.Name, p.selector)
	}
	return nil
}

// pick fills the families missing from have with addresses of p.
func (a *Allocator) pick(p *pool, req Request, have map[Family]netip.Addr) (map[Family]netip.Addr, error) {
	out := map[Family]netip.Addr{}
	for f, addr := range have {
		out[f] = addr
	}
	for _, f := range req.Families {
		if _, ok := out[f]; ok {
			continue
		}
		addr, ok := a.free(p, f, req)
		if !ok {
			return nil, fmt.Errorf("pool %q has no free %s address (all %s in use)", p.Name, f, p.size(f).String())
		}
		out[f] = addr
	}
	return out, nil
}

// free finds an address of family f in p that req may use: one it can
// share under its sharing key first, then the lowest unused one.
func (a *Allocator) free(p *pool, f Family, req Request) (netip.Addr, bool) {
	if req.SharingKey != "" {
		var shared []netip.Addr
		for addr, owners := range a.owners {
			if FamilyOf(addr) == f && a.poolOf(addr) == p && owners[0].sharingKey == req.SharingKey && a.shareable(addr, req) == nil {
				shared = append(shared, addr)
			}
		}
		if len(shared) > 0 {
			return slices.MinFunc(shared, netip.Addr.Compare), true
		}
	}
	for _, r := range p.ranges {
		if FamilyOf(r.First) != f {
			continue
		}
		for addr := r.First; addr.IsValid() && !r.Last.Less(addr); addr = addr.Next() {
			if p.AvoidBuggyIPs && buggy(addr) {
				continue
			}
			if _, used := a.owners[addr]; !used {
				if _, taken := a.elsewhere[addr]; !taken {
					return addr, true
				}
			}
		}
	}
	return netip.Addr{}, false
}

// buggy reports IPv4 addresses ending in .0 or .255, which some clients
// and routers mistake for network or broadcast addresses.
func buggy(a netip.Addr) bool {
	if !a.Is4() {
		return false
	}
	last := a.As4()[3]
	return last == 0 || last == 255
}

// size is how many addresses of family f the pool hands out: those
// avoidBuggyIPs skips are not counted.
func (p *pool) size(f Family) *big.Int {
	total := new(big.Int)
	for _, r := range p.ranges {
		if FamilyOf(r.First) != f {
			continue
		}
		first := new(big.Int).SetBytes(r.First.AsSlice())
		last := new(big.Int).SetBytes(r.Last.AsSlice())
		total.Add(total, new(big.Int).Sub(last, first))
		total.Add(total, big.NewInt(1))
		if p.AvoidBuggyIPs && f == IPv4 {
			lo, hi := first.Int64(), last.Int64()
			total.Sub(total, big.NewInt(endingIn(lo, hi, 0)+endingIn(lo, hi, 255)))
		}
	}
	return total
}

// PoolUsage is how many addresses of one family a pool hands out (Size; an
// IPv6 pool's may exceed what a float64 holds exactly) and how many of
// them Services hold (Used; a shared address counts once).
type PoolUsage struct {
	Pool   string
	Family Family
	Size   float64
	Used   int
	// Elsewhere are held by Services another implementation serves.
	Elsewhere int
}

// Free is what is left to hand out. An address a Service asked for by
// name may be one avoidBuggyIPs skips, so Used can pass Size.
func (u PoolUsage) Free() float64 {
	return max(u.Size-float64(u.Used)-float64(u.Elsewhere), 0)
}

// Usage reports each pool's families in the config's order of pools.
func (a *Allocator) Usage() []PoolUsage {
	used, elsewhere := map[*pool]map[Family]int{}, map[*pool]map[Family]int{}
	count := func(m map[*pool]map[Family]int, addr netip.Addr) {
		if p := a.poolOf(addr); p != nil {
			if m[p] == nil {
				m[p] = map[Family]int{}
			}
			m[p][FamilyOf(addr)]++
		}
	}
	for addr := range a.owners {
		count(used, addr)
	}
	for addr := range a.elsewhere {
		if _, ours := a.owners[addr]; !ours {
			count(elsewhere, addr)
		}
	}
	var out []PoolUsage
	for _, p := range a.pools {
		for _, f := range []Family{IPv4, IPv6} {
			size := p.size(f)
			if size.Sign() == 0 {
				continue
			}
			total, _ := size.Float64()
			out = append(out, PoolUsage{Pool: p.Name, Family: f, Size: total, Used: used[p][f], Elsewhere: elsewhere[p][f]})
		}
	}
	return out
}

// endingIn counts the n in [lo, hi] with n%256 == r.
func endingIn(lo, hi, r int64) int64 {
	below := func(x int64) int64 { // how many n in [0, x] have n%256 == r
		if x < r {
			return 0
		}
		return (x-r)/256 + 1
	}
	return below(hi) - below(lo-1)
}
