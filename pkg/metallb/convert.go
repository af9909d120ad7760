// Package metallb converts MetalLB's configuration, its custom resources as
// `kubectl get ... -o yaml` prints them, to this project's cloud config.
// Every field it reads is converted, converted with a meaning that changes
// (a Note says how), or refused (a Problem names the resource and the
// field); docs/migration/metallb.md has the table.
package metallb

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"slices"
	"strings"
	"time"

	yaml "go.yaml.in/yaml/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/config"
)

// Finding is what the converter says of one field of one resource.
type Finding struct {
	Object  string // "BGPPeer metallb-system/tor1"
	Field   string // "spec.nodeSelectors"
	Message string
}

func (f Finding) String() string {
	if f.Field == "" {
		return f.Object + ": " + f.Message
	}
	return f.Object + ": " + f.Field + ": " + f.Message
}

// Result is a conversion: the cloud config's loadBalancer and bgp
// sections, what was converted with a changed meaning, and what was
// refused. Config is nil when anything was refused, unless Options.Partial.
type Result struct {
	Config  []byte
	Notes   []Finding
	Refused []Finding
}

// Options are what a MetalLB configuration does not say.
type Options struct {
	// L2Interface is the replicas' interface on the segment of the layer 2
	// pools, for L2Advertisements that name none (MetalLB's speakers then
	// answer on every interface of every node).
	L2Interface string
	// Partial writes what converts even when something is refused: a
	// resource with a refused field is left out whole (a pool is never
	// widened by dropping one of its restrictions), and the refusals say
	// what to do.
	Partial bool
}

type resource struct {
	object
	ref  string
	spec json.RawMessage
}

// Convert reads a dump (a List, or YAML documents of resources) and
// converts it.
func Convert(dump []byte, opts Options) (*Result, error) {
	objs, err := read(dump)
	if err != nil {
		return nil, err
	}
	c := &converter{opts: opts, res: &Result{}}
	c.run(objs)
	if len(c.pools) > 0 {
		c.res.Notes = append(c.res.Notes, Finding{Object: "Services", Field: "metallb.io/allow-shared-ip",
			Message: "every address Services share when the CCM takes over is kept, across namespaces too, as MetalLB shared it; " +
				"a new share across namespaces needs its key in the pool's sharedAcrossNamespaces (within a namespace, the key is enough)"})
	}
	if len(c.res.Refused) > 0 && !opts.Partial {
		return c.res, nil
	}
	out, err := c.render()
	if err != nil {
		return nil, err
	}
	// What is written must be a cloud config the CCM loads.
	// (Password files are on the CCM's host, not here.)
	if _, err := config.ParseWithoutSecrets(out); err != nil {
		return nil, fmt.Errorf("the converted config does not validate (a defect of the converter): %w", err)
	}
	c.res.Config = out
	return c.res, nil
}

// read splits a dump into resources: each YAML document, and the items of
// a List.
func read(dump []byte) ([]resource, error) {
	var out []resource
	dec := yaml.NewDecoder(bytes.NewReader(dump))
	for doc := 0; ; doc++ {
		var node yaml.Node
		if err := dec.Decode(&node); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, fmt.Errorf("document %d: not valid YAML: %w", doc+1, err)
		}
		raw, err := yaml.Marshal(&node)
		if err != nil {
			return nil, err
		}
		js, err := sigsyaml.YAMLToJSON(raw)
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", doc+1, err)
		}
		if string(js) == "null" {
			continue
		}
		var head struct {
			object
			Spec  json.RawMessage   `json:"spec"`
			Items []json.RawMessage `json:"items"`
		}
		if err := json.Unmarshal(js, &head); err != nil {
			return nil, fmt.Errorf("document %d: %w", doc+1, err)
		}
		items := []json.RawMessage{js}
		if head.Kind == "List" || strings.HasSuffix(head.Kind, "List") && head.Items != nil {
			items = head.Items
		}
		for _, it := range items {
			var r struct {
				object
				Spec json.RawMessage `json:"spec"`
			}
			if err := json.Unmarshal(it, &r); err != nil {
				return nil, fmt.Errorf("document %d: %w", doc+1, err)
			}
			ref := r.Kind + " " + r.Metadata.Name
			if r.Metadata.Namespace != "" {
				ref = r.Kind + " " + r.Metadata.Namespace + "/" + r.Metadata.Name
			}
			out = append(out, resource{object: r.object, ref: ref, spec: r.Spec})
		}
	}
	return out, nil
}

