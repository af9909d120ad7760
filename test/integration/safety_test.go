package integration

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	cloudapi "k8s.io/cloud-provider/api"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/config/configtest"
	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/test/framework"
)

// Nodes here register the way kubelets do: NotReady first, for as long as
// a real node takes to bring up its runtime and pod network, then Ready.
// The test replicas' lifecycle controller looks every second
// (framework.CCM), so a wrong "does not exist" deletes a Node at once.

// nodesAllThere fails the check when any of the Nodes is gone.
func nodesAllThere(t *testing.T, names ...string) func() (bool, string) {
	return func() (bool, string) {
		for _, name := range names {
			if _, ok := getNode(t, name); !ok {
				return false, name + " was deleted"
			}
		}
		return true, ""
	}
}

func TestUnlistedNotReadyNodeIsKeptAndAdmittedSoonAfterReload(t *testing.T) {
	const base = `
inventory:
  defaults: {zone: rack-a}
  machines:
  - name: listed-1
`
	s := newSite(t, base)
	ccm := s.startCCM("ccm")
	createNode(t, nodeSpec{name: "stray-1", ready: false, addresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "192.0.2.21"}}})

	framework.Eventually(t, waitTimeout, "Warning Event on the unlisted Node", func() (bool, string) {
		ev := events(t, "", "stray-1", "MachineNotInInventory")
		if len(ev) == 0 {
			return false, "no MachineNotInInventory Event"
		}
		if ev[0].Type != v1.EventTypeWarning || !strings.Contains(ev[0].Message, `add a machine named "stray-1"`) || !strings.Contains(ev[0].Message, "inventory.machines") {
			t.Fatalf("the Event does not say which inventory entry is missing: %s %q", ev[0].Type, ev[0].Message)
		}
		return true, ""
	})
	tainted := func() (bool, string) {
		n, ok := getNode(t, "stray-1")
		if !ok {
			return false, "the Node was deleted"
		}
		return hasTaint(n, cloudapi.TaintExternalCloudProvider) && n.Spec.ProviderID == "", fmt.Sprintf("taints %v providerID %q", n.Spec.Taints, n.Spec.ProviderID)
	}
	// Long enough for the node controller's back-off to grow past 10 s.
	framework.Consistently(t, 20*time.Second, "the unlisted NotReady Node stays, tainted", tainted)
	setNodeStatus(t, "stray-1", true, nil)
	framework.Consistently(t, 3*time.Second, "the unlisted Ready Node stays, tainted", tainted)
	if !ccm.LogContains("stray-1", "matches no entry of inventory.machines") {
		t.Errorf("the log does not say why stray-1 is not initialised")
	}

	s.writeConfig(base + "  - name: stray-1\n    zone: rack-c\n")
	written := time.Now()
	n := waitInitialized(t, "stray-1")
	if took := time.Since(written); took > 10*time.Second {
		t.Errorf("stray-1 was initialised %s after its machine was added; the README promises 10 s", took.Round(100*time.Millisecond))
	} else {
		t.Logf("stray-1 initialised %s after its machine was added", took.Round(100*time.Millisecond))
	}
	if n.Spec.ProviderID != "baremetal://stray-1" || n.Labels[v1.LabelTopologyZone] != "rack-c" {
		t.Errorf("after the reload stray-1 has provider ID %q and zone %q", n.Spec.ProviderID, n.Labels[v1.LabelTopologyZone])
	}
	if !ccm.LogContains("Reloaded cloud config") {
		t.Errorf("the reload is not logged")
	}
}

