package config

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Defaults of a BGP peer.
const (
	DefaultBGPPort  = 179
	DefaultHoldTime = 90 * time.Second
	// MaxMaximumPaths is the most paths of a prefix GoBGP sends (its
	// ADD-PATH send-max is a byte).
	MaxMaximumPaths = 255
	// A BFD session's intervals: FRR's bfdd takes 10ms to 60s; faster
	// than 10ms, a busy replica would flap its own sessions.
	DefaultBFDInterval   = 300 * time.Millisecond
	MinBFDInterval       = 10 * time.Millisecond
	MaxBFDInterval       = 60 * time.Second
	DefaultBFDMultiplier = 3
	DefaultRestartTime   = 120 * time.Second
	DefaultConnectRetry  = 5 * time.Second
)

// Defaults of the node health check: kube-proxy's healthz, and a dead node
// out within about 2.5 s (a round every 500 ms, each probe given 1 s, two
// failures in a row); back after two passes.
const (
	DefaultHealthCheckPort     = 10256
	DefaultHealthCheckPath     = "/healthz"
	DefaultHealthCheckInterval = 500 * time.Millisecond
	DefaultHealthCheckTimeout  = time.Second
	DefaultUnhealthyThreshold  = 2
	DefaultHealthyThreshold    = 2
)

func (c *Config) setNetworkDefaults() {
	if c.Routes != nil && c.Routes.NextHopAddressType == "" {
		c.Routes.NextHopAddressType = AddressInternalIP
	}
	if c.LoadBalancer.Announce == "" {
		c.LoadBalancer.Announce = AnnounceBGP
	}
	h := &c.LoadBalancer.HealthCheck
	if h.Port == 0 {
		h.Port = DefaultHealthCheckPort
	}
	if h.Path == "" {
		h.Path = DefaultHealthCheckPath
	}
	if h.Interval.Duration == 0 {
		h.Interval.Duration = DefaultHealthCheckInterval
	}
	if h.Timeout.Duration == 0 {
		h.Timeout.Duration = DefaultHealthCheckTimeout
	}
	if h.UnhealthyThreshold == 0 {
		h.UnhealthyThreshold = DefaultUnhealthyThreshold
	}
	if h.HealthyThreshold == 0 {
		h.HealthyThreshold = DefaultHealthyThreshold
	}
	for i := range c.BGP.Peers {
		p := &c.BGP.Peers[i]
		if p.Port == 0 {
			p.Port = DefaultBGPPort
		}
		if p.HoldTime.Duration == 0 {
			p.HoldTime.Duration = DefaultHoldTime
		}
		if p.KeepaliveTime.Duration == 0 {
			// A third of the hold time, in the whole seconds BGP counts in.
			p.KeepaliveTime.Duration = max((p.HoldTime.Duration / 3).Truncate(time.Second), time.Second)
		}
		if p.ConnectRetryTime.Duration == 0 {
			p.ConnectRetryTime.Duration = DefaultConnectRetry
		}
		if len(p.AddressFamilies) == 0 {
			p.AddressFamilies = []string{FamilyIPv4, FamilyIPv6}
		}
		if p.MaximumPaths == 0 {
			p.MaximumPaths = DefaultMaximumPaths
		}
		if p.GracefulRestart.RestartTime.Duration == 0 {
			p.GracefulRestart.RestartTime.Duration = DefaultRestartTime
		}
		if f := p.BFD; f != nil {
			if f.TransmitInterval.Duration == 0 {
				f.TransmitInterval.Duration = DefaultBFDInterval
			}
			if f.ReceiveInterval.Duration == 0 {
				f.ReceiveInterval.Duration = DefaultBFDInterval
			}
			if f.DetectMultiplier == 0 {
				f.DetectMultiplier = DefaultBFDMultiplier
			}
			if f.MinimumTTL == 0 && p.EBGPMultihop > 0 {
				f.MinimumTTL = 256 - int(p.EBGPMultihop)
			}
		}
	}
}

// PeerPassword returns the peer's MD5 password, reading its file if given.
func (p *Peer) PeerPassword() (string, error) {
	if p.PasswordFile == "" {
		return p.Password, nil
	}
	pw, err := ReadSecretFile(p.PasswordFile)
	if err != nil {
		return "", fmt.Errorf("reading the password of BGP peer %s: %w", p.Address, err)
	}
	if len(pw) > 80 {
		return "", fmt.Errorf("the password of BGP peer %s in %s is longer than the 80 bytes TCP MD5 allows", p.Address, p.PasswordFile)
	}
	return pw, nil
}