type converter struct {
	opts Options
	res  *Result

	pools       []*pool
	communities map[string]string // alias → value
	bfd         map[string]bfdProfileSpec
	peers       []peerOut
	peerNames   []string
	peerAddrs   map[string]string // peer name → the address it converts to
	ads         []adOut           // BGPAdvertisements as bgp.advertisements
	nodeLabels  []string          // Node label keys peers' selectors read
	asn         uint32
	asnFrom     string
	// dropped are the resources (by ref) a refusal leaves out of a
	// partial conversion.
	dropped map[string]bool
	// perPeer: the advertisements are written as bgp.advertisements.
	perPeer bool
	// FRR-K8s neighbours converted (frrk8s.go), and their peers' names.
	frrPeers     []frrPeer
	frrPeerNames []string
}

// adOut is a BGPAdvertisement as it converts, its peers by MetalLB name.
type adOut struct {
	ref       string
	resource  resource
	pools     []string
	peerNames []string
	attrs     *poolBGPOut
	prepend   int
}

type pool struct {
	name     string
	ref      string
	labels   map[string]string
	priority int
	// pinned: its serviceAllocation selects Services (by namespace or
	// label), which MetalLB tries before the pools without one.
	pinned bool
	out    poolOut
	// the advertisements that announce it, by kind
	bgpBy, l2By string
	bgp         *poolBGPOut
}

func (c *converter) refuse(r resource, field, format string, args ...any) {
	c.res.Refused = append(c.res.Refused, Finding{Object: r.ref, Field: field, Message: fmt.Sprintf(format, args...)})
	c.dropped[r.ref] = true
}

func (c *converter) note(r resource, field, format string, args ...any) {
	c.res.Notes = append(c.res.Notes, Finding{Object: r.ref, Field: field, Message: fmt.Sprintf(format, args...)})
}

// spec decodes r's spec into v, refusing a field it does not know.
func (c *converter) spec(r resource, v any) bool {
	if len(r.spec) == 0 {
		return true
	}
	dec := json.NewDecoder(bytes.NewReader(r.spec))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		c.refuse(r, "spec", "%s (this converter knows MetalLB v0.16's fields)", strings.TrimPrefix(err.Error(), "json: "))
		return false
	}
	return true
}

