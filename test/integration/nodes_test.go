package integration

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	cloudapi "k8s.io/cloud-provider/api"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/test/framework"
)

func TestNodeInitialisedFromInventory(t *testing.T) {
	s := newSite(t, `
inventory:
  defaults: {region: dc-1, zone: rack-a, instanceType: standard}
  machines:
  - name: init-1
    instanceType: r650
    zone: rack-b
    addresses:
    - {type: InternalIP, address: 192.0.2.11}
    - {type: Hostname, address: init-1}
    labels: {example.com/rack: b7}
  - name: init-2
    providerID: baremetal://serial-4711
  - name: init-3
    hostnames: [init-3.lab.example]
`)
	s.startCCM("ccm")
	kubeletAddrs := []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "192.0.2.99"}, {Type: v1.NodeHostName, Address: "init-2"}}
	createNode(t, nodeSpec{name: "init-1", ready: true})
	createNode(t, nodeSpec{name: "init-2", ready: true, addresses: kubeletAddrs})
	createNode(t, nodeSpec{name: "init-3.lab.example", ready: true})

	n1 := waitInitialized(t, "init-1")
	if n1.Spec.ProviderID != "baremetal://init-1" {
		t.Errorf("init-1 provider ID %q, want baremetal://init-1", n1.Spec.ProviderID)
	}
	wantLabels := map[string]string{
		v1.LabelInstanceTypeStable: "r650",
		v1.LabelTopologyZone:       "rack-b",
		v1.LabelTopologyRegion:     "dc-1",
		"example.com/rack":         "b7",
	}
	for k, want := range wantLabels {
		if got := n1.Labels[k]; got != want {
			t.Errorf("init-1 label %s=%q, want %q", k, got, want)
		}
	}
	framework.Eventually(t, waitTimeout, "init-1 has the inventory addresses", func() (bool, string) {
		n, _ := getNode(t, "init-1")
		want := []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "192.0.2.11"}, {Type: v1.NodeHostName, Address: "init-1"}}
		return reflect.DeepEqual(n.Status.Addresses, want), fmt.Sprintf("addresses %v", n.Status.Addresses)
	})

	n2 := waitInitialized(t, "init-2")
	if n2.Spec.ProviderID != "baremetal://serial-4711" {
		t.Errorf("init-2 provider ID %q, want the machine's own baremetal://serial-4711", n2.Spec.ProviderID)
	}
	if n2.Labels[v1.LabelTopologyZone] != "rack-a" || n2.Labels[v1.LabelInstanceTypeStable] != "standard" {
		t.Errorf("init-2 did not get the defaults: %v", n2.Labels)
	}
	if !reflect.DeepEqual(n2.Status.Addresses, kubeletAddrs) {
		t.Errorf("init-2 has no inventory addresses, so it keeps the kubelet's %v; has %v", kubeletAddrs, n2.Status.Addresses)
	}

	n3 := waitInitialized(t, "init-3.lab.example")
	if n3.Spec.ProviderID != "baremetal://init-3" {
		t.Errorf("init-3.lab.example matched by hostname should get baremetal://init-3, got %q", n3.Spec.ProviderID)
	}
}

func TestUnlistedNodeAllowed(t *testing.T) {
	s := newSite(t, `
inventory:
  unlistedNodes: allow
  defaults: {zone: rack-d, region: dc-2, instanceType: vm}
`)
	s.startCCM("ccm")
	createNode(t, nodeSpec{name: "guest-1", ready: false})
	n := waitInitialized(t, "guest-1")
	if n.Spec.ProviderID != "baremetal://guest-1" || n.Labels[v1.LabelTopologyZone] != "rack-d" || n.Labels[v1.LabelTopologyRegion] != "dc-2" || n.Labels[v1.LabelInstanceTypeStable] != "vm" {
		t.Errorf("guest-1 did not get the defaults: providerID %q labels %v", n.Spec.ProviderID, n.Labels)
	}
	framework.Consistently(t, 3*time.Second, "a NotReady allowed Node is not deleted", func() (bool, string) {
		_, ok := getNode(t, "guest-1")
		return ok, "guest-1 was deleted"
	})
}