func TestHalfWrittenConfigDeletesNothing(t *testing.T) {
	const whole = `
inventory:
  machines:
  - name: half-1
  - name: half-2
  - name: half-3
  - name: half-4
`
	s := newSite(t, whole)
	ccm := s.startCCM("ccm")
	names := []string{"half-1", "half-2", "half-3", "half-4"}
	for _, name := range names {
		createNode(t, nodeSpec{name: name, ready: true})
		waitInitialized(t, name)
		setNodeStatus(t, name, false, nil)
	}
	// An editor (or scp) on the machine saves a new version in place, in
	// pieces, each of which ends where what is written so far parses with
	// fewer machines.
	if err := s.Config.MakePlain(); err != nil {
		t.Fatal(err)
	}
	edited := whole + "    powerState: on\n"
	var ends []int
	for _, m := range []string{"  - name: half-2", "  - name: half-3", "  - name: half-4"} {
		ends = append(ends, strings.Index(edited, m))
	}
	done := make(chan error, 1)
	go func() { done <- configtest.WriteInPlace(s.Config.Path(), edited, ends, 1500*time.Millisecond) }()
	framework.Consistently(t, 9*time.Second, "no Node is deleted while the file is written", nodesAllThere(t, names...))
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, waitTimeout, "the whole file is put in force", func() (bool, string) {
		return ccm.LogContains("Reloaded cloud config", "machines=4"), "no reload with 4 machines yet"
	})
	for _, line := range strings.Split(ccm.Logs(), "\n") {
		if strings.Contains(line, "Reloaded cloud config") && !strings.Contains(line, "machines=4") {
			t.Errorf("a half-written file was put in force: %s", line)
		}
	}
	framework.Consistently(t, 3*time.Second, "and no Node is deleted after it", nodesAllThere(t, names...))
}

func TestRemovedMachineDeletesOnlyItsNotReadyNodeAfterGrace(t *testing.T) {
	const kept = `
inventory:
  machines:
  - name: rm-stays
  - name: rm-ready
`
	s := newSite(t, kept+"  - name: rm-gone\n")
	s.startCCM("ccm")
	for _, name := range []string{"rm-stays", "rm-ready", "rm-gone"} {
		createNode(t, nodeSpec{name: name, ready: true})
		waitInitialized(t, name)
	}
	setNodeStatus(t, "rm-gone", false, nil)
	setNodeStatus(t, "rm-stays", false, nil)
	// Removed, then put back within the grace: nothing happens.
	s.writeConfig(kept)
	time.Sleep(3 * time.Second)
	s.writeConfig(kept + "  - name: rm-gone\n")
	framework.Consistently(t, 12*time.Second, "a removal undone within the grace deletes nothing", nodesAllThere(t, "rm-stays", "rm-ready", "rm-gone"))

	// Removed for good: the NotReady Node goes after the grace, the Ready
	// one whose machine also left stays. Two of three machines at once is
	// more than the default inventory.maxRemovals (10%, at least one)
	// lets go: the config says two are meant.
	s.writeConfig("inventory:\n  maxRemovals: \"2\"\n  machines:\n  - name: rm-stays\n")
	removed := time.Now()
	framework.Consistently(t, 8*time.Second, "no Node is deleted within the grace", nodesAllThere(t, "rm-stays", "rm-ready", "rm-gone"))
	framework.Eventually(t, waitTimeout, "the NotReady Node whose machine left is deleted", func() (bool, string) {
		_, ok := getNode(t, "rm-gone")
		return !ok, "rm-gone still exists"
	})
	t.Logf("rm-gone deleted %s after its machine was removed", time.Since(removed).Round(100*time.Millisecond))
	framework.Consistently(t, 3*time.Second, "the others stay", nodesAllThere(t, "rm-stays", "rm-ready"))
}