func (c *converter) run(objs []resource) {
	c.communities, c.bfd = map[string]string{}, map[string]bfdProfileSpec{}
	c.peerAddrs, c.dropped = map[string]string{}, map[string]bool{}
	var bgpAds, l2Ads, peers, frr []resource
	for _, r := range objs {
		if r.Kind != "" && !strings.HasPrefix(r.APIVersion, "metallb.io/") && !strings.HasPrefix(r.APIVersion, "frrk8s.metallb.io/") {
			c.note(r, "apiVersion", "%q is neither MetalLB's (metallb.io) nor FRR-K8s's (frrk8s.metallb.io): ignored", r.APIVersion)
			continue
		}
		switch r.Kind {
		case "IPAddressPool":
			c.pool(r)
		case "Community":
			var s communitySpec
			if c.spec(r, &s) {
				for _, a := range s.Communities {
					c.communities[a.Name] = a.Value
				}
			}
		case "BFDProfile":
			var s bfdProfileSpec
			if c.spec(r, &s) {
				c.bfd[r.Metadata.Name] = s
			}
		case "BGPAdvertisement":
			bgpAds = append(bgpAds, r)
		case "L2Advertisement":
			l2Ads = append(l2Ads, r)
		case "BGPPeer":
			peers = append(peers, r)
			c.peerNames = append(c.peerNames, r.Metadata.Name)
		case "FRRConfiguration":
			frr = append(frr, r)
		case "ServiceBGPStatus", "ServiceL2Status", "ConfigurationState", "FRRNodeState", "BGPSessionState":
			// MetalLB's own status, nothing to convert.
		default:
			c.refuse(r, "kind", "%q is not a MetalLB resource this converter knows", r.Kind)
		}
	}
	// Pools in MetalLB's order of choice (its allocator's
	// pinnedPoolsForService, then the rest): first the pools whose
	// serviceAllocation selects Services, the lowest priority first and
	// those without one after; then the pools without a serviceAllocation.
	// Ties, which MetalLB leaves to a map's order, go by name. The CCM
	// takes the first pool in file order that a Service may use, and skips
	// those that do not select it, so it chooses as MetalLB does.
	slices.SortStableFunc(c.pools, func(a, b *pool) int {
		if a.pinned != b.pinned {
			if a.pinned {
				return -1
			}
			return 1
		}
		pa, pb := a.priority, b.priority
		if (pa == 0) != (pb == 0) {
			if pa == 0 {
				return 1
			}
			return -1
		}
		if pa != pb {
			return pa - pb
		}
		return strings.Compare(a.name, b.name)
	})
	for _, r := range bgpAds {
		c.bgpAdvertisement(r)
	}
	for _, r := range l2Ads {
		c.l2Advertisement(r)
	}
	for _, r := range peers {
		c.peer(r)
	}
	// After the BGPPeers, whose addresses a neighbour may repeat.
	for _, r := range frr {
		c.frrConfiguration(r)
	}
	c.placeFRRPeers()
	c.placeAds()
	if len(peers) == 0 {
		for _, r := range bgpAds {
			c.refuse(r, "", "announces pools over BGP, and the dump has no BGPPeer: dump the peers too (kubectl get bgppeers)")
		}
	}
	for _, p := range c.pools {
		switch {
		case p.bgpBy != "" && p.l2By != "":
			// announce: bgp with an l2 section: routers learn the VIPs
			// over BGP, hosts on the segment are answered.
			p.out.Announce = "bgp"
			if p.bgp != nil {
				p.out.BGP = p.bgp
			}
			c.res.Notes = append(c.res.Notes, Finding{Object: p.ref, Message: fmt.Sprintf(
				"announced both over BGP (%s) and on layer 2 (%s): announce: bgp with an l2 section, so the routers learn its VIPs over BGP and hosts on the segment are answered by the replicas", p.bgpBy, p.l2By)})
		case p.bgpBy != "":
			p.out.Announce = "bgp"
			if p.bgp != nil {
				p.out.BGP = p.bgp
			}
		case p.l2By != "":
			p.out.Announce = "l2"
		default:
			p.out.Announce = "none"
			c.res.Notes = append(c.res.Notes, Finding{Object: p.ref, Message: "no advertisement announces it: converted with announce: none (addresses are assigned, not announced), as MetalLB did"})
		}
	}
}

func (c *converter) pool(r resource) {
	var s ipAddressPoolSpec
	if !c.spec(r, &s) {
		return
	}
	p := &pool{name: r.Metadata.Name, ref: r.ref, labels: r.Metadata.Labels}
	if slices.ContainsFunc(c.pools, func(o *pool) bool { return o.name == p.name }) {
		c.refuse(r, "metadata.name", "a second IPAddressPool %q (of another namespace?): pool names are one space here", p.name)
		return
	}
	if msgs := validation.IsDNS1123Label(p.name); len(msgs) > 0 {
		c.refuse(r, "metadata.name", "%q is not a pool name here (a DNS-1123 label: %s); rename the pool in MetalLB, and the address-pool annotations naming it, before converting", p.name, strings.Join(msgs, "; "))
	}
	p.out = poolOut{Name: p.name, AutoAssign: s.AutoAssign, AvoidBuggyIPs: s.AvoidBuggyIPs}
	for i, a := range s.Addresses {
		if _, err := config.ParseAddressRange(a); err != nil {
			c.refuse(r, fmt.Sprintf("spec.addresses[%d]", i), "%v", err)
		}
		p.out.Addresses = append(p.out.Addresses, a)
	}
	if sa := s.ServiceAllocation; sa != nil {
		p.priority = sa.Priority
		p.pinned = len(sa.Namespaces) > 0 || len(sa.NamespaceSelectors) > 0 || len(sa.ServiceSelectors) > 0
		if !p.pinned && (p.out.AutoAssign == nil || *p.out.AutoAssign) {
			// MetalLB gives automatically only pools without a
			// serviceAllocation, or with one that selects the Service.
			f := false
			p.out.AutoAssign = &f
			c.note(r, "spec.serviceAllocation", "selects no Service (a priority alone): MetalLB never gives this pool automatically, so here it is autoAssign: false (a Service names it to get an address of it)")
		}
		p.out.Namespaces = sa.Namespaces
		switch len(sa.NamespaceSelectors) {
		case 0:
		case 1:
			p.out.NamespaceSelector = selectorOut(sa.NamespaceSelectors[0])
		default:
			c.refuse(r, "spec.serviceAllocation.namespaceSelectors", "%d selectors (any of which matches); pools[].namespaceSelector is one: merge them into one (matchExpressions with In) before converting", len(sa.NamespaceSelectors))
		}
		switch len(sa.ServiceSelectors) {
		case 0:
		case 1:
			p.out.ServiceSelector = selectorOut(sa.ServiceSelectors[0])
		default:
			c.refuse(r, "spec.serviceAllocation.serviceSelectors", "%d selectors (any of which matches); pools[].serviceSelector is one", len(sa.ServiceSelectors))
		}
	}
	c.pools = append(c.pools, p)
}