func TestNodeLifecycleFollowsInventory(t *testing.T) {
	const machines = `
inventory:
  machines:
  - name: life-stays
  - name: life-ready-gone
`
	s := newSite(t, machines+"  - name: life-gone\n  - name: life-off\n")
	s.startCCM("ccm")
	for _, name := range []string{"life-stays", "life-gone", "life-off", "life-ready-gone"} {
		createNode(t, nodeSpec{name: name, ready: true})
		waitInitialized(t, name)
	}
	for _, name := range []string{"life-stays", "life-gone", "life-off"} {
		setNodeStatus(t, name, false, nil)
	}
	// life-gone leaves the inventory; life-off is powered off.
	s.writeConfig(machines + "  - name: life-off\n    powerState: off\n")

	framework.Eventually(t, waitTimeout, "the NotReady Node whose machine left is deleted", func() (bool, string) {
		_, ok := getNode(t, "life-gone")
		return !ok, "life-gone still exists"
	})
	framework.Eventually(t, waitTimeout, "the powered-off Node has the shutdown taint", func() (bool, string) {
		n, _ := getNode(t, "life-off")
		return n != nil && hasTaint(n, cloudapi.TaintNodeShutdown), "no shutdown taint"
	})
	for _, name := range []string{"life-stays", "life-ready-gone"} {
		n, ok := getNode(t, name)
		if !ok {
			t.Errorf("%s was deleted", name)
		} else if hasTaint(n, cloudapi.TaintNodeShutdown) {
			t.Errorf("%s got the shutdown taint", name)
		}
	}
	// A Ready Node is never deleted, even when its machine leaves.
	s.writeConfig("inventory:\n  machines:\n  - name: life-stays\n  - name: life-off\n    powerState: off\n")
	framework.Consistently(t, 4*time.Second, "a Ready Node whose machine left stays", func() (bool, string) {
		_, ok := getNode(t, "life-ready-gone")
		return ok, "life-ready-gone was deleted"
	})
}

func TestBadConfigKeepsLastGood(t *testing.T) {
	const good = `
inventory:
  machines:
  - name: keep-1
  - name: keep-2
`
	s := newSite(t, good)
	ccm := s.startCCM("ccm")
	for _, name := range []string{"keep-1", "keep-2"} {
		createNode(t, nodeSpec{name: name, ready: true})
		waitInitialized(t, name)
		setNodeStatus(t, name, false, nil)
	}
	bad := []struct {
		what, content, inLog string
	}{
		{"invalid field", "inventory:\n  machines:\n  - name: keep-1\n    addresses:\n    - {type: InternalIP, address: 10.0.0.300}\n",
			`inventory.machines[0].addresses[0].address: \"10.0.0.300\" is not an IP`},
		{"truncated", "inventory:\n  machines:\n  - name: keep-1\n    addresses: [{type: Inter", "not valid YAML"},
		{"empty", "", "the file is empty"},
		{"unknown field", "inventory:\n  machine:\n  - name: keep-1\n", `inventory.machine: unknown field`},
	}
	stillThere := nodesAllThere(t, "keep-1", "keep-2")
	for _, b := range bad {
		s.writeConfig(b.content)
		framework.Eventually(t, 20*time.Second, "the "+b.what+" config is reported in the log", func() (bool, string) {
			return ccm.LogContains("Cloud config not reloaded", b.inLog), "not in the log yet"
		})
		framework.Consistently(t, 3*time.Second, "no Node is deleted after a "+b.what+" config", stillThere)
	}
	framework.Eventually(t, 20*time.Second, "the error is an Event on the CCM's Pod", func() (bool, string) {
		ev := events(t, "kube-system", "ccm", "InvalidCloudConfig")
		return len(ev) > 0 && ev[0].Type == v1.EventTypeWarning, fmt.Sprintf("%d events", len(ev))
	})
	// The file disappears entirely.
	if err := removeFile(s.Config.Path()); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 30*time.Second, "the missing file is reported", func() (bool, string) {
		return ccm.LogContains("Cloud config not reloaded", "no such file"), "not in the log yet"
	})
	framework.Consistently(t, 3*time.Second, "no Node is deleted while the file is missing", stillThere)
	if done, err := ccm.Exited(); done {
		t.Fatalf("the CCM exited: %v", err)
	}
}

func TestInvalidConfigAtStartExits(t *testing.T) {
	s := newSite(t, "inventory:\n  machines:\n  - name: a\n    powerState: sleeping\n")
	p := s.startReplica("ccm")
	err := p.Wait(30 * time.Second)
	if err == nil {
		t.Fatal("the CCM started with an invalid config")
	}
	if !p.LogContains(`inventory.machines[0].powerState: "sleeping" is not one of on, off`) {
		t.Errorf("the exit message does not name the field:\n%s", framework.Tail(p.Logs(), 20))
	}

	missing := framework.CCM{Binary: suite.Binary, Dir: t.TempDir(), Name: "missing", Kubeconfig: suite.Kubeconfig, CloudConfig: "/nonexistent/cloud.yaml"}
	p2, startErr := missing.Start()
	if startErr != nil {
		t.Fatal(startErr)
	}
	if err := p2.Wait(30 * time.Second); err == nil {
		t.Fatal("the CCM started without its config file")
	}
	if !p2.LogContains("/nonexistent/cloud.yaml") {
		t.Errorf("the exit message does not name the file:\n%s", framework.Tail(p2.Logs(), 20))
	}
}
