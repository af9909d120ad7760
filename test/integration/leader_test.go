package integration

import (
	"testing"
	"time"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/test/framework"
)

func TestLeaderFailover(t *testing.T) {
	s := newSite(t, `
inventory:
  machines:
  - name: ha-1
  - name: ha-2
`)
	first := s.startCCM("ccm-a")
	second := s.startReplica("ccm-b")
	createNode(t, nodeSpec{name: "ha-1", ready: true})
	waitInitialized(t, "ha-1")

	framework.Consistently(t, 3*time.Second, "the second replica waits while the first leads", func() (bool, string) {
		return !second.LogContains("Successfully acquired lease"), "both replicas lead"
	})
	if !second.LogContains("Attempting to acquire leader lease") {
		t.Errorf("the second replica does not say it waits for the lease")
	}

	first.Kill()
	start := time.Now()
	s.waitLeader(second)
	t.Logf("the second replica took over %s after the leader was killed", time.Since(start).Round(100*time.Millisecond))

	createNode(t, nodeSpec{name: "ha-2", ready: true})
	n := waitInitialized(t, "ha-2")
	if n.Spec.ProviderID != "baremetal://ha-2" {
		t.Errorf("the new leader initialised ha-2 with provider ID %q", n.Spec.ProviderID)
	}
}

// Every replica says what it finds on its own Pod, the standbys too: each
// reads the config and announces, so each has its own troubles to tell.
func TestStandbyReportsOnItsOwnPod(t *testing.T) {
	s := newSite(t, "inventory:\n  machines:\n  - name: ev-1\n")
	s.startCCM("ev-a")
	standby := s.startReplica("ev-b")
	framework.Eventually(t, waitTimeout, "ev-b waits for the lease", func() (bool, string) {
		return standby.LogContains("Attempting to acquire leader lease"), "not yet"
	})
	s.writeConfig("inventory:\n  machines:\n  - name: ev-1\n    adresses: []\n")
	for _, pod := range []string{"ev-a", "ev-b"} {
		framework.Eventually(t, waitTimeout, pod+" says the config is invalid on its Pod", func() (bool, string) {
			return len(events(t, "kube-system", pod, "InvalidCloudConfig")) > 0, "no InvalidCloudConfig Event"
		})
	}
}