// advertised are the pools an advertisement selects: by name, by label, or
// every pool when it names none.
func (c *converter) advertised(r resource, names []string, selectors []metav1.LabelSelector) []*pool {
	if len(names) == 0 && len(selectors) == 0 {
		return c.pools
	}
	var out []*pool
	for _, n := range names {
		i := slices.IndexFunc(c.pools, func(p *pool) bool { return p.name == n })
		if i < 0 {
			c.refuse(r, "spec.ipAddressPools", "no IPAddressPool %q in the dump", n)
			continue
		}
		out = append(out, c.pools[i])
	}
	for i, s := range selectors {
		sel, err := metav1.LabelSelectorAsSelector(&s)
		if err != nil {
			c.refuse(r, fmt.Sprintf("spec.ipAddressPoolSelectors[%d]", i), "%v", err)
			continue
		}
		for _, p := range c.pools {
			if sel.Matches(labels.Set(p.labels)) && !slices.Contains(out, p) {
				out = append(out, p)
			}
		}
	}
	return out
}

func (c *converter) bgpAdvertisement(r resource) {
	var s bgpAdvertisementSpec
	if !c.spec(r, &s) {
		return
	}
	if s.AggregationLength != nil && *s.AggregationLength != 32 {
		c.refuse(r, "spec.aggregationLength", "%d: VIPs are announced as /32 only, each with the nodes that serve it as next hops (an aggregate has one next hop and no health; docs/network/routers.md says why)", *s.AggregationLength)
	}
	if s.AggregationLengthV6 != nil && *s.AggregationLengthV6 != 128 {
		c.refuse(r, "spec.aggregationLengthV6", "%d: VIPs are announced as /128 only, each with the nodes that serve it as next hops (an aggregate has one next hop and no health; docs/network/routers.md says why)", *s.AggregationLengthV6)
	}
	if int(s.AsPathPrepend) > config.MaxASPathPrepend {
		c.refuse(r, "spec.asPathPrepend", "%d: at most %d here (bgp.advertisements[].asPathPrepend)", s.AsPathPrepend, config.MaxASPathPrepend)
	}
	if len(s.NodeSelectors) > 0 {
		c.refuse(r, "spec.nodeSelectors", "not supported on an advertisement: a router is sent the nodes of its peers[].nodeSelector (per-rack peers, docs/network/topologies.md); select the nodes on the BGPPeers instead")
	}
	if len(s.ServiceSelectors) > 0 {
		c.refuse(r, "spec.serviceSelectors", "not supported: every VIP of a pool is announced alike; split the Services into pools")
	}
	for _, n := range s.Peers {
		if !slices.Contains(c.peerNames, n) {
			c.refuse(r, "spec.peers", "no BGPPeer %q in the dump", n)
		}
	}
	ad := adOut{ref: r.ref, attrs: &poolBGPOut{}, prepend: int(s.AsPathPrepend), resource: r}
	if s.LocalPref != 0 {
		lp := s.LocalPref
		ad.attrs.LocalPreference = &lp
	}
	for i, v := range s.Communities {
		if alias, ok := c.communities[v]; ok {
			v = alias
		}
		switch {
		case strings.HasPrefix(v, "large:"):
			ad.attrs.LargeCommunities = append(ad.attrs.LargeCommunities, strings.TrimPrefix(v, "large:"))
		case strings.Count(v, ":") == 1:
			ad.attrs.Communities = append(ad.attrs.Communities, v)
		default:
			c.refuse(r, fmt.Sprintf("spec.communities[%d]", i), "%q is neither a community (AA:NN), a large one (large:AA:NN:MM) nor a Community alias in the dump", s.Communities[i])
		}
	}
	// Naming every peer is naming none.
	if !slices.ContainsFunc(c.peerNames, func(n string) bool { return !slices.Contains(s.Peers, n) }) {
		s.Peers = nil
	}
	ad.peerNames = s.Peers
	pools := c.advertised(r, s.IPAddressPools, s.IPAddressPoolSelectors)
	if c.dropped[r.ref] {
		return
	}
	for _, p := range pools {
		ad.pools = append(ad.pools, p.name)
	}
	c.ads = append(c.ads, ad)
}

