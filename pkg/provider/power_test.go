package provider

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/test/framework/redfish"
)

// TestShutdownFromTheBMC: InstanceShutdown says what the machine's BMC
// says when it answers, and what the inventory records when it does not:
// a BMC that fails never turns a machine off.
func TestShutdownFromTheBMC(t *testing.T) {
	dir := t.TempDir()
	var bmcs [2]*redfish.Server
	for i := range bmcs {
		s, err := redfish.New(dir)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Close)
		bmcs[i] = s
	}
	// One CA file per stand-in: each has its own certificate.
	for i, s := range bmcs {
		ca := filepath.Join(dir, fmt.Sprintf("ca%d.pem", i))
		data, _ := os.ReadFile(s.CAFile)
		os.WriteFile(ca, data, 0o600)
		s.CAFile = ca
	}
	user, pass := filepath.Join(dir, "user"), filepath.Join(dir, "pass")
	os.WriteFile(user, []byte(bmcs[0].Username+"\n"), 0o600)
	os.WriteFile(pass, []byte(bmcs[0].Password+"\n"), 0o600)
	machine := func(name, recorded string, s *redfish.Server) string {
		return fmt.Sprintf("  - name: %s\n    powerState: %q\n    bmc: {protocol: redfish, address: %q, usernameFile: %s, passwordFile: %s, tls: {caFile: %s}}\n",
			name, recorded, s.URL, user, pass, s.CAFile)
	}
	c := newCloud(t, "inventory:\n  powerChecks: {interval: 1s, backgroundInterval: 1s, timeout: 500ms}\n  machines:\n"+
		machine("a", "on", bmcs[0])+machine("b", "off", bmcs[1]))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c.power.start(ctx)

	shutdown := func(name string) bool {
		got, err := c.InstanceShutdown(ctx, node(name, ""))
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	until := func(what string, name string, want bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for shutdown(name) != want {
			if time.Now().After(deadline) {
				r, _ := c.power.poller.Reading(name)
				t.Fatalf("%s: InstanceShutdown(%s) is not %v after 10s (BMC reading %+v)", what, name, want, r)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	a, b := bmcs[0], bmcs[1]
	until("the BMC says on", "a", false)
	a.SetPower("Off")
	until("the BMC says off", "a", true)
	// An answer from before the Node's readiness last changed is stale:
	// the recorded state answers.
	changed := node("a", "")
	changed.Status.Conditions = []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionFalse, LastTransitionTime: metav1.NewTime(time.Now().Add(time.Hour))}}
	if off, _ := c.InstanceShutdown(ctx, changed); off {
		t.Error("an off said before the Node went NotReady shuts it down")
	}
	a.SetFault(redfish.ServerError)
	until("the BMC fails: the recorded on", "a", false)
	a.SetFault(redfish.None)
	until("the BMC answers off again", "a", true)

	b.SetPower("On")
	until("recorded off, the BMC says on", "b", false)
	b.SetFault(redfish.Unauthorized)
	until("recorded off, the BMC refuses the login: the recorded off", "b", true)
	if r, _ := c.power.poller.Reading("b"); r.Err == nil {
		t.Error("b's reading has no reason")
	}
}
