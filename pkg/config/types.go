// Package config defines the cloud-config file of the baremetal cloud
// provider: its schema, defaults, validation and loading.
//
// It is a pure package: it knows nothing of Kubernetes API objects.
package config

import (
	"maps"
	"slices"
	"strconv"
	"strings"
)

// Config is the whole cloud-config file.
type Config struct {
	// APIVersion names the version of the file's format; empty is the
	// first, baremetal.cloudprovider.io/v1alpha1.
	APIVersion   string       `yaml:"apiVersion"`
	Inventory    Inventory    `yaml:"inventory"`
	LoadBalancer LoadBalancer `yaml:"loadBalancer"`
	BGP          BGP          `yaml:"bgp"`
	// Routes, when set, announces each Node's pod CIDRs over BGP.
	Routes *Routes `yaml:"routes"`
}

// UnlistedNodePolicy says what happens to a Node that matches no machine.
type UnlistedNodePolicy string

const (
	// UnlistedReject leaves an unlisted Node uninitialised and reports it.
	UnlistedReject UnlistedNodePolicy = "reject"
	// UnlistedAllow initialises an unlisted Node with the inventory defaults.
	UnlistedAllow UnlistedNodePolicy = "allow"
)

// PowerState is the recorded power state of a machine.
type PowerState string

const (
	PowerOn  PowerState = "on"
	PowerOff PowerState = "off"
)

// Inventory lists the machines and storage systems of the site.
type Inventory struct {
	Defaults      Defaults           `yaml:"defaults"`
	UnlistedNodes UnlistedNodePolicy `yaml:"unlistedNodes"`
	Machines      []Machine          `yaml:"machines"`
	Storage       []StorageSystem    `yaml:"storage"`
	// MaxRemovals bounds the Nodes a shrink of the inventory deletes: a
	// count ("3") or a share of the machines listed before ("10%", the
	// default, at least one). More machines removed and still with a Node
	// are all held, loudly, until the inventory lists them again or a
	// person deletes Nodes until at most that many are left. "0" holds
	// every removal for a person.
	MaxRemovals string `yaml:"maxRemovals"`
	// NodeLabels are keys of the Node objects' labels that peers'
	// nodeSelectors read besides the machines' own labels (a site that
	// labels its Nodes by rack, as MetalLB's do). A node's kubelet may set
	// its own Node's labels, except under node-restriction.kubernetes.io/
	// (the NodeRestriction admission plugin keeps it from them), which are
	// read without being listed: list a key only if the site keeps kubelets
	// from writing it. A machine's own label of the same key wins.
	NodeLabels []string `yaml:"nodeLabels"`
	// PowerChecks bounds how the machines' BMCs are asked.
	PowerChecks PowerChecks `yaml:"powerChecks"`
	// OutOfService adds node.kubernetes.io/out-of-service to the Nodes
	// of machines their BMCs say are off.
	OutOfService OutOfService `yaml:"outOfService"`
}

// NodeRestrictionPrefix is the prefix of the Node labels a kubelet may not
// set under the NodeRestriction admission plugin.
const NodeRestrictionPrefix = "node-restriction.kubernetes.io/"

// ReadsNodeLabel is whether nodeSelectors read a Node's label of key.
func (inv *Inventory) ReadsNodeLabel(key string) bool {
	return strings.HasPrefix(key, NodeRestrictionPrefix) || slices.Contains(inv.NodeLabels, key)
}

// DefaultMaxRemovals is inventory.maxRemovals unless set.
const DefaultMaxRemovals = "10%"

// RemovalLimit is how many departed machines may have their Nodes deleted
// when listed machines were listed before (see MaxRemovals).
func (inv *Inventory) RemovalLimit(listed int) int {
	v := strings.TrimSpace(inv.MaxRemovals)
	if v == "" {
		v = DefaultMaxRemovals
	}
	n, share, ok := countOrShare(v)
	switch {
	case !ok:
		return 0
	case share:
		return max(1, (listed*n+99)/100)
	}
	return n
}

// countOrShare reads "3" (a count) or "10%" (a share, at most 100%).
func countOrShare(v string) (n int, share, ok bool) {
	digits, share := strings.CutSuffix(v, "%")
	n, err := strconv.Atoi(digits)
	return n, share, err == nil && n >= 0 && (!share || n <= 100)
}

