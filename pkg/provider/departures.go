package provider

import (
	"sync"
	"time"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/config"
	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/inventory"
)

// removalGrace is how long a config that removed a machine must stay in
// force before the machine counts as gone, and its NotReady Node may be
// deleted. A removal undone within it (an edit reverted, a writer that
// stalled mid-file for longer than config.Settle) deletes nothing.
const removalGrace = 10 * time.Second

// departures are the machines that a config put in force removed from the
// inventory, seen by this process. Only they can make an instance "not
// exist": a Node that was never listed, or whose machine was missing from
// the first config this process read, is never deleted for it.
type departures struct {
	mu   sync.Mutex
	gone map[string]departure // by machine name
	inv  *inventory.Inventory // the machines of gone, to match Nodes
}

type departure struct {
	machine config.Machine
	since   time.Time
}

// update records the machines of old that are missing from cur, and
// forgets the ones cur lists again (by name or provider ID).
func (d *departures) update(old, cur *inventory.Inventory, now time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.gone == nil {
		d.gone = map[string]departure{}
	}
	listed := map[string]bool{}
	for _, m := range cur.Machines() {
		listed[m.Name], listed[m.EffectiveProviderID()] = true, true
	}
	for name, g := range d.gone {
		if listed[name] || listed[g.machine.EffectiveProviderID()] {
			delete(d.gone, name)
		}
	}
	for _, m := range old.Machines() {
		if _, known := d.gone[m.Name]; !known && !listed[m.Name] && !listed[m.EffectiveProviderID()] {
			d.gone[m.Name] = departure{machine: m, since: now}
		}
	}
	machines := make([]config.Machine, 0, len(d.gone))
	for _, g := range d.gone {
		machines = append(machines, g.machine)
	}
	d.inv = inventory.New(config.Inventory{Machines: machines})
}

// find returns the departed machine a Node ran on, if its removal has been
// in force for removalGrace by now and no more than limit departed
// machines are recorded (see held).
func (d *departures) find(keys inventory.NodeKeys, now time.Time, limit int) (*config.Machine, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.inv == nil || d.heldLocked(limit) > 0 {
		return nil, false
	}
	m, ok := d.inv.FindMachine(keys)
	if !ok || now.Sub(d.gone[m.Name].since) < removalGrace {
		return nil, false
	}
	return m, true
}

// held is how many departed machines are held under limit: all of them
// when more than limit are recorded (with a Node, once keep has run), a
// shrink no site makes on purpose (a generator that broke, a hall's
// machines dropped), until the inventory lists them again or a person
// deletes Nodes until at most limit are left; else 0.
func (d *departures) held(limit int) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.heldLocked(limit)
}

func (d *departures) heldLocked(limit int) int {
	if len(d.gone) > limit {
		return len(d.gone)
	}
	return 0
}

// count is how many departed machines are recorded (with a Node, once
// keep has run).
func (d *departures) count() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.gone)
}

// keep forgets the departed machines no Node in nodes runs on: once its
// Node is deleted, a departed machine has nothing left to answer for, and
// the record would only grow.
func (d *departures) keep(nodes []inventory.NodeKeys) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.inv == nil {
		return
	}
	used := map[string]bool{}
	for _, k := range nodes {
		if m, ok := d.inv.FindMachine(k); ok {
			used[m.Name] = true
		}
	}
	machines := make([]config.Machine, 0, len(used))
	for name, g := range d.gone {
		if !used[name] {
			delete(d.gone, name)
			continue
		}
		machines = append(machines, g.machine)
	}
	d.inv = inventory.New(config.Inventory{Machines: machines})
}
