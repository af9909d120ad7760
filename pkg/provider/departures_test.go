package provider

import (
	"context"
	"fmt"
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
		_, gone := d.find(tt.keys, now.Add(tt.at), 100)
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
	cfg, err := config.Parse([]byte("inventory:\n  maxRemovals: \"2\"\n  machines:\n  - name: z\n"))
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
	if _, ok := d.find(inventory.NodeKeys{Name: "a", ProviderID: "baremetal://a"}, time.Now().Add(removalGrace), 1); !ok {
		t.Error("a, whose Node is still there, was forgotten")
	}
	d.keep(nil)
	if len(d.gone) != 0 {
		t.Errorf("%d departed machines kept with no Node", len(d.gone))
	}
}

// A shrink of the inventory that would delete more Nodes than
// inventory.maxRemovals allows (a generator that broke during a hall's
// outage) deletes none: every departed machine's Node is held until the
// inventory comes back, or a person deletes Nodes until at most that many
// are left.
func TestDeparturesBrake(t *testing.T) {
	t0 := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	var all []config.Machine
	for i := range 20 {
		all = append(all, config.Machine{Name: fmt.Sprintf("m%02d", i)})
	}
	keysOf := func(i int) inventory.NodeKeys {
		return inventory.NodeKeys{ProviderID: fmt.Sprintf("baremetal://m%02d", i), Name: fmt.Sprintf("m%02d", i)}
	}
	for _, tc := range []struct {
		name     string
		removed  int // machines removed at once, from the end
		limit    int
		existing int // of the removed machines, how many still have a Node
		gone     bool
		held     int
	}{
		{"one removed, limit 2", 1, 2, 1, true, 0},
		{"two removed, limit 2", 2, 2, 2, true, 0},
		{"a hall of ten removed, limit 2", 10, 2, 10, false, 10},
		{"a hall removed, a person deleted eight of its Nodes", 10, 2, 2, true, 0},
		{"a hall removed, a person deleted seven", 10, 2, 3, false, 3},
		{"limit 0: every removal waits for a person", 1, 0, 1, false, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var d departures
			d.update(machinesInventory(all...), machinesInventory(all[:len(all)-tc.removed]...), t0)
			var nodes []inventory.NodeKeys
			for i := 0; i < len(all)-tc.removed+tc.existing; i++ {
				nodes = append(nodes, keysOf(i))
			}
			d.keep(nodes)
			// The last machine removed, whose Node is still there.
			last := len(all) - tc.removed + tc.existing - 1
			_, gone := d.find(keysOf(last), t0.Add(time.Hour), tc.limit)
			held := d.held(tc.limit)
			if gone != tc.gone || held != tc.held {
				t.Errorf("departed %v, held %d; want %v, %d", gone, held, tc.gone, tc.held)
			}
		})
	}
	// The inventory back: nothing is held, nothing departed.
	var d departures
	d.update(machinesInventory(all...), machinesInventory(all[:10]...), t0)
	d.update(machinesInventory(all[:10]...), machinesInventory(all...), t0.Add(time.Minute))
	if _, gone := d.find(keysOf(15), t0.Add(time.Hour), 2); gone || d.held(2) != 0 {
		t.Errorf("after the inventory came back: departed %v, held %d", gone, d.held(2))
	}
}