// placeAds puts the BGPAdvertisements in the config: as each pool's bgp
// attributes while every one goes to every peer without prepending, else
// as bgp.advertisements, where a pool goes to the peers its
// advertisements name.
func (c *converter) placeAds() {
	perPeer := slices.ContainsFunc(c.ads, func(a adOut) bool { return len(a.peerNames) > 0 || a.prepend > 0 })
	c.perPeer = perPeer
	// One set of attributes per pool and peer: the router would take the
	// last path of the two a session sent.
	seen := map[[2]string]adOut{}
	for _, ad := range c.ads {
		peers := ad.peerNames
		if len(peers) == 0 {
			peers = c.peerNames
		}
		clash := false
		for _, pool := range ad.pools {
			for _, peer := range peers {
				k := [2]string{pool, peer}
				if o, ok := seen[k]; ok && (!o.attrs.equal(ad.attrs) || o.prepend != ad.prepend) {
					c.refuse(ad.resource, "spec", "gives pool %q other attributes than %s does for peer %s; a pool's VIPs are announced to a router with one set", pool, o.ref, peer)
					clash = true
				}
				if _, ok := seen[k]; !ok {
					seen[k] = ad
				}
			}
		}
		if clash {
			continue
		}
		for _, name := range ad.pools {
			for _, p := range c.pools {
				if p.name != name {
					continue
				}
				if p.bgpBy == "" {
					p.bgpBy = ad.ref
				}
				if !perPeer && p.bgp == nil && !ad.attrs.empty() {
					p.bgp = ad.attrs
				}
			}
		}
	}
}

func (c *converter) l2Advertisement(r resource) {
	var s l2AdvertisementSpec
	if !c.spec(r, &s) {
		return
	}
	if len(s.NodeSelectors) > 0 {
		c.refuse(r, "spec.nodeSelectors", "not supported: a layer 2 VIP is answered for by the replicas, and sent to any healthy eligible node")
	}
	if len(s.ServiceSelectors) > 0 {
		c.refuse(r, "spec.serviceSelectors", "not supported: every VIP of a pool is announced alike; split the Services into pools")
	}
	if len(s.PreferredNodeSelectors) > 0 {
		c.refuse(r, "spec.preferredNodeSelectors", "not supported: the node a layer 2 VIP is sent to is chosen by rendezvous hashing among healthy eligible nodes")
	}
	ifaces := []string{c.opts.L2Interface}
	switch len(s.Interfaces) {
	case 0:
		if c.opts.L2Interface == "" {
			c.refuse(r, "spec.interfaces", "names no interface: give the replicas' interface on the pools' segment with --l2-interface")
		}
	default:
		ifaces = s.Interfaces
		c.note(r, "spec.interfaces", "%q are now interfaces of the control-plane hosts (where the replicas answer ARP and NDP), not of the nodes; each VIP is answered on those whose subnets hold it", s.Interfaces)
	}
	pools := c.advertised(r, s.IPAddressPools, s.IPAddressPoolSelectors)
	if c.dropped[r.ref] {
		return
	}
	out := &poolL2Out{Interface: ifaces[0]}
	if len(ifaces) > 1 {
		out = &poolL2Out{Interfaces: ifaces}
	}
	for _, p := range pools {
		if p.l2By != "" && p.out.L2 != nil && !slices.Equal(p.out.L2.names(), ifaces) {
			c.refuse(r, "spec.interfaces", "gives pool %q other interfaces than %s does", p.name, p.l2By)
			continue
		}
		if p.l2By == "" {
			p.l2By = r.ref
			p.out.L2 = out
		}
	}
}

