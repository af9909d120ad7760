package metallb

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// MetalLB's resources as `kubectl get -o yaml` prints them (metallb.io
// v1beta1, and v1beta2 for BGPPeer), with only the fields this converter
// reads; a spec field not here is refused by name. Written from MetalLB's
// API reference, not imported: the converter must not pull MetalLB's
// dependencies into the CCM.

type object struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name      string            `json:"name"`
		Namespace string            `json:"namespace"`
		Labels    map[string]string `json:"labels"`
	} `json:"metadata"`
}

type ipAddressPoolSpec struct {
	Addresses         []string           `json:"addresses"`
	AutoAssign        *bool              `json:"autoAssign"`
	AvoidBuggyIPs     bool               `json:"avoidBuggyIPs"`
	ServiceAllocation *serviceAllocation `json:"serviceAllocation"`
}

type serviceAllocation struct {
	Priority           int                    `json:"priority"`
	Namespaces         []string               `json:"namespaces"`
	NamespaceSelectors []metav1.LabelSelector `json:"namespaceSelectors"`
	ServiceSelectors   []metav1.LabelSelector `json:"serviceSelectors"`
}

type bgpAdvertisementSpec struct {
	AggregationLength      *int32                 `json:"aggregationLength"`
	AggregationLengthV6    *int32                 `json:"aggregationLengthV6"`
	LocalPref              uint32                 `json:"localPref"`
	AsPathPrepend          uint8                  `json:"asPathPrepend"`
	Communities            []string               `json:"communities"`
	IPAddressPools         []string               `json:"ipAddressPools"`
	IPAddressPoolSelectors []metav1.LabelSelector `json:"ipAddressPoolSelectors"`
	NodeSelectors          []metav1.LabelSelector `json:"nodeSelectors"`
	Peers                  []string               `json:"peers"`
	ServiceSelectors       []metav1.LabelSelector `json:"serviceSelectors"`
}

type l2AdvertisementSpec struct {
	IPAddressPools         []string               `json:"ipAddressPools"`
	IPAddressPoolSelectors []metav1.LabelSelector `json:"ipAddressPoolSelectors"`
	NodeSelectors          []metav1.LabelSelector `json:"nodeSelectors"`
	Interfaces             []string               `json:"interfaces"`
	ServiceSelectors       []metav1.LabelSelector `json:"serviceSelectors"`
	PreferredNodeSelectors []any                  `json:"preferredNodeSelectors"`
}

type bgpPeerSpec struct {
	MyASN                  uint32                 `json:"myASN"`
	PeerASN                uint32                 `json:"peerASN"`
	LocalASN               uint32                 `json:"localASN"`
	DynamicASN             string                 `json:"dynamicASN"`
	PeerAddress            string                 `json:"peerAddress"`
	Interface              string                 `json:"interface"`
	SourceAddress          string                 `json:"sourceAddress"`
	PeerPort               uint16                 `json:"peerPort"`
	HoldTime               *metav1.Duration       `json:"holdTime"`
	KeepaliveTime          *metav1.Duration       `json:"keepaliveTime"`
	ConnectTime            *metav1.Duration       `json:"connectTime"`
	RouterID               string                 `json:"routerID"`
	NodeSelectors          []metav1.LabelSelector `json:"nodeSelectors"`
	Password               string                 `json:"password"`
	PasswordSecret         *secretReference       `json:"passwordSecret"`
	BFDProfile             string                 `json:"bfdProfile"`
	EnableGracefulRestart  bool                   `json:"enableGracefulRestart"`
	EBGPMultiHop           bool                   `json:"ebgpMultiHop"`
	VRF                    string                 `json:"vrf"`
	DisableMP              bool                   `json:"disableMP"`
	DualStackAddressFamily bool                   `json:"dualStackAddressFamily"`
}

type secretReference struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
}

type communitySpec struct {
	Communities []struct {
		Name  string `json:"name"`
		Value string `json:"value"`
	} `json:"communities"`
}

type bfdProfileSpec struct {
	ReceiveInterval  *uint32 `json:"receiveInterval"`
	TransmitInterval *uint32 `json:"transmitInterval"`
	DetectMultiplier *uint32 `json:"detectMultiplier"`
	EchoInterval     *uint32 `json:"echoInterval"`
	EchoMode         *bool   `json:"echoMode"`
	PassiveMode      *bool   `json:"passiveMode"`
	MinimumTTL       *uint32 `json:"minimumTtl"`
}

// FRR-K8s (frrk8s.metallb.io/v1beta1), MetalLB v0.16's default backend.
type frrConfigurationSpec struct {
	BGP struct {
		Routers     []frrRouter     `json:"routers"`
		BFDProfiles []frrBFDProfile `json:"bfdProfiles"`
	} `json:"bgp"`
	Raw struct {
		Priority int    `json:"priority"`
		Config   string `json:"rawConfig"`
	} `json:"raw"`
	NodeSelector *metav1.LabelSelector `json:"nodeSelector"`
}

type frrRouter struct {
	ASN       uint32        `json:"asn"`
	ID        string        `json:"id"`
	VRF       string        `json:"vrf"`
	Neighbors []frrNeighbor `json:"neighbors"`
	Prefixes  []string      `json:"prefixes"`
	Imports   []any         `json:"imports"`
}

type frrNeighbor struct {
	ASN                   uint32           `json:"asn"`
	DynamicASN            string           `json:"dynamicASN"`
	SourceAddress         string           `json:"sourceaddress"`
	Address               string           `json:"address"`
	Interface             string           `json:"interface"`
	Port                  *uint16          `json:"port"`
	Password              string           `json:"password"`
	PasswordSecret        *secretReference `json:"passwordSecret"`
	HoldTime              *metav1.Duration `json:"holdTime"`
	KeepaliveTime         *metav1.Duration `json:"keepaliveTime"`
	ConnectTime           *metav1.Duration `json:"connectTime"`
	EBGPMultiHop          bool             `json:"ebgpMultiHop"`
	BFDProfile            string           `json:"bfdProfile"`
	EnableGracefulRestart bool             `json:"enableGracefulRestart"`
	ToAdvertise           struct {
		Allowed struct {
			Prefixes []string `json:"prefixes"`
			Mode     string   `json:"mode"`
		} `json:"allowed"`
		PrefixesWithLocalPref []any `json:"withLocalPref"`
		PrefixesWithCommunity []any `json:"withCommunity"`
	} `json:"toAdvertise"`
	ToReceive struct {
		Allowed struct {
			Prefixes []any  `json:"prefixes"`
			Mode     string `json:"mode"`
		} `json:"allowed"`
	} `json:"toReceive"`
	DisableMP              bool   `json:"disableMP"`
	DualStackAddressFamily bool   `json:"dualStackAddressFamily"`
	LocalASN               uint32 `json:"localASN"`
}

type frrBFDProfile struct {
	Name string `json:"name"`
	bfdProfileSpec
}
