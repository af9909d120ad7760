package provider

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"
	cloudapi "k8s.io/cloud-provider/api"
	"k8s.io/klog/v2"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/config"
	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/desired"
	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/inventory"
	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/report"
)

// Every answer here comes from the config in force, which is always a valid
// one already loaded: a file that cannot be read never turns into "this
// instance does not exist", which would delete Nodes.

// InstanceExists answers false only for a Node whose machine a config in
// force removed from the inventory at least removalGrace ago: the upstream
// node-lifecycle controller deletes every NotReady Node for which this is
// false, and a kubelet registers its Node NotReady. A Node that matches no
// machine and never did (unlisted), or that is not initialised yet, exists.
func (c *Cloud) InstanceExists(_ context.Context, node *v1.Node) (bool, error) {
	keys := desired.NodeKeys(node)
	inv := c.inventory()
	if _, ok := inv.FindMachine(keys); ok || inv.UnlistedNodes() == config.UnlistedAllow {
		return true, nil
	}
	if desired.Initialised(node) {
		c.lb.mu.Lock()
		cfg := c.lb.cfg.Inventory
		c.lb.mu.Unlock()
		limit := c.holdRemovals(cfg, inv)
		if m, ok := c.departed.find(keys, time.Now(), limit); ok {
			klog.InfoS("Node's machine was removed from the inventory; it no longer exists", "node", klog.KObj(node), "machine", m.Name)
			return false, nil
		}
	}
	return true, nil
}

// holdRemovals forgets the departed machines whose Nodes are gone (deleted
// by the lifecycle controller, or by a person letting a held shrink go),
// says whether a shrink is held, and returns how many departed machines
// may have their Nodes deleted: cfg's maxRemovals, of the machines listed
// before the shrink (inv's and the departed).
func (c *Cloud) holdRemovals(cfg config.Inventory, inv *inventory.Inventory) int {
	if nodes, ok := c.lb.cluster.nodeKeys(); ok {
		c.departed.keep(nodes)
	}
	limit := cfg.RemovalLimit(len(inv.Machines()) + c.departed.count())
	c.reportHeldRemovals(c.departed.held(limit), limit)
	return limit
}

// reportHeldRemovals says, on the CCM's Pod and in
// baremetal_inventory_removals_held, that a shrink of the inventory is
// held; and that it is not once it is let go or undone.
func (c *Cloud) reportHeldRemovals(held, limit int) {
	removalsHeld.Set(float64(held))
	var problems []report.Problem
	if held > 0 {
		problems = append(problems, report.Problem{Reason: "InventoryRemovalsHeld", Object: report.Self,
			Log: "More machines were removed from the inventory than inventory.maxRemovals allows; none of their Nodes is deleted", LogValues: []any{"removed", held, "maxRemovals", limit},
			Message:  fmt.Sprintf("%d machines with Nodes were removed from inventory.machines, more than inventory.maxRemovals allows (%d): none of their NotReady Nodes is deleted. If the inventory is wrong, put them back; if they are gone, delete their Nodes (kubectl delete node) until at most %d are left, or raise inventory.maxRemovals", held, limit, limit),
			Resolved: "Machines removed from the inventory are no longer held"})
	}
	c.lb.report.Report("departures", problems, nil)
}

// InstanceMetadata describes the Node's machine. An unlisted Node under
// "reject" gets an error, so the cloud node controller leaves it tainted
// and retries, and a Warning Event that says what is missing.
func (c *Cloud) InstanceMetadata(_ context.Context, node *v1.Node) (*cloudprovider.InstanceMetadata, error) {
	inv := c.inventory()
	keys := desired.NodeKeys(node)
	m, ok := inv.FindMachine(keys)
	if !ok {
		if inv.UnlistedNodes() == config.UnlistedAllow {
			d := inv.Defaults()
			klog.V(2).InfoS("Node is not in the inventory; using the defaults", "node", klog.KObj(node))
			return &cloudprovider.InstanceMetadata{
				ProviderID:    config.ProviderIDPrefix + node.Name,
				InstanceType:  d.InstanceType,
				Zone:          d.Zone,
				Region:        d.Region,
				NodeAddresses: node.Status.Addresses,
			}, nil
		}
		err := fmt.Errorf("node %q matches no entry of inventory.machines in the cloud config (looked up by providerID %q, name, hostnames and addresses %v); add a machine named %q, or set inventory.unlistedNodes: allow", node.Name, keys.ProviderID, keys.Addresses, node.Name)
		c.eventf(node, v1.EventTypeWarning, "MachineNotInInventory", "%v", err)
		return nil, err
	}
	if err := checkNodeIP(m, node); err != nil {
		c.eventf(node, v1.EventTypeWarning, "NodeIPNotInInventory", "%v", err)
		return nil, err
	}
	if other := c.lb.cluster.nodeOfMachine(m, node.Name); other != "" {
		// A Node's name and addresses are its kubelet's to choose: one
		// matching a machine by hostname or address must not take the
		// machine, its provider ID and its addresses from the Node that
		// runs on it.
		err := fmt.Errorf("node %q matches machine %q of inventory.machines, which Node %q already is (provider ID %s); it is not initialised as that machine", node.Name, m.Name, other, m.EffectiveProviderID())
		c.eventf(node, v1.EventTypeWarning, "MachineClaimedByAnotherNode", "%v", err)
		return nil, err
	}
	return machineMetadata(m, node), nil
}

// checkNodeIP makes sure that the IPs the kubelet was told to use
// (--node-ip) are among the machine's inventory addresses: the cloud node
// controller refuses to initialise a Node otherwise, with a less helpful
// message.
func checkNodeIP(m *config.Machine, node *v1.Node) error {
	provided, ok := node.Annotations[cloudapi.AnnotationAlphaProvidedIPAddr]
	if !ok || len(m.Addresses) == 0 {
		return nil
	}
	for _, s := range strings.Split(provided, ",") {
		want, err := netip.ParseAddr(strings.TrimSpace(s))
		if err != nil {
			return fmt.Errorf("node %q: its annotation %s=%q is not a list of IPs", node.Name, cloudapi.AnnotationAlphaProvidedIPAddr, provided)
		}
		found := slices.ContainsFunc(m.Addresses, func(a config.Address) bool {
			got, err := netip.ParseAddr(a.Address)
			return err == nil && got == want
		})
		if !found {
			return fmt.Errorf("node %q: the kubelet's --node-ip %s is not among the addresses of its machine %q in inventory.machines; add it there or fix --node-ip", node.Name, want, m.Name)
		}
	}
	return nil
}

func machineMetadata(m *config.Machine, node *v1.Node) *cloudprovider.InstanceMetadata {
	md := &cloudprovider.InstanceMetadata{
		ProviderID:   m.EffectiveProviderID(),
		InstanceType: m.InstanceType,
		Zone:         m.Zone,
		Region:       m.Region,
	}
	md.NodeAddresses = desired.MachineAddresses(m)
	if len(md.NodeAddresses) == 0 {
		// Keep what the kubelet reported.
		md.NodeAddresses = node.Status.Addresses
	}
	if len(m.Labels) > 0 {
		md.AdditionalLabels = make(map[string]string, len(m.Labels))
		for k, v := range m.Labels {
			md.AdditionalLabels[k] = v
		}
	}
	return md
}