func (c *Config) validateNetwork(add reporter, readSecrets bool) {
	lb := &c.LoadBalancer
	lp := field.NewPath("loadBalancer")
	switch lb.Announce {
	case AnnounceBGP, AnnounceNone:
	case AnnounceL2:
		add(lp.Child("announce"), "l2 is set per pool, each with its l2.interface (loadBalancer.pools[].announce: l2)")
	default:
		add(lp.Child("announce"), "%q is not one of bgp, none", lb.Announce)
	}
	validateHealthCheck(add, lp.Child("healthCheck"), lb.HealthCheck)
	type owned struct {
		r    AddressRange
		pool string
	}
	var taken []owned
	names := map[string]bool{}
	for i := range lb.Pools {
		pool := &lb.Pools[i]
		pp := lp.Child("pools").Index(i)
		if pool.Name == "" {
			add(pp.Child("name"), "is required")
		} else if msgs := validation.IsDNS1123Label(pool.Name); len(msgs) > 0 {
			add(pp.Child("name"), "%q is not a valid pool name: %s", pool.Name, strings.Join(msgs, "; "))
		} else if names[pool.Name] {
			add(pp.Child("name"), "%q is already used by another pool", pool.Name)
		}
		names[pool.Name] = true
		if len(pool.Addresses) == 0 {
			add(pp.Child("addresses"), "needs at least one CIDR or range")
		}
		for j, a := range pool.Addresses {
			ap := pp.Child("addresses").Index(j)
			r, err := ParseAddressRange(a)
			if err != nil {
				add(ap, "%v", err)
				continue
			}
			for _, o := range taken {
				if o.r.Overlaps(r) {
					add(ap, "%q overlaps %s of pool %q", a, o.r, o.pool)
				}
			}
			taken = append(taken, owned{r, pool.Name})
		}
		for j, ns := range pool.Namespaces {
			if msgs := validation.IsDNS1123Label(ns); len(msgs) > 0 {
				add(pp.Child("namespaces").Index(j), "%q is not a namespace name", ns)
			}
		}
		for j, key := range pool.SharedAcrossNamespaces {
			if key == "" || len(key) > 253 || strings.ContainsAny(key, " \t\r\n") {
				add(pp.Child("sharedAcrossNamespaces").Index(j), "%q is not a sharing key (1 to 253 characters without spaces)", key)
			}
		}
		if sel := pool.ServiceSelector; sel != nil {
			checkSelector(add, pp.Child("serviceSelector"), sel)
		}
		if sel := pool.NamespaceSelector; sel != nil {
			checkSelector(add, pp.Child("namespaceSelector"), sel)
		}
		checkPathAttributes(add, pp.Child("bgp"), pool.BGP)
		validatePoolAnnounce(add, pp, pool, lb)
	}

	if r := c.Routes; r != nil {
		rp := field.NewPath("routes")
		if r.NextHopAddressType != AddressInternalIP && r.NextHopAddressType != AddressExternalIP {
			add(rp.Child("nextHopAddressType"), "%q is not one of InternalIP, ExternalIP", r.NextHopAddressType)
		}
		checkPathAttributes(add, rp.Child("bgp"), r.BGP)
	}

	b := &c.BGP
	bp := field.NewPath("bgp")
	announcing := (lb.AnnouncesBGP() && (len(lb.Pools) > 0 || len(b.Peers) > 0)) || c.Routes != nil

	if announcing || b.LocalASN != 0 {
		if b.LocalASN == 0 {
			add(bp.Child("localASN"), "is required to announce VIPs or routes over BGP (or set loadBalancer.announce: none and leave out routes)")
		}
		// Left out, each replica uses its own address (POD_IP).
		if id, err := netip.ParseAddr(b.RouterID); b.RouterID != "" && (err != nil || !id.Is4()) {
			add(bp.Child("routerID"), "%q is not an IPv4 address (the BGP router ID is written as one)", b.RouterID)
		}
	}
	for j, a := range b.ListenAddresses {
		if _, err := netip.ParseAddr(a); err != nil {
			add(bp.Child("listenAddresses").Index(j), "%q is not an IP", a)
		}
	}
	if sels, peerIdx := b.Selections(); b.ListenPort != 0 && len(sels) > 1 {
		add(bp.Child("listenPort"), "sessions can be accepted only when every peer has the same maximumPaths, nodeSelector and advertisements (bgp.peers[%d] differs from bgp.peers[%d]); leave listenPort out and the CCM dials every peer", peerIdx[1][0], peerIdx[0][0])
	}
	peers := map[netip.Addr]bool{}
	for i := range b.Peers {
		p := &b.Peers[i]
		pp := bp.Child("peers").Index(i)
		addr, err := netip.ParseAddr(p.Address)
		if err != nil {
			add(pp.Child("address"), "%q is not an IP", p.Address)
		} else if peers[addr] {
			add(pp.Child("address"), "%q is already a peer", p.Address)
		}
		peers[addr] = true
		if p.ASN == 0 {
			add(pp.Child("asn"), "is required")
		}
		if p.Password != "" && p.PasswordFile != "" {
			add(pp, "set password or passwordFile, not both")
		}
		if p.PasswordFile != "" && readSecrets {
			if _, err := p.PeerPassword(); err != nil {
				add(pp.Child("passwordFile"), "%v", err)
			}
		}
		if p.SourceAddress != "" {
			if _, err := netip.ParseAddr(p.SourceAddress); err != nil {
				add(pp.Child("sourceAddress"), "%q is not an IP", p.SourceAddress)
			}
		}
		if h := p.HoldTime.Duration; h < 3*time.Second || h > 65535*time.Second || h%time.Second != 0 {
			add(pp.Child("holdTime"), "%s must be whole seconds from 3s to 65535s", h)
		}
		if k := p.KeepaliveTime.Duration; k < time.Second || k >= p.HoldTime.Duration || k%time.Second != 0 {
			add(pp.Child("keepaliveTime"), "%s must be whole seconds, at least 1s and shorter than holdTime", k)
		}
		if c := p.ConnectRetryTime.Duration; c < time.Second || c > 65535*time.Second || c%time.Second != 0 {
			add(pp.Child("connectRetryTime"), "%s must be whole seconds from 1s to 65535s", c)
		}
		if r := p.GracefulRestart.RestartTime.Duration; r > 4095*time.Second || r%time.Second != 0 {
			add(pp.Child("gracefulRestart", "restartTime"), "%s must be whole seconds up to 4095s", r)
		}
		if p.MaximumPaths < 1 || p.MaximumPaths > MaxMaximumPaths {
			add(pp.Child("maximumPaths"), "%d must be from 1 to %d (set it to the router's ECMP width)", p.MaximumPaths, MaxMaximumPaths)
		}
		if l := p.MaximumLoad; l != 0 && (l < 1 || l > 2) {
			add(pp.Child("maximumLoad"), "%g must be from 1 to 2 (a multiple of the mean paths per node)", l)
		}
		if p.NodeSelector != nil {
			checkSelector(add, pp.Child("nodeSelector"), p.NodeSelector)
		}
		if f := p.BFD; f != nil {
			fp := pp.Child("bfd")
			for name, d := range map[string]time.Duration{"transmitInterval": f.TransmitInterval.Duration, "receiveInterval": f.ReceiveInterval.Duration} {
				if d < MinBFDInterval || d > MaxBFDInterval || d%time.Millisecond != 0 {
					add(fp.Child(name), "%s must be whole milliseconds from %s to %s", d, MinBFDInterval, MaxBFDInterval)
				}
			}
			if f.DetectMultiplier < 2 || f.DetectMultiplier > 255 {
				add(fp.Child("detectMultiplier"), "%d must be from 2 to 255", f.DetectMultiplier)
			}
			switch {
			case p.EBGPMultihop == 0 && f.MinimumTTL != 0:
				add(fp.Child("minimumTTL"), "is for a multihop session (a peer with ebgpMultihop); a single-hop one takes only TTL 255")
			case p.EBGPMultihop > 0 && (f.MinimumTTL < 1 || f.MinimumTTL > 255):
				add(fp.Child("minimumTTL"), "%d must be from 1 to 255", f.MinimumTTL)
			}
		}
		for j, f := range p.AddressFamilies {
			if f != FamilyIPv4 && f != FamilyIPv6 {
				add(pp.Child("addressFamilies").Index(j), "%q is not one of %s, %s", f, FamilyIPv4, FamilyIPv6)
			} else if slices.Index(p.AddressFamilies, f) != j {
				add(pp.Child("addressFamilies").Index(j), "%q is listed twice", f)
			}
		}
	}
	validateAdvertisements(add, bp, b, lb)
}

