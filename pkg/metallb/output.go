package metallb

import "slices"

// The cloud config as the converter writes it: pkg/config's shape, with
// only what was set.

type configOut struct {
	Inventory    *inventoryOut `yaml:"inventory,omitempty"`
	LoadBalancer struct {
		Pools []poolOut `yaml:"pools,omitempty"`
	} `yaml:"loadBalancer"`
	BGP *bgpOut `yaml:"bgp,omitempty"`
}

type inventoryOut struct {
	NodeLabels []string `yaml:"nodeLabels,flow"`
}

type poolOut struct {
	Name              string        `yaml:"name"`
	Addresses         []string      `yaml:"addresses,flow"`
	AutoAssign        *bool         `yaml:"autoAssign,omitempty"`
	AvoidBuggyIPs     bool          `yaml:"avoidBuggyIPs,omitempty"`
	Namespaces        []string      `yaml:"namespaces,omitempty,flow"`
	NamespaceSelector *selectorYAML `yaml:"namespaceSelector,omitempty"`
	ServiceSelector   *selectorYAML `yaml:"serviceSelector,omitempty"`
	Announce          string        `yaml:"announce"`
	BGP               *poolBGPOut   `yaml:"bgp,omitempty"`
	L2                *poolL2Out    `yaml:"l2,omitempty"`
}

type poolBGPOut struct {
	Communities      []string `yaml:"communities,omitempty,flow"`
	LargeCommunities []string `yaml:"largeCommunities,omitempty,flow"`
	LocalPreference  *uint32  `yaml:"localPreference,omitempty"`
}

func (a *poolBGPOut) empty() bool {
	return len(a.Communities) == 0 && len(a.LargeCommunities) == 0 && a.LocalPreference == nil
}

func (a *poolBGPOut) equal(b *poolBGPOut) bool {
	if b == nil {
		return a.empty()
	}
	lp := func(p *uint32) int64 {
		if p == nil {
			return -1
		}
		return int64(*p)
	}
	return slices.Equal(a.Communities, b.Communities) && slices.Equal(a.LargeCommunities, b.LargeCommunities) && lp(a.LocalPreference) == lp(b.LocalPreference)
}

type poolL2Out struct {
	Interface  string   `yaml:"interface,omitempty"`
	Interfaces []string `yaml:"interfaces,omitempty,flow"`
}

func (o *poolL2Out) names() []string {
	if o.Interface != "" {
		return []string{o.Interface}
	}
	return o.Interfaces
}

type selectorYAML struct {
	MatchLabels      map[string]string `yaml:"matchLabels,omitempty"`
	MatchExpressions []requirementYAML `yaml:"matchExpressions,omitempty"`
}

type requirementYAML struct {
	Key      string   `yaml:"key"`
	Operator string   `yaml:"operator"`
	Values   []string `yaml:"values,omitempty,flow"`
}

type bgpOut struct {
	LocalASN       uint32             `yaml:"localASN"`
	Peers          []peerOut          `yaml:"peers"`
	Advertisements []advertisementOut `yaml:"advertisements,omitempty"`
}

type advertisementOut struct {
	Pools            []string `yaml:"pools,flow"`
	Peers            []string `yaml:"peers,omitempty,flow"`
	Communities      []string `yaml:"communities,omitempty,flow"`
	LargeCommunities []string `yaml:"largeCommunities,omitempty,flow"`
	LocalPreference  *uint32  `yaml:"localPreference,omitempty"`
	ASPathPrepend    int      `yaml:"asPathPrepend,omitempty"`
}

type peerOut struct {
	Address          string        `yaml:"address"`
	ASN              uint32        `yaml:"asn"`
	Port             uint16        `yaml:"port,omitempty"`
	Password         string        `yaml:"password,omitempty"`
	PasswordFile     string        `yaml:"passwordFile,omitempty"`
	HoldTime         string        `yaml:"holdTime,omitempty"`
	KeepaliveTime    string        `yaml:"keepaliveTime,omitempty"`
	ConnectRetryTime string        `yaml:"connectRetryTime,omitempty"`
	EBGPMultihop     uint8         `yaml:"ebgpMultihop,omitempty"`
	AddressFamilies  []string      `yaml:"addressFamilies,omitempty,flow"`
	BFD              *bfdOut       `yaml:"bfd,omitempty"`
	NodeSelector     *selectorYAML `yaml:"nodeSelector,omitempty"`
}

type bfdOut struct {
	TransmitInterval string `yaml:"transmitInterval,omitempty"`
	ReceiveInterval  string `yaml:"receiveInterval,omitempty"`
	DetectMultiplier int    `yaml:"detectMultiplier,omitempty"`
	MinimumTTL       int    `yaml:"minimumTTL,omitempty"`
}
