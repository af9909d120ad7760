package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/test/framework"
	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/test/framework/redfish"
)

var (
	bmcMachines = flag.Int("bmc-machines", 1000, "machines with a BMC in the power scenario")
	ipmiSims    = flag.Int("ipmi-sims", 50, "ipmi_sim BMCs the power scenario's IPMI machines share (each takes a few sessions at once)")
	powerProtos = flag.String("power-protocols", "redfish,ipmi", "the protocols the power scenario measures")
	powerWindow = flag.Duration("power-window", 30*time.Second, "how long the power scenario measures each case")
)

// powerScenarios measures what asking BMCs costs the CCM at
// --bmc-machines, for each protocol, in the two cases a site meets: every
// machine asked in the background (a session a question) and every Node
// NotReady (sessions kept). The intervals are squeezed to 10 s so that a
// window holds many questions; the CPU per question is what scales to the
// shipped intervals.
func (b *bench) powerScenarios(run int) error {
	for _, protocol := range strings.Split(*powerProtos, ",") {
		if err := b.powerScenario(run, protocol); err != nil {
			return fmt.Errorf("power over %s: %w", protocol, err)
		}
	}
	return nil
}

func (b *bench) powerScenario(run int, protocol string) error {
	n := *bmcMachines
	dir := filepath.Join(b.dir, fmt.Sprintf("power-%s-%d", protocol, run))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	// Where machine i's BMC answers, with its credential files.
	bmc := make([]string, n)
	switch protocol {
	case "redfish":
		rf, err := redfish.New(dir)
		if err != nil {
			return err
		}
		defer rf.Close()
		user, pass := filepath.Join(dir, "user"), filepath.Join(dir, "pass")
		os.WriteFile(user, []byte(rf.Username), 0o600)
		os.WriteFile(pass, []byte(rf.Password), 0o600)
		for i := range bmc {
			bmc[i] = fmt.Sprintf("{protocol: redfish, address: %q, usernameFile: %s, passwordFile: %s, tls: {caFile: %s}}", rf.URL, user, pass, rf.CAFile)
		}
	case "ipmi":
		sims := make([]string, *ipmiSims)
		for j := range sims {
			port, err := framework.FreePort()
			if err != nil {
				return err
			}
			sim, err := framework.NewIPMISim(dir, fmt.Sprintf("sim%d", j), nil, "127.0.0.1", port)
			if err != nil {
				return err
			}
			defer sim.Stop()
			user, pass, err := sim.WriteCredentialsTo(dir)
			if err != nil {
				return err
			}
			sims[j] = fmt.Sprintf("{protocol: ipmi, address: %q, usernameFile: %s, passwordFile: %s}", sim.Addr, user, pass)
		}
		for i := range bmc {
			bmc[i] = sims[i%len(sims)]
		}
	}
	prefix := fmt.Sprintf("pw%s%d", protocol[:1], run)
	var machines strings.Builder
	fmt.Fprintf(&machines, "inventory:\n  unlistedNodes: allow\n  powerChecks: {interval: 10s, backgroundInterval: 10s, timeout: 5s}\n  machines:\n")
	for i := range n {
		fmt.Fprintf(&machines, "  - name: %s-%d\n    bmc: %s\n", prefix, i, bmc[i])
	}
	cfg, err := b.config("")
	if err != nil {
		return err
	}
	text, err := os.ReadFile(cfg)
	if err != nil {
		return err
	}
	withBMCs := strings.Replace(string(text), "inventory:\n  unlistedNodes: allow\n", machines.String(), 1)
	if err := os.WriteFile(cfg, []byte(withBMCs), 0o644); err != nil {
		return err
	}
	ccm, err := b.startCCM(fmt.Sprintf("ccm-power-%s-%d", protocol, run), cfg)
	if err != nil {
		return err
	}
	defer ccm.Stop()
	metric := func(name string) float64 {
		m, err := b.cluster.AdminGet(ccm, "/metrics", time.Minute)
		if err != nil {
			return -1
		}
		v, _ := metricValue(string(m), name)
		return v
	}
	questions := func() float64 {
		return metric(fmt.Sprintf(`baremetal_bmc_requests_total{protocol=%q,result="success"}`, protocol))
	}
	failures := func() float64 {
		return metric(fmt.Sprintf(`baremetal_bmc_requests_total{protocol=%q,result="failure"}`, protocol))
	}
	measure := func(what string) error {
		q0, f0 := questions(), failures()
		cpu0, err := cpuSeconds(ccm.PID())
		if err != nil {
			return err
		}
		time.Sleep(*powerWindow)
		q1, f1 := questions(), failures()
		cpu1, err := cpuSeconds(ccm.PID())
		if err != nil {
			return err
		}
		scenario := fmt.Sprintf("power/%s/%s/%d", protocol, what, n)
		perSecond := (q1 - q0) / powerWindow.Seconds()
		b.record(scenario, "questions answered per second", "1/s", perSecond)
		b.record(scenario, "questions failed per second", "1/s", (f1-f0)/powerWindow.Seconds())
		b.record(scenario, "CCM CPU", "cores", (cpu1-cpu0)/powerWindow.Seconds())
		if perSecond > 0 {
			b.record(scenario, "CPU per question", "ms", (cpu1-cpu0)/(q1-q0)*1000)
		}
		return nil
	}
	// The background: no Node, so no machine is watched; the first
	// questions spread over the 10 s interval.
	if err := waitFor(time.Minute, func() bool { return questions() >= float64(n) }); err != nil {
		return fmt.Errorf("every BMC asked once (%.0f answered, %.0f failed; log %s): %w", questions(), failures(), ccm.LogPath(), err)
	}
	if err := measure("background"); err != nil {
		return err
	}
	// Every Node NotReady: every machine watched, its session kept.
	fast := b.fastClient()
	if err := framework.Parallel(n, 32, func(i int) error {
		return registerNode(fast, fmt.Sprintf("%s-%d", prefix, i), nodeIP(i), false)
	}); err != nil {
		return err
	}
	defer b.deleteNodes(prefix, n)
	time.Sleep(15 * time.Second) // every machine watched, and asked once
	return measure("all-notready")
}