func (c *converter) peer(r resource) {
	var s bgpPeerSpec
	if !c.spec(r, &s) {
		return
	}
	out, ok := c.peerOf(r, s, func(f string) string { return "spec." + f })
	if !ok {
		return
	}
	c.peerAddrs[r.Metadata.Name] = out.Address
	c.peers = append(c.peers, out)
}

// peerOf converts a BGPPeer's spec, or an FRR-K8s neighbour as one; at
// names a BGPPeer field as the resource spells it.
func (c *converter) peerOf(r resource, s bgpPeerSpec, at func(string) string) (peerOut, bool) {
	if c.asn == 0 {
		c.asn, c.asnFrom = s.MyASN, r.ref
	} else if s.MyASN != c.asn {
		c.refuse(r, at("myASN"), "%d, where %s has %d: the replicas speak one AS (bgp.localASN)", s.MyASN, c.asnFrom, c.asn)
	}
	if s.LocalASN != 0 && s.LocalASN != s.MyASN {
		c.refuse(r, at("localASN"), "%d: one local AS for every peer (bgp.localASN)", s.LocalASN)
	}
	out := peerOut{ASN: s.PeerASN, Password: s.Password}
	if s.Password != "" {
		c.note(r, at("password"), "written inline as peers[].password, readable by whoever reads the cloud config's ConfigMap: put it in a Secret, mount it into the CCM's Pod and name the file in peers[].passwordFile instead")
	}
	if s.DynamicASN != "" {
		c.refuse(r, at("dynamicASN"), "%q: give the peer's AS number (peerASN)", s.DynamicASN)
	}
	if s.Interface != "" {
		c.refuse(r, at("interface"), "unnumbered peering (%q) is not supported: give the router's address", s.Interface)
	}
	if a, err := netip.ParseAddr(s.PeerAddress); err == nil {
		out.Address = a.String()
		if s.DualStackAddressFamily {
			out.AddressFamilies = []string{config.FamilyIPv4, config.FamilyIPv6}
		} else if a.Unmap().Is4() {
			out.AddressFamilies = []string{config.FamilyIPv4}
		} else {
			out.AddressFamilies = []string{config.FamilyIPv6}
		}
	} else if s.Interface == "" {
		c.refuse(r, at("peerAddress"), "%q is not an IP address", s.PeerAddress)
	}
	if s.PeerPort != 0 && s.PeerPort != 179 {
		out.Port = s.PeerPort
	}
	if s.SourceAddress != "" {
		c.refuse(r, at("sourceAddress"), "%q is one node's address; the replicas dial from their own hosts (peers[].sourceAddress only where one address exists on every such host)", s.SourceAddress)
	}
	out.HoldTime, out.KeepaliveTime, out.ConnectRetryTime = duration(s.HoldTime), duration(s.KeepaliveTime), duration(s.ConnectTime)
	if s.RouterID != "" {
		c.note(r, at("routerID"), "%q left out: each replica has its own router ID (its address), as the router expects of different neighbours", s.RouterID)
	}
	switch len(s.NodeSelectors) {
	case 0:
	case 1:
		// MetalLB peers from the selected nodes, each sending itself as
		// next hop: the router sees those nodes. Here the replicas peer
		// and send the selected nodes: the router sees the same.
		sel := selectorOut(s.NodeSelectors[0])
		out.NodeSelector = sel
		for _, k := range selectorKeys(s.NodeSelectors[0]) {
			if !strings.HasPrefix(k, config.NodeRestrictionPrefix) && !slices.Contains(c.nodeLabels, k) {
				c.nodeLabels = append(c.nodeLabels, k)
				c.note(r, at("nodeSelectors"), "the Node label %q is read from the Nodes (inventory.nodeLabels): a node's kubelet may set its own Node's labels unless an admission policy keeps it from %q; a key under %s is safe from it (docs/network/topologies.md)", k, k, config.NodeRestrictionPrefix)
			}
		}
		c.note(r, at("nodeSelectors"), "the replicas peer with this router and send it the selected nodes as next hops (peers[].nodeSelector), where MetalLB's speakers on those nodes peered: the router sees the same next hops")
	default:
		c.refuse(r, at("nodeSelectors"), "%d selectors (any of which selects a node); peers[].nodeSelector is one: merge them into one (matchExpressions with In) before converting", len(s.NodeSelectors))
	}
	if s.PasswordSecret != nil && s.PasswordSecret.Name != "" {
		ns := s.PasswordSecret.Namespace
		if ns == "" {
			ns = r.Metadata.Namespace
		}
		key := s.PasswordSecret.Name
		out.PasswordFile = passwordMount + "/" + key
		c.note(r, at("passwordSecret"), "read from the file %s: put key password of Secret %s/%s into the Secret the chart mounts there (bgpPasswords.secretName) under key %s, e.g. kubectl -n kube-system create secret generic baremetal-bgp-passwords --from-literal=%s=\"$(kubectl -n %s get secret %s -o jsonpath='{.data.password}' | base64 -d)\" (with every peer's key in one command)",
			out.PasswordFile, ns, s.PasswordSecret.Name, key, key, ns, s.PasswordSecret.Name)
	}
	if s.EBGPMultiHop {
		out.EBGPMultihop = 255
	}
	if s.BFDProfile != "" {
		b, ok := c.bfd[s.BFDProfile]
		if !ok {
			c.refuse(r, at("bfdProfile"), "no BFDProfile %q in the dump", s.BFDProfile)
		} else {
			out.BFD = c.bfdOut(r, at("bfdProfile"), s.BFDProfile, b, s.EBGPMultiHop)
		}
	}
	if !s.EnableGracefulRestart {
		c.note(r, at("enableGracefulRestart"), "graceful restart (RFC 4724) is on here: the router keeps the VIPs while a replica restarts; its recipe enables it (docs/network/routers.md)")
	}
	if s.VRF != "" {
		c.refuse(r, at("vrf"), "%q: sessions in a VRF are not supported", s.VRF)
	}
	if s.DisableMP {
		c.note(r, at("disableMP"), "one session per peer address carries the families of addressFamilies")
	}
	return out, !c.dropped[r.ref]
}

