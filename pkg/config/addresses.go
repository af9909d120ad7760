package config

import (
	"fmt"
	"net/netip"
	"strings"
)

// AddressRange is an inclusive range of addresses of one family.
type AddressRange struct {
	First, Last netip.Addr
}

// ParseAddressRange reads a CIDR ("192.0.2.0/28", "2001:db8::/120") or a
// range of two addresses of one family ("192.0.2.10-192.0.2.20").
func ParseAddressRange(s string) (AddressRange, error) {
	s = strings.TrimSpace(s)
	if first, last, ok := strings.Cut(s, "-"); ok {
		a, err1 := netip.ParseAddr(strings.TrimSpace(first))
		b, err2 := netip.ParseAddr(strings.TrimSpace(last))
		switch {
		case err1 != nil || err2 != nil || a.Zone() != "" || b.Zone() != "":
			return AddressRange{}, fmt.Errorf("%q is not a range of two IPs", s)
		case a.Is4() != b.Is4():
			return AddressRange{}, fmt.Errorf("%q mixes IPv4 and IPv6", s)
		case b.Less(a):
			return AddressRange{}, fmt.Errorf("%q ends before it starts", s)
		}
		return AddressRange{First: a.Unmap(), Last: b.Unmap()}, nil
	}
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return AddressRange{}, fmt.Errorf("%q is neither a CIDR nor a first-last range", s)
	}
	if p.Masked() != p {
		return AddressRange{}, fmt.Errorf("%q has host bits set; the network is %s", s, p.Masked())
	}
	return AddressRange{First: p.Addr(), Last: lastAddr(p)}, nil
}

func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

// Contains reports whether a is in the range.
func (r AddressRange) Contains(a netip.Addr) bool {
	return r.First.BitLen() == a.BitLen() && !a.Less(r.First) && !r.Last.Less(a)
}

// Overlaps reports whether the ranges share an address.
func (r AddressRange) Overlaps(o AddressRange) bool {
	return r.First.BitLen() == o.First.BitLen() && !r.Last.Less(o.First) && !o.Last.Less(r.First)
}

func (r AddressRange) String() string {
	if r.First == r.Last {
		return r.First.String()
	}
	return r.First.String() + "-" + r.Last.String()
}
