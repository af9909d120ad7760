package desired

import (
	"encoding/binary"
	"hash/fnv"
	"maps"
	"net/netip"
	"slices"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/bgp"
)

// Fingerprint is a digest of what the state has announced: each
// selection's paths (prefix, next hops, attributes) and each layer 2 VIP's
// candidate nodes. Replicas that see the same cluster, with the same
// health verdicts, have the same one, whatever order they met it in; a
// difference that lasts says their views differ. 53 bits, so that a
// float64 gauge holds it exactly.
func (s *State) Fingerprint() uint64 {
	h := fnv.New64a()
	var buf []byte
	addr := func(a netip.Addr) {
		b := a.As16()
		buf = append(append(buf, byte(a.BitLen())), b[:]...)
	}
	num := func(v uint32) { buf = binary.BigEndian.AppendUint32(buf, v) }
	flush := func() {
		h.Write(buf)
		buf = buf[:0]
	}
	for _, key := range slices.Sorted(maps.Keys(s.Tables)) {
		buf = append(append(buf, key...), 0)
		// Tables and next hops come sorted; a copy is sorted only if not,
		// as a convergence at full size hashes 80,000 paths.
		paths := sortedCopy(s.Tables[key], func(a, b bgp.Announcement) int {
			if c := a.Prefix.Addr().Compare(b.Prefix.Addr()); c != 0 {
				return c
			}
			return a.Prefix.Bits() - b.Prefix.Bits()
		})
		for _, p := range paths {
			addr(p.Prefix.Addr())
			buf = append(buf, byte(p.Prefix.Bits()))
			hops := sortedCopy(p.NextHops, netip.Addr.Compare)
			num(uint32(len(hops)))
			for _, nh := range hops {
				addr(nh)
			}
			num(uint32(len(p.Communities)))
			for _, c := range p.Communities {
				num(c)
			}
			num(uint32(len(p.LargeCommunities)))
			for _, c := range p.LargeCommunities {
				num(c.Global)
				num(c.Local1)
				num(c.Local2)
			}
			num(p.LocalPref)
			if p.HasMED {
				buf = append(buf, 1)
				num(p.MED)
			}
			buf = append(buf, p.Prepend)
			flush()
		}
	}
	for _, v := range s.Layer2() {
		addr(v.Addr)
		for _, n := range v.Carriers {
			buf = append(append(buf, n.Name...), 0)
		}
		flush()
	}
	flush()
	return h.Sum64() & (1<<53 - 1)
}

// sortedCopy is s if it is sorted by cmp, else a sorted copy.
func sortedCopy[T any](s []T, cmp func(a, b T) int) []T {
	if slices.IsSortedFunc(s, cmp) {
		return s
	}
	out := slices.Clone(s)
	slices.SortFunc(out, cmp)
	return out
}