// validateAdvertisements checks bgp.advertisements: pools and peers that
// exist, attributes each peer can take (local preference on iBGP, prepend
// on eBGP), and one advertisement at most for each pool and peer.
func validateAdvertisements(add reporter, bp *field.Path, b *BGP, lb *LoadBalancer) {
	covered := map[[2]string]int{}
	for i, ad := range b.Advertisements {
		ap := bp.Child("advertisements").Index(i)
		if len(ad.Pools) == 0 {
			add(ap.Child("pools"), "names no pool")
		}
		for j, name := range ad.Pools {
			k := slices.IndexFunc(lb.Pools, func(p Pool) bool { return p.Name == name })
			switch {
			case k < 0:
				add(ap.Child("pools").Index(j), "%q is no pool of loadBalancer.pools", name)
			case lb.Pools[k].Announced(lb) != AnnounceBGP:
				add(ap.Child("pools").Index(j), "pool %q is not announced over BGP", name)
			}
		}
		var targets []int // indexes of its peers in bgp.peers
		for j, a := range ad.Peers {
			k := slices.IndexFunc(b.Peers, func(p Peer) bool { return samePeer(p.Address, a) })
			if k < 0 {
				add(ap.Child("peers").Index(j), "%q is no peer of bgp.peers", a)
				continue
			}
			targets = append(targets, k)
		}
		if len(ad.Peers) == 0 {
			for k := range b.Peers {
				targets = append(targets, k)
			}
		}
		checkPathAttributes(add, ap, PoolBGP{Communities: ad.Communities, LargeCommunities: ad.LargeCommunities})
		if ad.ASPathPrepend < 0 || ad.ASPathPrepend > MaxASPathPrepend {
			add(ap.Child("asPathPrepend"), "%d must be from 1 to %d", ad.ASPathPrepend, MaxASPathPrepend)
		}
		for _, k := range targets {
			p := &b.Peers[k]
			if ad.LocalPreference != nil && p.ASN != b.LocalASN {
				add(ap.Child("localPreference"), "is sent to iBGP peers only: bgp.peers[%d] (%s, asn %d) is eBGP (localASN %d)", k, p.Address, p.ASN, b.LocalASN)
			}
			if ad.ASPathPrepend > 0 && p.ASN == b.LocalASN {
				add(ap.Child("asPathPrepend"), "is for eBGP peers only: bgp.peers[%d] (%s) is iBGP", k, p.Address)
			}
			for _, pool := range ad.Pools {
				key := [2]string{pool, p.Address}
				if prev, ok := covered[key]; ok && prev != i {
					add(ap, "pool %q goes to %s by bgp.advertisements[%d] already: one advertisement for each pool and peer", pool, p.Address, prev)
				}
				covered[key] = i
			}
		}
	}
}

