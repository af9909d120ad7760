package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	cloudapi "k8s.io/cloud-provider/api"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/test/framework"
	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/test/framework/redfish"
)

// TestPowerFromBMCs runs the real binary against real BMCs: OpenIPMI's
// ipmi_sim over IPMI v2.0 LAN, and the Redfish stand-in. Every Node goes
// NotReady, as a dead or unreachable machine's does; then:
//   - pw-off's chassis is powered off: the Node gets the shutdown taint
//     (InstanceShutdown from the BMC) and, after the grace period, the
//     out-of-service taint; powered on and Ready, both go;
//   - pw-dark's BMC stops answering: "unknown", an Event, no taint ever;
//   - pw-on's BMC says on: unresponsive, not shut down, no taint;
//   - pw-redfish's system is Off, then On and Ready again.
func TestPowerFromBMCs(t *testing.T) {
	dir := t.TempDir()
	sims := map[string]*framework.IPMISim{}
	machines := ""
	for _, name := range []string{"pw-off", "pw-dark", "pw-on"} {
		sim := framework.StartIPMISim(t, name)
		sims[name] = sim
		user, pass := sim.WriteCredentials(t, dir)
		machines += fmt.Sprintf("  - name: %s\n    bmc: {protocol: ipmi, address: %q, usernameFile: %s, passwordFile: %s}\n", name, sim.Addr, user, pass)
	}
	rf, err := redfish.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer rf.Close()
	rfUser, rfPass := writeSecret(t, dir, "rf-user", rf.Username), writeSecret(t, dir, "rf-pass", rf.Password)
	machines += fmt.Sprintf("  - name: pw-redfish\n    bmc: {protocol: redfish, address: %q, usernameFile: %s, passwordFile: %s, tls: {caFile: %s}}\n", rf.URL, rfUser, rfPass, rf.CAFile)

	s := newSite(t, "inventory:\n  powerChecks: {interval: 1s, backgroundInterval: 2s, timeout: 900ms}\n  outOfService: {enabled: true, gracePeriod: 3s}\n  machines:\n"+machines)
	ccm := s.startCCM("ccm")
	names := []string{"pw-off", "pw-dark", "pw-on", "pw-redfish"}
	for _, name := range names {
		createNode(t, nodeSpec{name: name, ready: true})
		waitInitialized(t, name)
	}
	framework.Eventually(t, waitTimeout, "every BMC answered on", func() (bool, string) {
		m := suite.Metrics(t, ccm)
		for _, name := range names {
			if !strings.Contains(m, fmt.Sprintf(`baremetal_bmc_power_state{machine=%q,state="on"} 1`, name)) {
				return false, name + " not on yet:\n" + grepLines(m, "baremetal_bmc_power_state")
			}
		}
		return true, ""
	})

	// A login and a question to a BMC on the same host take milliseconds
	// (up to 0.5 s on two busy cores): none may wait on a step the BMC
	// does not answer, which costs a whole timeout (the cipher-suite
	// probe's made a login 3.3 s).
	if m := suite.Metrics(t, ccm); metricLine(m, `baremetal_bmc_request_duration_seconds_bucket{protocol="ipmi",le="1"}`) != metricLine(m, `baremetal_bmc_request_duration_seconds_count{protocol="ipmi"}`) {
		t.Errorf("IPMI questions over 1s:\n%s", grepLines(m, `baremetal_bmc_request_duration_seconds`))
	}

	sims["pw-dark"].Stop()
	sims["pw-off"].SetPower(false)
	rf.SetPower("Off")
	offAt := time.Now()
	for _, name := range names {
		setNodeStatus(t, name, false, nil)
	}
	for _, name := range []string{"pw-off", "pw-redfish"} {
		framework.Eventually(t, waitTimeout, name+" has the shutdown and out-of-service taints", func() (bool, string) {
			n, _ := getNode(t, name)
			return n != nil && hasTaint(n, cloudapi.TaintNodeShutdown) && hasTaint(n, v1.TaintNodeOutOfService), fmt.Sprintf("taints %v", n.Spec.Taints)
		})
	}
	if took := time.Since(offAt); took < 3*time.Second {
		t.Errorf("the out-of-service taint came %s after the power went, within the 3s grace period", took)
	}
	n, _ := getNode(t, "pw-off")
	for _, taint := range n.Spec.Taints {
		if taint.Key == v1.TaintNodeOutOfService && (taint.Value != "nodeshutdown" || taint.Effect != v1.TaintEffectNoExecute) {
			t.Errorf("taint %v, want node.kubernetes.io/out-of-service=nodeshutdown:NoExecute", taint)
		}
	}
	for _, reason := range []string{"PowerOff", "OutOfServiceTaintAdded"} {
		if len(events(t, "", "pw-off", reason)) == 0 {
			t.Errorf("no %s Event on pw-off", reason)
		}
	}
	framework.Eventually(t, waitTimeout, "pw-dark's unknown power is told", func() (bool, string) {
		ev := events(t, "", "pw-dark", "PowerStateUnknown")
		return len(ev) > 0, "no PowerStateUnknown Event on pw-dark"
	})
	if ev := events(t, "", "pw-dark", "PowerStateUnknown"); len(ev) > 0 && !strings.Contains(ev[0].Message, sims["pw-dark"].Addr) {
		t.Errorf("the Event does not name the BMC: %q", ev[0].Message)
	}
	if m := suite.Metrics(t, ccm); !strings.Contains(m, `baremetal_bmc_power_state{machine="pw-dark",state="unknown"} 1`) {
		t.Errorf("pw-dark's metric:\n%s", grepLines(m, "pw-dark"))
	}
	framework.Consistently(t, 5*time.Second, "neither the unreachable nor the powered machine's Node is tainted", func() (bool, string) {
		for _, name := range []string{"pw-dark", "pw-on"} {
			n, _ := getNode(t, name)
			if n == nil || hasTaint(n, cloudapi.TaintNodeShutdown) || hasTaint(n, v1.TaintNodeOutOfService) {
				return false, fmt.Sprintf("%s: %v", name, n.Spec.Taints)
			}
		}
		return true, ""
	})

	// The dashboard's power row and the power alerts, on a real Prometheus
	// scraping this CCM.
	prom := framework.StartPrometheus(t, suite.Cluster, []string{fmt.Sprintf("127.0.0.1:%d", ccm.SecurePort)}, filepath.Join(framework.RepoRoot(), framework.AlertsFile))
	exported := framework.ExportedNames(suite.Metrics(t, ccm))
	if queries := framework.CheckDashboard(t, prom, exported, func(row string) bool { return row == powerRow }); queries < 4 {
		t.Errorf("the power row has %d queries", queries)
	}
	for _, r := range prom.Rules(t) {
		if !powerAlerts[r.Name] {
			continue
		}
		if r.Health != "ok" {
			t.Errorf("alert %s: health %q: %s", r.Name, r.Health, r.LastError)
		}
		for _, name := range framework.MetricNames(r.Query) {
			if !exported[name] {
				t.Errorf("alert %s: %s is not a metric the CCM exports (%s)", r.Name, name, r.Query)
			}
		}
	}
	framework.Eventually(t, waitTimeout, "BaremetalBMCPowerUnknown pending for pw-dark, BaremetalNodeFenced for two", func() (bool, string) {
		states := map[string]string{}
		for _, r := range prom.Rules(t) {
			states[r.Name] = r.State
		}
		return states["BaremetalBMCPowerUnknown"] == "pending" && states["BaremetalNodeFenced"] == "pending", fmt.Sprint(states)
	})

	// Back: power on, the kubelet reports Ready.
	sims["pw-off"].SetPower(true)
	rf.SetPower("On")
	for _, name := range []string{"pw-off", "pw-redfish"} {
		setNodeStatus(t, name, true, nil)
	}
	for _, name := range []string{"pw-off", "pw-redfish"} {
		framework.Eventually(t, waitTimeout, name+"'s taints are gone", func() (bool, string) {
			n, _ := getNode(t, name)
			return n != nil && !hasTaint(n, cloudapi.TaintNodeShutdown) && !hasTaint(n, v1.TaintNodeOutOfService), fmt.Sprintf("taints %v", n.Spec.Taints)
		})
		if len(events(t, "", name, "OutOfServiceTaintRemoved")) == 0 {
			t.Errorf("no OutOfServiceTaintRemoved Event on %s", name)
		}
	}
	if m := suite.Metrics(t, ccm); !strings.Contains(m, "baremetal_out_of_service_nodes 0") || !strings.Contains(m, `baremetal_out_of_service_taint_changes_total{action="add"} 2`) {
		t.Errorf("out-of-service metrics:\n%s", grepLines(m, "baremetal_out_of_service"))
	}
}

// powerRow is the dashboard's row of machines' power; powerAlerts are
// the alerts on it. Both need BMCs: this test checks them.
const powerRow = "Machines' power"

var powerAlerts = map[string]bool{"BaremetalBMCPowerUnknown": true, "BaremetalNodeFenced": true}

func writeSecret(t *testing.T, dir, name, value string) string {
	t.Helper()
	path := dir + "/" + name
	if err := os.WriteFile(path, []byte(value+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// metricLine is the value of the series named exactly so, "" if none.
func metricLine(metrics, series string) string {
	for _, l := range strings.Split(metrics, "\n") {
		if v, ok := strings.CutPrefix(l, series+" "); ok {
			return v
		}
	}
	return ""
}

// grepLines are the lines of s that contain sub.
func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