// An inventory generator that breaks during a hall's outage drops the
// hall's machines while their Nodes are NotReady: none is deleted (more
// removed than inventory.maxRemovals allows), the CCM says so on its Pod
// and in a metric; the inventory back, nothing is held. Dropped again, a
// person deletes all but one of the Nodes by hand, and the CCM lets the
// last go.
func TestAShrunkInventoryDeletesNoHall(t *testing.T) {
	hall := []string{"hall-a1", "hall-a2", "hall-a3", "hall-a4"}
	full := "inventory:\n  machines:\n  - name: hall-b1\n"
	for _, n := range hall {
		full += "  - name: " + n + "\n"
	}
	const shrunk = "inventory:\n  machines:\n  - name: hall-b1\n"
	s := newSite(t, full)
	ccm := s.startCCM("ccm-hall")
	for _, name := range append([]string{"hall-b1"}, hall...) {
		createNode(t, nodeSpec{name: name, ready: true})
		waitInitialized(t, name)
	}
	for _, name := range hall {
		setNodeStatus(t, name, false, nil)
	}
	s.writeConfig(shrunk)
	framework.Consistently(t, removalWait, "no Node of the hall is deleted", nodesAllThere(t, hall...))
	framework.Eventually(t, waitTimeout, "the CCM says the removals are held", func() (bool, string) {
		body := metrics(t, ccm)
		return strings.Contains(body, "baremetal_inventory_removals_held 4") && len(events(t, "kube-system", "ccm-hall", "InventoryRemovalsHeld")) > 0,
			"no baremetal_inventory_removals_held 4 or no InventoryRemovalsHeld Event"
	})

	s.writeConfig(full)
	framework.Eventually(t, waitTimeout, "nothing held once the inventory is back", func() (bool, string) {
		// A NotReady Node is asked about again within the lifecycle
		// controller's period.
		return strings.Contains(metrics(t, ccm), "baremetal_inventory_removals_held 0"), "still held"
	})
	framework.Consistently(t, 3*time.Second, "and every Node stays", nodesAllThere(t, hall...))

	s.writeConfig(shrunk)
	framework.Consistently(t, removalWait, "held again", nodesAllThere(t, hall...))
	for _, name := range hall[:3] {
		if out, err := suite.Cluster.Kubectl("delete", "node", name); err != nil {
			t.Fatal(out)
		}
	}
	framework.Eventually(t, waitTimeout, "the last of the hall goes once a person deleted the others", func() (bool, string) {
		_, ok := getNode(t, hall[3])
		return !ok, hall[3] + " still exists"
	})
}

// removalWait is past the removal grace (10 s) and a few of the lifecycle
// controller's periods.
const removalWait = 20 * time.Second

