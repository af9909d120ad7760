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
		b, _ := a.MarshalBinary()
		buf = append(append(buf, byte(len(b))), b...)
	}
	num := func(v uint32) { buf = binary.BigEndian.AppendUint32(buf, v) }
	flush := func() {
		h.Write(buf)
		buf = buf[:0]
	}
	for _, key := range slices.Sorted(maps.Keys(s.Tables)) {
		buf = append(append(buf, key...), 0)
		paths := slices.Clone(s.Tables[key])
		slices.SortFunc(paths, func(a, b bgp.Announcement) int {
			if c := a.Prefix.Addr().Compare(b.Prefix.Addr()); c != 0 {
				return c
			}
			return a.Prefix.Bits() - b.Prefix.Bits()
		})
		for _, p := range paths {
			addr(p.Prefix.Addr())
			buf = append(buf, byte(p.Prefix.Bits()))
			hops := slices.Clone(p.NextHops)
			slices.SortFunc(hops, netip.Addr.Compare)
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
