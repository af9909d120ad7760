package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/config"
	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/test/framework"
)

// TestNodeRelabelledToAnotherRack runs the leaf-spine site with each ToR's
// nodeSelector on a Node label the site sets (as MetalLB's sites label
// Nodes by rack), not the inventory's zone. A node relabelled into the
// other rack leaves its ToR's route and is sent to the other ToR, without
// any change to a Service (the upstream service controller does not
// resync on a Node's labels; the CCM's own table follows them). The other
// ToR's next-hop filter drops the path, as it drops any next hop outside
// its rack: its log shows it was sent.
func TestNodeRelabelledToAnotherRack(t *testing.T) {
	const key = config.NodeRestrictionPrefix + "rack"
	site := newLeafSpine(t, "rl", "relabel", func(cfg string) string {
		for _, rack := range []string{"rack1", "rack2"} {
			cfg = strings.Replace(cfg, "matchLabels: {topology.kubernetes.io/zone: "+rack+"}", "matchLabels: {"+key+": "+rack+"}", 1)
		}
		if !strings.Contains(cfg, key) {
			t.Fatal("the page's peers select no zone")
		}
		return cfg
	})
	racks, tors := site.racks, site.tors
	label := func(n *node, rack string) {
		t.Helper()
		patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]string{key: rack}}})
		if _, err := cluster.Admin.CoreV1().Nodes().Patch(context.Background(), n.name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for r, rk := range racks {
		for _, n := range rk.nodes {
			label(n, fmt.Sprintf("rack%d", r+1))
		}
	}
	site.carrying("each ToR has the VIP via the nodes labelled with its rack", map[*rack][]*node{racks[0]: racks[0].nodes, racks[1]: racks[1].nodes})
	moved := racks[0].nodes[0]
	if out, err := tors[racks[1]].Vtysh("configure terminal", "log stdout debugging", "end", "debug bgp updates in"); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	from := len(tors[racks[1]].BgpdLogs())
	label(moved, "rack2")
	site.carrying(moved.name+" relabelled rack2: it leaves rack 1's ToR", map[*rack][]*node{racks[0]: racks[0].nodes[1:], racks[1]: racks[1].nodes})
	framework.Eventually(t, 30*time.Second, "rack 2's ToR sent the VIP via "+moved.name, func() (bool, string) {
		logs := tors[racks[1]].BgpdLogs()[from:]
		for _, line := range strings.Split(logs, "\n") {
			if strings.Contains(line, " rcvd UPDATE w/ attr: nexthop "+moved.ip+",") {
				return true, ""
			}
		}
		return false, "no UPDATE via " + moved.ip + " in the ToR's log:\n" + framework.Tail(logs, 20)
	})
	label(moved, "rack1")
	site.carrying(moved.name+" back in rack1", map[*rack][]*node{racks[0]: racks[0].nodes, racks[1]: racks[1].nodes})
}
