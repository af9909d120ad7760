package outofservice

import (
	"testing"
	"time"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/bmc"
	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/config"
)

// TestDecide is the rule, row by row: added only when turned on, to a
// NotReady Node whose BMC has said Off for the grace period; removed only
// when ours, the BMC says On and the Node is Ready; Unknown changes
// nothing either way.
func TestDecide(t *testing.T) {
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	on := config.OutOfService{Enabled: true, GracePeriod: config.Duration{Duration: time.Minute}}
	off := config.OutOfService{GracePeriod: config.Duration{Duration: time.Minute}}
	long, short := now.Add(-2*time.Minute), now.Add(-10*time.Second)
	tests := []struct {
		name string
		oos  config.OutOfService
		node NodeView
		want Action
	}{
		{"off past the grace, NotReady", on, NodeView{HasBMC: true, Power: bmc.Off, Since: long}, Add},
		{"off exactly the grace", on, NodeView{HasBMC: true, Power: bmc.Off, Since: now.Add(-time.Minute)}, Add},
		{"off within the grace", on, NodeView{HasBMC: true, Power: bmc.Off, Since: short}, Keep},
		{"turned off in the config", off, NodeView{HasBMC: true, Power: bmc.Off, Since: long}, Keep},
		{"unknown is never off", on, NodeView{HasBMC: true, Power: bmc.Unknown, Since: long}, Keep},
		{"on but NotReady: unresponsive, not shut down", on, NodeView{HasBMC: true, Power: bmc.On, Since: long}, Keep},
		{"off but still Ready", on, NodeView{Ready: true, HasBMC: true, Power: bmc.Off, Since: long}, Keep},
		{"no BMC", on, NodeView{Power: "", Since: long}, Keep},
		{"already tainted by a person", on, NodeView{Tainted: true, HasBMC: true, Power: bmc.Off, Since: long}, Keep},
		{"ours, back on and Ready", on, NodeView{Tainted: true, Ours: true, Ready: true, HasBMC: true, Power: bmc.On}, Remove},
		{"ours, back on and Ready, turned off since", off, NodeView{Tainted: true, Ours: true, Ready: true, HasBMC: true, Power: bmc.On}, Remove},
		{"ours, on but NotReady yet", on, NodeView{Tainted: true, Ours: true, HasBMC: true, Power: bmc.On}, Keep},
		{"ours, Ready but the BMC unknown", on, NodeView{Tainted: true, Ours: true, Ready: true, HasBMC: true, Power: bmc.Unknown}, Keep},
		{"ours, Ready but the BMC says off", on, NodeView{Tainted: true, Ours: true, Ready: true, HasBMC: true, Power: bmc.Off, Since: long}, Keep},
		{"a person's, back on and Ready", on, NodeView{Tainted: true, Ready: true, HasBMC: true, Power: bmc.On}, Keep},
		// A reading from before the Node's last change of readiness is
		// stale: the machine may have been powered on and crashed since.
		{"off, but said before the Node went NotReady", on, NodeView{HasBMC: true, Power: bmc.Off, Since: now.Add(-10 * time.Minute),
			Answered: now.Add(-9 * time.Minute), Transition: now.Add(-30 * time.Second)}, Keep},
		{"off, said since the Node went NotReady, not for the grace yet", on, NodeView{HasBMC: true, Power: bmc.Off, Since: now.Add(-10 * time.Minute),
			Answered: now.Add(-time.Second), Transition: now.Add(-30 * time.Second)}, Keep},
		{"off, said since the Node went NotReady, for the grace", on, NodeView{HasBMC: true, Power: bmc.Off, Since: now.Add(-10 * time.Minute),
			Answered: now.Add(-time.Second), Transition: now.Add(-90 * time.Second)}, Add},
		{"ours, Ready, but on was said before it turned Ready", on, NodeView{Tainted: true, Ours: true, Ready: true, HasBMC: true, Power: bmc.On,
			Answered: now.Add(-time.Minute), Transition: now.Add(-10 * time.Second)}, Keep},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Decide(tt.oos, tt.node, now); got != tt.want {
				t.Errorf("Decide = %q, want %q", got, tt.want)
			}
		})
	}
}