// bfdOut is a BFD profile as a peer's bfd; a multihop peer's (RFC 5883)
// takes the profile's minimumTtl, or MetalLB's default, 254.
func (c *converter) bfdOut(r resource, at, name string, b bfdProfileSpec, multihop bool) *bfdOut {
	field := "BFDProfile " + name
	if b.EchoMode != nil && *b.EchoMode {
		c.refuse(r, at, "%s: echoMode is not supported", field)
	}
	if b.PassiveMode != nil && *b.PassiveMode {
		c.refuse(r, at, "%s: passiveMode is not supported (the replicas send)", field)
	}
	if b.MinimumTTL != nil && *b.MinimumTTL != 254 && !multihop {
		c.note(r, at, "%s: minimumTtl %d applies to multihop sessions only, as in MetalLB; this single-hop one takes only TTL 255", field, *b.MinimumTTL)
	}
	ms := func(v *uint32) string {
		if v == nil {
			return ""
		}
		return (time.Duration(*v) * time.Millisecond).String()
	}
	out := &bfdOut{TransmitInterval: ms(b.TransmitInterval), ReceiveInterval: ms(b.ReceiveInterval)}
	if multihop {
		out.MinimumTTL = 254
		if b.MinimumTTL != nil {
			out.MinimumTTL = int(*b.MinimumTTL)
		}
	}
	if b.DetectMultiplier != nil {
		out.DetectMultiplier = int(*b.DetectMultiplier)
	}
	return out
}