// samePeer is whether two peer addresses are the same address.
func samePeer(a, b string) bool {
	x, errA := netip.ParseAddr(a)
	y, errB := netip.ParseAddr(b)
	return errA == nil && errB == nil && x == y
}

// checkSelector checks a label selector of the config.
func checkSelector(add reporter, sp *field.Path, sel *LabelSelector) {
	for k, v := range sel.MatchLabels {
		if msgs := validation.IsQualifiedName(k); len(msgs) > 0 {
			add(sp.Child("matchLabels").Key(k), "%q is not a valid label key", k)
		}
		checkLabelValue(add, sp.Child("matchLabels").Key(k), v)
	}
	for j, e := range sel.MatchExpressions {
		ep := sp.Child("matchExpressions").Index(j)
		if msgs := validation.IsQualifiedName(e.Key); len(msgs) > 0 {
			add(ep.Child("key"), "%q is not a valid label key", e.Key)
		}
		switch e.Operator {
		case "In", "NotIn":
			if len(e.Values) == 0 {
				add(ep.Child("values"), "operator %s needs values", e.Operator)
			}
			for k, v := range e.Values {
				checkLabelValue(add, ep.Child("values").Index(k), v)
			}
		case "Exists", "DoesNotExist":
			if len(e.Values) > 0 {
				add(ep.Child("values"), "operator %s takes no values", e.Operator)
			}
		default:
			add(ep.Child("operator"), "%q is not one of In, NotIn, Exists, DoesNotExist", e.Operator)
		}
	}
}

func checkPathAttributes(add reporter, p *field.Path, a PoolBGP) {
	for j, com := range a.Communities {
		if _, err := ParseCommunity(com); err != nil {
			add(p.Child("communities").Index(j), "%v", err)
		}
	}
	for j, com := range a.LargeCommunities {
		if _, err := ParseLargeCommunity(com); err != nil {
			add(p.Child("largeCommunities").Index(j), "%v", err)
		}
	}
}