// Defaults apply to every machine (and unlisted Node, under "allow") that
// does not set its own value.
type Defaults struct {
	Zone         string `yaml:"zone"`
	Region       string `yaml:"region"`
	InstanceType string `yaml:"instanceType"`
}

// Machine is one server the cluster may run a Node on.
type Machine struct {
	// Name matches the Node name.
	Name string `yaml:"name"`
	// Hostnames are further names a Node of this machine may have.
	Hostnames    []string          `yaml:"hostnames"`
	ProviderID   string            `yaml:"providerID"`
	InstanceType string            `yaml:"instanceType"`
	Zone         string            `yaml:"zone"`
	Region       string            `yaml:"region"`
	Addresses    []Address         `yaml:"addresses"`
	Labels       map[string]string `yaml:"labels"`
	// PowerState is the recorded one, answered when the machine has no
	// BMC or its BMC does not answer.
	PowerState PowerState `yaml:"powerState"`
	// BMC, if set, is asked for the machine's power state.
	BMC *BMC `yaml:"bmc"`
	// MACAddresses are the machine's interfaces' hardware addresses, for
	// layer 2 pools; without them the leader learns the MAC of the Node's
	// address on the segment.
	MACAddresses []string `yaml:"macAddresses"`
}

// SelectorLabels are the labels a peer's nodeSelector matches a machine
// by: its inventory labels, its zone as topology.kubernetes.io/zone and
// its region as topology.kubernetes.io/region (the defaults' once
// SetDefaults has run).
func (m *Machine) SelectorLabels() map[string]string {
	return SelectorLabels(m.Labels, m.Zone, m.Region)
}

// SelectorLabels are labels with zone and region as Kubernetes names them.
func SelectorLabels(labels map[string]string, zone, region string) map[string]string {
	out := make(map[string]string, len(labels)+2)
	maps.Copy(out, labels)
	if zone != "" {
		out["topology.kubernetes.io/zone"] = zone
	}
	if region != "" {
		out["topology.kubernetes.io/region"] = region
	}
	return out
}

// AddressType mirrors the Kubernetes NodeAddressType values.
type AddressType string

const (
	AddressInternalIP  AddressType = "InternalIP"
	AddressExternalIP  AddressType = "ExternalIP"
	AddressHostname    AddressType = "Hostname"
	AddressInternalDNS AddressType = "InternalDNS"
	AddressExternalDNS AddressType = "ExternalDNS"
)

// Address is one address of a machine.
type Address struct {
	Type    AddressType `yaml:"type"`
	Address string      `yaml:"address"`
}

// StorageSystem is a storage backend whose volumes live in one zone. A
// PersistentVolume belongs to the first system, in file order, any of whose
// matchers matches it.
type StorageSystem struct {
	Name   string      `yaml:"name"`
	Zone   string      `yaml:"zone"`
	Region string      `yaml:"region"`
	NFS    *NFSMatch   `yaml:"nfs"`
	ISCSI  *ISCSIMatch `yaml:"iscsi"`
	Ceph   *CephMatch  `yaml:"ceph"`
	CSI    []CSIMatch  `yaml:"csi"`
}

// NFSMatch matches in-tree NFS volumes by server and, optionally, export path.
type NFSMatch struct {
	Servers    []string `yaml:"servers"`
	PathPrefix string   `yaml:"pathPrefix"`
}

// ISCSIMatch matches in-tree iSCSI volumes by target portal (host or
// host:port; the port defaults to 3260) and, optionally, IQN prefix.
type ISCSIMatch struct {
	TargetPortals []string `yaml:"targetPortals"`
	IQNPrefix     string   `yaml:"iqnPrefix"`
}

// CephMatch matches in-tree RBD and CephFS volumes by any of their monitors.
type CephMatch struct {
	Monitors []string `yaml:"monitors"`
}

// CSIMatch matches CSI volumes by driver name and, optionally, a volume
// handle prefix and volume attributes that must all be equal.
type CSIMatch struct {
	Driver             string            `yaml:"driver"`
	VolumeHandlePrefix string            `yaml:"volumeHandlePrefix"`
	VolumeAttributes   map[string]string `yaml:"volumeAttributes"`
}