func duration(d *metav1.Duration) string {
	if d == nil {
		return ""
	}
	return d.Duration.String()
}

func selectorOut(s metav1.LabelSelector) *selectorYAML {
	out := &selectorYAML{MatchLabels: s.MatchLabels}
	for _, e := range s.MatchExpressions {
		out.MatchExpressions = append(out.MatchExpressions, requirementYAML{Key: e.Key, Operator: string(e.Operator), Values: e.Values})
	}
	return out
}

// renderAds is the advertisements, each naming the pools and peers that
// were converted. One whose peers were all left out (partial) is left out:
// naming none would send its pools to every peer. MetalLB sends localPref
// to iBGP peers only, so an advertisement to eBGP peers too is split.
func (c *converter) renderAds(pools map[string]bool) []advertisementOut {
	asnOf := map[string]uint32{}
	for _, p := range c.peers {
		asnOf[p.Address] = p.ASN
	}
	var out []advertisementOut
	for _, ad := range c.ads {
		if c.dropped[ad.ref] {
			continue
		}
		a := advertisementOut{Communities: ad.attrs.Communities, LargeCommunities: ad.attrs.LargeCommunities, LocalPreference: ad.attrs.LocalPreference, ASPathPrepend: ad.prepend}
		for _, p := range ad.pools {
			if pools[p] {
				a.Pools = append(a.Pools, p)
			}
		}
		names := ad.peerNames
		// MetalLB's advertisements go to its BGPPeers, never to the
		// neighbours of a site's own FRRConfigurations.
		if len(names) == 0 && (ad.attrs.LocalPreference != nil || ad.prepend > 0 || len(c.frrPeerNames) > 0) {
			names = c.peerNames
		}
		var ibgp, ebgp []string
		for _, n := range names {
			if addr, ok := c.peerAddrs[n]; ok {
				if asnOf[addr] == c.asn {
					ibgp = append(ibgp, addr)
				} else {
					ebgp = append(ebgp, addr)
				}
			}
		}
		if len(a.Pools) == 0 || len(names) > 0 && len(ibgp)+len(ebgp) == 0 {
			continue
		}
		if len(names) == 0 {
			out = append(out, a)
			continue
		}
		// localPreference to iBGP peers, asPathPrepend to eBGP ones.
		if len(ibgp) > 0 {
			i := a
			i.Peers, i.ASPathPrepend = ibgp, 0
			out = append(out, i)
		}
		if len(ebgp) > 0 {
			e := a
			e.Peers, e.LocalPreference = ebgp, nil
			out = append(out, e)
		}
	}
	return out
}

// passwordMount is where the chart mounts its Secret of BGP passwords
// (bgpPasswords.mountPath's default).
const passwordMount = "/etc/baremetal-bgp"

func selectorKeys(s metav1.LabelSelector) []string {
	var keys []string
	for k := range s.MatchLabels {
		keys = append(keys, k)
	}
	for _, e := range s.MatchExpressions {
		keys = append(keys, e.Key)
	}
	slices.Sort(keys)
	return slices.Compact(keys)
}

func (c *converter) render() ([]byte, error) {
	doc := configOut{}
	kept := map[string]bool{}
	for _, p := range c.pools {
		if c.dropped[p.ref] {
			continue
		}
		kept[p.name] = true
		doc.LoadBalancer.Pools = append(doc.LoadBalancer.Pools, p.out)
	}
	if len(c.peers) > 0 {
		doc.BGP = &bgpOut{LocalASN: c.asn, Peers: c.peers}
		if c.perPeer {
			doc.BGP.Advertisements = c.renderAds(kept)
		}
	}
	if len(c.nodeLabels) > 0 {
		doc.Inventory = &inventoryOut{NodeLabels: c.nodeLabels}
	}
	var buf bytes.Buffer
	buf.WriteString("# The loadBalancer and bgp sections converted from MetalLB's resources\n" +
		"# (baremetal-cloud-controller-manager convert-metallb); add the inventory.\n")
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(doc); err != nil {
		return nil, err
	}
	return buf.Bytes(), enc.Close()
}