// ParseCommunity reads a standard community "ASN:value" (each 0-65535) or
// one of the well-known names no-export, no-advertise, no-export-subconfed,
// blackhole.
func ParseCommunity(s string) (uint32, error) {
	switch strings.ToLower(s) {
	case "no-export":
		return 0xFFFFFF01, nil
	case "no-advertise":
		return 0xFFFFFF02, nil
	case "no-export-subconfed":
		return 0xFFFFFF03, nil
	case "blackhole":
		return 0xFFFF029A, nil
	}
	hi, lo, ok := strings.Cut(s, ":")
	a, err1 := strconv.ParseUint(hi, 10, 16)
	b, err2 := strconv.ParseUint(lo, 10, 16)
	if !ok || err1 != nil || err2 != nil {
		return 0, fmt.Errorf("%q is not a community ASN:value with both parts 0-65535", s)
	}
	return uint32(a)<<16 | uint32(b), nil
}

// LargeCommunity is an RFC 8092 community.
type LargeCommunity struct{ Global, Local1, Local2 uint32 }

// ParseLargeCommunity reads "ASN:value:value", each part 0-4294967295.
func ParseLargeCommunity(s string) (LargeCommunity, error) {
	parts := strings.Split(s, ":")
	if len(parts) == 3 {
		var v [3]uint32
		ok := true
		for i, p := range parts {
			n, err := strconv.ParseUint(p, 10, 32)
			ok = ok && err == nil
			v[i] = uint32(n)
		}
		if ok {
			return LargeCommunity{v[0], v[1], v[2]}, nil
		}
	}
	return LargeCommunity{}, fmt.Errorf("%q is not a large community ASN:value:value", s)
}

func validateHealthCheck(add reporter, p *field.Path, h HealthCheck) {
	if !strings.HasPrefix(h.Path, "/") || strings.ContainsAny(h.Path, " \t\r\n?#") {
		add(p.Child("path"), "%q is not a URL path (it starts with / and has no spaces, ? or #)", h.Path)
	}
	if h.Interval.Duration < 100*time.Millisecond {
		add(p.Child("interval"), "%v is below the least interval, 100ms", h.Interval.Duration)
	}
	if h.Timeout.Duration < 10*time.Millisecond {
		add(p.Child("timeout"), "%v is below the least timeout, 10ms", h.Timeout.Duration)
	} else if h.Timeout.Duration > time.Minute {
		add(p.Child("timeout"), "%v is above the greatest timeout, 1m", h.Timeout.Duration)
	}
	for _, t := range []struct {
		name string
		v    int
	}{{"unhealthyThreshold", h.UnhealthyThreshold}, {"healthyThreshold", h.HealthyThreshold}} {
		if t.v < 1 || t.v > 100 {
			add(p.Child(t.name), "%d is not between 1 and 100", t.v)
		}
	}
}

// validatePoolAnnounce checks a pool's announce and its l2 section.
func validatePoolAnnounce(add reporter, pp *field.Path, pool *Pool, lb *LoadBalancer) {
	switch pool.Announce {
	case "", AnnounceBGP, AnnounceNone, AnnounceL2:
	default:
		add(pp.Child("announce"), "%q is not one of bgp, l2, none", pool.Announce)
		return
	}
	l2 := pp.Child("l2")
	switch pool.Announced(lb) {
	case AnnounceL2:
	case AnnounceBGP:
		if pool.L2 == nil {
			return
		}
		// Answered on the segment too.
	default:
		if pool.L2 != nil {
			add(l2, "is only read with announce: l2, or bgp (answered on layer 2 too); this pool's VIPs are announced by %s", pool.Announced(lb))
		}
		return
	}
	switch {
	case pool.L2 == nil || pool.L2.Interface == "" && len(pool.L2.Interfaces) == 0:
		add(l2.Child("interface"), "is required with announce: l2: the replicas' interface on the segment of the pool's VIPs (or l2.interfaces, several)")
	case pool.L2.Interface != "" && len(pool.L2.Interfaces) > 0:
		add(l2.Child("interfaces"), "is given with l2.interface: give one interface, or the list")
	case pool.L2.Interface != "":
		if !validInterfaceName(pool.L2.Interface) {
			add(l2.Child("interface"), "%q is not a network interface name (1 to 15 characters, no '/', ':' or spaces)", pool.L2.Interface)
		}
	default:
		seen := map[string]bool{}
		for i, name := range pool.L2.Interfaces {
			switch {
			case !validInterfaceName(name):
				add(l2.Child("interfaces").Index(i), "%q is not a network interface name (1 to 15 characters, no '/', ':' or spaces)", name)
			case seen[name]:
				add(l2.Child("interfaces").Index(i), "%q is listed twice", name)
			}
			seen[name] = true
		}
	}
}

// validInterfaceName is the kernel's rule for a link name.
func validInterfaceName(s string) bool {
	return len(s) > 0 && len(s) < 16 && s != "." && s != ".." && !strings.ContainsAny(s, "/: \t\n")
}