func TestOnlyInitialisedNodesAreNextHopsAndRouteTargets(t *testing.T) {
	peer := framework.StartPeer(t)
	const ns = "hops"
	createNamespace(t, ns)
	machines := `
inventory:
  machines:
  - name: hop-known
    addresses: [{type: InternalIP, address: 203.0.113.41}]
  - name: hop-refused
    addresses: [{type: InternalIP, address: 203.0.113.42}]
`
	rest := `loadBalancer:
  # The nodes' addresses are not on this machine: nothing may dial them.
  healthCheck: {enabled: false}
  pools:
  - name: public
    addresses: [192.0.2.0/28]
routes: {}
` + framework.PeerConfig(peer)
	s := &lbSite{site: newSite(t, machines+rest), peer: peer, ns: ns}
	s.startCCM("ccm", "--configure-cloud-routes=true", "--cluster-cidr=10.244.0.0/16", "--route-reconciliation-period=2s")

	kubelet := func(n int) []v1.NodeAddress {
		return []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: fmt.Sprintf("203.0.113.%d", n)}}
	}
	// Its kubelet guesses another address than the inventory's.
	createNode(t, nodeSpec{name: "hop-known", ready: true, addresses: kubelet(141)})
	// Its kubelet was given a --node-ip the inventory does not list.
	refused := framework.KubeletNode("hop-refused", "")
	refused.Annotations = map[string]string{cloudapi.AnnotationAlphaProvidedIPAddr: "203.0.113.142"}
	framework.CreateNodeObject(t, suite.Cluster.Admin, refused, true, kubelet(142))
	// Not in the inventory at all.
	createNode(t, nodeSpec{name: "hop-stray", ready: true, addresses: kubelet(43)})
	for i, name := range []string{"hop-known", "hop-refused", "hop-stray"} {
		setPodCIDR(t, name, fmt.Sprintf("10.244.%d.0/24", 41+i))
	}
	waitInitialized(t, "hop-known")

	createLBService(t, ns, "web", nil)
	vip := framework.WaitIngress(t, suite.Cluster.Admin, ns, "web", 1)[0] + "/32"
	s.waitRoute(vip, "203.0.113.41")
	s.waitRoute("10.244.41.0/24", "203.0.113.41")
	framework.Eventually(t, waitTimeout, "NodeIPNotInInventory on hop-refused", func() (bool, string) {
		return len(events(t, "", "hop-refused", "NodeIPNotInInventory")) > 0, "no Event yet"
	})
	framework.Consistently(t, 5*time.Second, "only the initialised Node is a next hop or a route target, at its inventory address", func() (bool, string) {
		rib, err := peer.RIB("ipv4")
		if err != nil {
			return false, err.Error()
		}
		want := map[string][]string{vip: {"203.0.113.41"}, "10.244.41.0/24": {"203.0.113.41"}}
		for prefix, hops := range rib {
			slices.Sort(hops)
			if w, ok := want[prefix]; !ok || !slices.Equal(hops, w) {
				return false, fmt.Sprintf("the router has %s via %v; RIB %v", prefix, hops, rib)
			}
		}
		return len(rib) == len(want), fmt.Sprintf("RIB %v", rib)
	})
	framework.Eventually(t, waitTimeout, "the stray Node's network is unavailable", func() (bool, string) {
		ok, msg := networkAvailable(t, "hop-stray")
		return !ok && strings.Contains(msg, "NetworkUnavailable=True"), msg
	})
	framework.Eventually(t, waitTimeout, "the refused route is an Event on the stray Node", func() (bool, string) {
		for _, ev := range events(t, "", "hop-stray", "FailedToCreateRoute") {
			if strings.Contains(ev.Message, "not initialised by the cloud") {
				return true, ""
			}
		}
		return false, "no FailedToCreateRoute Event that says why"
	})

	// Its machine is added: it is initialised, then a next hop and a
	// route target at the inventory's address.
	s.writeConfig(machines + "  - name: hop-stray\n    addresses: [{type: InternalIP, address: 203.0.113.143}]\n" + rest)
	waitInitialized(t, "hop-stray")
	s.waitRoute(vip, "203.0.113.143", "203.0.113.41")
	s.waitRoute("10.244.43.0/24", "203.0.113.143")
	framework.Eventually(t, waitTimeout, "the stray Node has its network", func() (bool, string) { return networkAvailable(t, "hop-stray") })
}

func TestConfigBackToLastGoodIsReported(t *testing.T) {
	const good = "inventory:\n  machines:\n  - name: back-1\n"
	s := newSite(t, good)
	ccm := s.startCCM("ccm")
	gauge := func() string {
		for _, l := range strings.Split(metrics(t, ccm), "\n") {
			if strings.HasPrefix(l, "baremetal_cloud_config_last_load_successful ") {
				return strings.TrimPrefix(l, "baremetal_cloud_config_last_load_successful ")
			}
		}
		return "absent"
	}
	s.writeConfig("inventory:\n  machines:\n  - name: back-1\n    powerState: sleeping\n")
	framework.Eventually(t, waitTimeout, "the bad edit sets the metric to 0", func() (bool, string) { return gauge() == "0", gauge() })
	s.writeConfig(good)
	framework.Eventually(t, waitTimeout, "the good bytes again set it to 1", func() (bool, string) { return gauge() == "1", gauge() })
	if !ccm.LogContains("Cloud config is back to the config in force") {
		t.Errorf("going back to the config in force is not logged")
	}
}
