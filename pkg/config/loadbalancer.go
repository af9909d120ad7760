package config

import (
	"fmt"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Announce says how VIPs reach the network.
type Announce string

const (
	// AnnounceBGP announces every VIP over BGP, from every replica.
	AnnounceBGP Announce = "bgp"
	// AnnounceNone only allocates addresses; something else announces them.
	AnnounceNone Announce = "none"
	// AnnounceL2 answers ARP and NDP for a pool's VIPs on a segment the
	// replicas share with the nodes and the clients (per pool only); every
	// replica answers, naming the same node.
	AnnounceL2 Announce = "l2"
)

// LoadBalancer configures the addresses of LoadBalancer Services.
type LoadBalancer struct {
	Announce    Announce    `yaml:"announce"`
	Pools       []Pool      `yaml:"pools"`
	HealthCheck HealthCheck `yaml:"healthCheck"`
}

// HealthCheck probes kube-proxy's /healthz on every node that may carry a
// VIP, as a cloud load balancer does; a failing node is no next hop.
type HealthCheck struct {
	// Enabled is true unless set to false.
	Enabled  *bool    `yaml:"enabled"`
	Port     uint16   `yaml:"port"`
	Path     string   `yaml:"path"`
	Interval Duration `yaml:"interval"`
	Timeout  Duration `yaml:"timeout"`
	// UnhealthyThreshold consecutive failures take a node out;
	// HealthyThreshold consecutive successes bring it back.
	UnhealthyThreshold int `yaml:"unhealthyThreshold"`
	HealthyThreshold   int `yaml:"healthyThreshold"`
}

// On reports whether nodes are health-checked (the default).
func (h HealthCheck) On() bool { return h.Enabled == nil || *h.Enabled }

// Pool is a set of addresses Services may get.
type Pool struct {
	Name string `yaml:"name"`
	// Addresses are CIDRs ("192.0.2.0/28") and ranges ("192.0.2.10-192.0.2.20").
	Addresses []string `yaml:"addresses"`
	// AutoAssign lets Services that name no pool get addresses from this one.
	AutoAssign *bool `yaml:"autoAssign"`
	// AvoidBuggyIPs skips addresses ending in .0 and .255.
	AvoidBuggyIPs bool `yaml:"avoidBuggyIPs"`
	// Namespaces, if set, are the only namespaces whose Services may use it.
	Namespaces []string `yaml:"namespaces"`
	// NamespaceSelector, if set, must match the labels of a Service's
	// Namespace (with namespaces, both must allow it).
	NamespaceSelector *LabelSelector `yaml:"namespaceSelector"`
	// ServiceSelector, if set, must match a Service's labels.
	ServiceSelector *LabelSelector `yaml:"serviceSelector"`
	// SharedAcrossNamespaces are the sharing keys under which Services of
	// different namespaces may share an address of this pool. Without one,
	// a key shares only within its namespace: another tenant using the same
	// key gets an address of its own.
	SharedAcrossNamespaces []string `yaml:"sharedAcrossNamespaces"`
	// Announce, if set, overrides loadBalancer.announce for this pool.
	Announce Announce `yaml:"announce"`
	BGP      PoolBGP  `yaml:"bgp"`
	L2       *PoolL2  `yaml:"l2"`
}

// Auto reports whether the pool serves Services that name no pool.
func (p *Pool) Auto() bool { return p.AutoAssign == nil || *p.AutoAssign }

// Announced is how the pool's VIPs reach the network: its own announce,
// else the load balancer's.
func (p *Pool) Announced(lb *LoadBalancer) Announce {
	if p.Announce != "" {
		return p.Announce
	}
	return lb.Announce
}

// PoolL2 says where the replicas answer for an announce: l2 pool's VIPs;
// on an announce: bgp pool, where they answer for them too, so that hosts
// on the segment reach a VIP the routers learn over BGP (MetalLB's pool
// with both advertisements).
type PoolL2 struct {
	// Interface is the replicas' network interface on the segment the VIPs
	// are in; they answer ARP and Neighbor Solicitations there.
	Interface string `yaml:"interface"`
	// Interfaces, instead of interface, are several: a VIP is answered on
	// each whose subnets hold it (a pool over two VLANs, say).
	Interfaces []string `yaml:"interfaces"`
}

// Names are the interfaces the pool's VIPs are answered on, in the
// config's order; none for a pool without l2.
func (l *PoolL2) Names() []string {
	if l == nil {
		return nil
	}
	if l.Interface != "" {
		return []string{l.Interface}
	}
	return l.Interfaces
}

// AnnouncesBGP reports whether any VIP may be announced over BGP: a pool
// that does, or no pools yet with BGP the default.
func (lb *LoadBalancer) AnnouncesBGP() bool {
	if len(lb.Pools) == 0 {
		return lb.Announce == AnnounceBGP
	}
	for i := range lb.Pools {
		if lb.Pools[i].Announced(lb) == AnnounceBGP {
			return true
		}
	}
	return false
}

// LabelSelector is a Kubernetes label selector.
type LabelSelector struct {
	MatchLabels      map[string]string     `yaml:"matchLabels"`
	MatchExpressions []SelectorRequirement `yaml:"matchExpressions"`
}

// SelectorRequirement is one match expression of a label selector.
type SelectorRequirement struct {
	Key      string   `yaml:"key"`
	Operator string   `yaml:"operator"`
	Values   []string `yaml:"values"`
}

// PoolBGP are the attributes of the paths announced for a pool's VIPs.
type PoolBGP struct {
	Communities      []string `yaml:"communities"`
	LargeCommunities []string `yaml:"largeCommunities"`
	LocalPreference  *uint32  `yaml:"localPreference"`
}

// Routes configures the pod-CIDR routes the route controller asks for.
type Routes struct {
	// NextHopAddressType is the Node address a pod CIDR is routed to:
	// InternalIP (default) or ExternalIP, of the CIDR's family.
	NextHopAddressType AddressType `yaml:"nextHopAddressType"`
	BGP                PoolBGP     `yaml:"bgp"`
}

// BGP configures the in-process BGP speaker.
type BGP struct {
	LocalASN uint32 `yaml:"localASN"`
	// RouterID, if empty, is each replica's own address (POD_IP, else its
	// address towards the first peer), so that
	// replicas on several nodes have router IDs of their own.
	RouterID string `yaml:"routerID"`
	// ListenPort, if set, accepts sessions from peers; 0 (the default)
	// only dials out.
	ListenPort uint16 `yaml:"listenPort"`
	// ListenAddresses limit where ListenPort is opened.
	ListenAddresses []string `yaml:"listenAddresses"`
	Peers           []Peer   `yaml:"peers"`
	// Advertisements announce pools to some of the peers, with attributes
	// of their own (MetalLB's BGPAdvertisement). A pool no advertisement
	// names is announced to every peer with its own attributes.
	Advertisements []Advertisement `yaml:"advertisements"`
}

// Advertisement announces pools to some of the peers, with attributes of
// its own besides the pools'. A pool that an advertisement names is
// announced only as its advertisements say: to their peers, with their
// attributes.
type Advertisement struct {
	// Pools are the names of the pools it announces.
	Pools []string `yaml:"pools"`
	// Peers are the addresses of the peers it announces them to; empty,
	// every peer.
	Peers []string `yaml:"peers"`
	// Communities and LargeCommunities are sent besides the pools' own.
	Communities      []string `yaml:"communities"`
	LargeCommunities []string `yaml:"largeCommunities"`
	// LocalPreference replaces the pool's; iBGP peers only.
	LocalPreference *uint32 `yaml:"localPreference"`
	// MED is the multi-exit discriminator sent with the paths.
	MED *uint32 `yaml:"med"`
	// ASPathPrepend is how many more times the local AS leads the AS path,
	// 1 to 10; eBGP peers only.
	ASPathPrepend int `yaml:"asPathPrepend"`
}

// MaxASPathPrepend is the most an advertisement may prepend.
const MaxASPathPrepend = 10

// Peer is one BGP neighbour, a router of the site.
type Peer struct {
	Address string `yaml:"address"`
	ASN     uint32 `yaml:"asn"`
	Port    uint16 `yaml:"port"`
	// Password (TCP MD5), given here or read from PasswordFile.
	Password     string `yaml:"password"`
	PasswordFile string `yaml:"passwordFile"`
	// SourceAddress is the local address the session is dialled from.
	SourceAddress    string          `yaml:"sourceAddress"`
	HoldTime         Duration        `yaml:"holdTime"`
	KeepaliveTime    Duration        `yaml:"keepaliveTime"`
	ConnectRetryTime Duration        `yaml:"connectRetryTime"`
	EBGPMultihop     uint8           `yaml:"ebgpMultihop"`
	AddressFamilies  []string        `yaml:"addressFamilies"`
	GracefulRestart  GracefulRestart `yaml:"gracefulRestart"`
	// MaximumPaths is the most paths of one prefix the router installs
	// (its ECMP width, FRR's maximum-paths): each VIP is sent that many of
	// its nodes, chosen by rendezvous hashing, so that different VIPs use
	// different nodes. Left out: 255, every eligible node (DefaultMaximumPaths).
	MaximumPaths int `yaml:"maximumPaths"`
	// MaximumLoad, if set (1 to 2), bounds the paths any node carries to
	// that multiple of the mean over the router's nodes (rounded up): VIPs
	// choose their maximumPaths nodes by rendezvous hashing in address
	// order, passing over nodes at the bound. 1 spreads the paths evenly
	// (every node within one path of the mean); above 1 only the busiest
	// nodes are bounded. Unset, each VIP chooses on its own, and the
	// busiest node carries about twice the least busy's share; a node's
	// death then moves only its own paths. Bounded, a node's death or a
	// new VIP also moves some other VIPs' paths (see docs/concepts.md).
	MaximumLoad float64 `yaml:"maximumLoad"`
	// NodeSelector, if set, limits the next hops the router is sent to the
	// nodes whose machines' inventory labels match (with their zone and
	// region as topology.kubernetes.io/zone and /region): a ToR is sent
	// the nodes of its rack. Not the Node objects' labels: a node's own
	// credential may write those.
	NodeSelector *LabelSelector `yaml:"nodeSelector"`
	// BFD, if set, runs a BFD session (RFC 5880) with the router beside
	// the BGP session: the router drops this replica's paths within the
	// detection time (300ms × 3 by default) when the link or the host
	// fails, not after the hold time. Single hop (RFC 5881), or multihop
	// (RFC 5883) for a peer with ebgpMultihop. The router must run BFD too.
	BFD *BFD `yaml:"bfd"`
}

// BFD are a peer's BFD timers, named as FRR's bfdd names them.
type BFD struct {
	// TransmitInterval is how often this replica sends (default 300ms).
	TransmitInterval Duration `yaml:"transmitInterval"`
	// ReceiveInterval is the fastest it accepts the router's packets
	// (default 300ms).
	ReceiveInterval Duration `yaml:"receiveInterval"`
	// DetectMultiplier is how many intervals without a packet declare the
	// session down (default 3).
	DetectMultiplier int `yaml:"detectMultiplier"`
	// MinimumTTL, for a multihop session (a peer with ebgpMultihop), is
	// the least TTL the router's packets may arrive with: they are sent
	// with 255, so 255 minus the routers between. Default 256 −
	// ebgpMultihop, as far as the BGP session may reach. A single-hop
	// session takes only 255.
	MinimumTTL int `yaml:"minimumTTL"`
}

// GracefulRestart (RFC 4724) lets the peer keep forwarding on our paths
// while the CCM restarts or fails over.
type GracefulRestart struct {
	Enabled     *bool    `yaml:"enabled"`
	RestartTime Duration `yaml:"restartTime"`
}

// On reports whether graceful restart is enabled (the default).
func (g GracefulRestart) On() bool { return g.Enabled == nil || *g.Enabled }

// Address families of a peer.
const (
	FamilyIPv4 = "ipv4-unicast"
	FamilyIPv6 = "ipv6-unicast"
)

// Duration is a time.Duration written as "90s", "1m30s".
type Duration struct{ time.Duration }

// UnmarshalYAML reads a Go duration string.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	v, err := time.ParseDuration(strings.TrimSpace(n.Value))
	if err != nil {
		return fmt.Errorf("%q is not a duration such as 90s", n.Value)
	}
	d.Duration = v
	return nil
}
