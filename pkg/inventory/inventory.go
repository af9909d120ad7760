// Package inventory answers questions about the machines and storage
// systems of the cloud config: which machine a Node runs on, which storage
// system backs a volume. It knows nothing of Kubernetes API objects.
package inventory

import (
	"net/netip"
	"strings"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/config"
)

// Inventory is an immutable, indexed view of a validated config.
type Inventory struct {
	cfg          config.Inventory
	byName       map[string]*config.Machine // machine name
	byHostname   map[string]*config.Machine // extra hostnames and Hostname/DNS addresses
	byProviderID map[string]*config.Machine
	byAddress    map[netip.Addr]*config.Machine
}

// New indexes a config that has passed validation.
func New(cfg config.Inventory) *Inventory {
	inv := &Inventory{
		cfg:          cfg,
		byName:       map[string]*config.Machine{},
		byHostname:   map[string]*config.Machine{},
		byProviderID: map[string]*config.Machine{},
		byAddress:    map[netip.Addr]*config.Machine{},
	}
	for i := range inv.cfg.Machines {
		m := &inv.cfg.Machines[i]
		inv.byName[m.Name] = m
		inv.byProviderID[m.EffectiveProviderID()] = m
		for _, h := range m.Hostnames {
			inv.byHostname[strings.ToLower(h)] = m
		}
		for _, a := range m.Addresses {
			if ip, err := netip.ParseAddr(a.Address); err == nil {
				inv.byAddress[ip] = m
			} else if _, taken := inv.byHostname[strings.ToLower(a.Address)]; !taken {
				inv.byHostname[strings.ToLower(a.Address)] = m
			}
		}
	}
	return inv
}

// UnlistedNodes is the policy for Nodes that match no machine.
func (inv *Inventory) UnlistedNodes() config.UnlistedNodePolicy { return inv.cfg.UnlistedNodes }

// Defaults are the values for machines (and allowed unlisted Nodes) that
// set none of their own.
func (inv *Inventory) Defaults() config.Defaults { return inv.cfg.Defaults }

// ReadsNodeLabel is whether nodeSelectors read a Node's label of key (see
// config.Inventory.NodeLabels).
func (inv *Inventory) ReadsNodeLabel(key string) bool { return inv.cfg.ReadsNodeLabel(key) }

// Machines returns every machine, in file order.
func (inv *Inventory) Machines() []config.Machine { return inv.cfg.Machines }

// NodeKeys is what a Node is known by.
type NodeKeys struct {
	ProviderID string
	Name       string
	// Addresses are the Node's reported addresses: IPs and host names.
	Addresses []string
}

// FindMachine returns the machine a Node runs on: by provider ID first, then
// by name, then by the machine's hostnames and addresses.
func (inv *Inventory) FindMachine(k NodeKeys) (*config.Machine, bool) {
	if k.ProviderID != "" {
		if m, ok := inv.byProviderID[k.ProviderID]; ok {
			return m, true
		}
	}
	if m, ok := inv.byName[k.Name]; ok {
		return m, true
	}
	if m, ok := inv.byHostname[strings.ToLower(k.Name)]; ok {
		return m, true
	}
	for _, a := range k.Addresses {
		if ip, err := netip.ParseAddr(a); err == nil {
			if m, ok := inv.byAddress[ip]; ok {
				return m, true
			}
		} else if m, ok := inv.byHostname[strings.ToLower(a)]; ok {
			return m, true
		}
	}
	return nil, false
}

// MachineByName returns the machine of that name or hostname.
func (inv *Inventory) MachineByName(name string) (*config.Machine, bool) {
	if m, ok := inv.byName[name]; ok {
		return m, true
	}
	m, ok := inv.byHostname[strings.ToLower(name)]
	return m, ok
}
