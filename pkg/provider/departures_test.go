package provider

import (
	"context"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/config"
	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/inventory"
)

func machinesInventory(machines ...config.Machine) *inventory.Inventory {
	return inventory.New(config.Inventory{Machines: machines})
}

func TestDepartures(t *testing.T) {
	t0 := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	a := config.Machine{Name: "a"}
	b := config.Machine{Name: "b", ProviderID: "baremetal://serial-b"}
	c := config.Machine{Name: "c", Addresses: []config.Address{{Type: "InternalIP", Address: "10.0.0.3"}}}
	all := machinesInventory(a, b, c)
	tests := []struct {
		name  string
		steps []*inventory.Inventory // configs put in force, one second apart
		at    time.Duration          // when the Node is looked up, after the last step
		keys  inventory.NodeKeys
		gone  bool
	}{
		{"removed past the grace", []*inventory.Inventory{all, machinesInventory(b, c)}, removalGrace,
			inventory.NodeKeys{ProviderID: "baremetal://a", Name: "a"}, true},
		{"removed within the grace", []*inventory.Inventory{all, machinesInventory(b, c)}, removalGrace - time.Second,
			inventory.NodeKeys{ProviderID: "baremetal://a", Name: "a"}, false},
		{"removed and put back", []*inventory.Inventory{all, machinesInventory(b, c), all}, time.Hour,
			inventory.NodeKeys{ProviderID: "baremetal://a", Name: "a"}, false},
		{"renamed, provider ID kept", []*inventory.Inventory{all, machinesInventory(a, config.Machine{Name: "b2", ProviderID: "baremetal://serial-b"}, c)}, time.Hour,
			inventory.NodeKeys{ProviderID: "baremetal://serial-b", Name: "b"}, false},
		{"matched by address", []*inventory.Inventory{all, machinesInventory(a, b)}, time.Hour,
			inventory.NodeKeys{Name: "node-c", Addresses: []string{"10.0.0.3"}}, true},
		{"never listed", []*inventory.Inventory{all, machinesInventory(a)}, time.Hour,
			inventory.NodeKeys{ProviderID: "baremetal://stray", Name: "stray"}, false},
		{"grace counts from the removal, not from later reloads", []*inventory.Inventory{all, machinesInventory(b, c), machinesInventory(b)}, removalGrace - time.Second,
			inventory.NodeKeys{ProviderID: "baremetal://a", Name: "a"}, true},
	}
	for _, tt := range tests {
		var d departures
		now := t0
		for i := 1; i < len(tt.steps); i++ {
			now = t0.Add(time.Duration(i) * time.Second)
			d.update(tt.steps[i-1], tt.steps[i], now)
		}
		_, gone := d.find(tt.keys, now.Add(tt.at))
		if gone != tt.gone {
			t.Errorf("%s: departed = %v, want %v", tt.name, gone, tt.gone)
		}
	}
}

func TestInstanceExistsOnlyFalseForRemovedMachines(t *testing.T) {
	ctx := context.Background()
	c := newCloud(t, "inventory:\n  machines:\n  - name: a\n  - name: b\n")
	initialisedNode := node("a", "baremetal://a")
	uninitialised := node("b", "")
	uninitialised.Spec.Taints = []v1.Taint{{Key: "node.cloudprovider.kubernetes.io/uninitialized", Effect: v1.TaintEffectNoSchedule}}
	cfg, err := config.Parse([]byte("inventory:\n  machines:\n  - name: z\n"))
	if err != nil {
		t.Fatal(err)
	}
	c.apply(cfg)
	for _, n := range []*v1.Node{initialisedNode, uninitialised, node("stray", "")} {
		if exists, err := c.InstanceExists(ctx, n); !exists || err != nil {
			t.Errorf("%s right after its machine left: InstanceExists = %v, %v; want true until the grace has passed", n.Name, exists, err)
		}
	}
	// Past the grace (moved back in time rather than waited for).
	c.departed.mu.Lock()
	for name, g := range c.departed.gone {
		g.since = g.since.Add(-removalGrace)
		c.departed.gone[name] = g
	}
	c.departed.mu.Unlock()
	if exists, _ := c.InstanceExists(ctx, initialisedNode); exists {
		t.Errorf("the initialised Node of a machine removed past the grace still exists")
	}
	if exists, _ := c.InstanceExists(ctx, uninitialised); !exists {
		t.Errorf("an uninitialised Node does not exist: it would be deleted")
	}
	if exists, _ := c.InstanceExists(ctx, node("stray", "baremetal://stray")); !exists {
		t.Errorf("a Node that was never listed does not exist: it would be deleted")
	}
}

// A departed machine is forgotten once no Node runs on it: the record of
// removals does not only grow.
func TestDeparturesAreForgottenWithTheirNodes(t *testing.T) {
	a, b := config.Machine{Name: "a"}, config.Machine{Name: "b"}
	var d departures
	d.update(machinesInventory(a, b), machinesInventory(), time.Now())
	d.keep([]inventory.NodeKeys{{Name: "a", ProviderID: "baremetal://a"}})
	if _, ok := d.gone["b"]; ok {
		t.Error("b, which no Node runs on, is still recorded")
	}
	if _, ok := d.find(inventory.NodeKeys{Name: "a", ProviderID: "baremetal://a"}, time.Now().Add(removalGrace)); !ok {
		t.Error("a, whose Node is still there, was forgotten")
	}
	d.keep(nil)
	if len(d.gone) != 0 {
		t.Errorf("%d departed machines kept with no Node", len(d.gone))
	}
}
