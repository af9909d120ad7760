package cluster

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/test/framework"
)

// The CCM as the README's Helm section installs it: helm install of
// deploy/chart with the cloud config inline, over the rights and policy
// the plain manifests left (--take-ownership --force-conflicts, as the
// README tells a site moving to the chart: kubectl apply owns the fields
// of the finalizer policy's atomic matchConstraints, as the API server
// defaulted them, so Helm's server-side apply conflicts with it). A worker that joins then is initialised by it; helm
// uninstall removes it.
func TestCCMFromTheHelmChart(t *testing.T) {
	cut := strings.LastIndex(ccmImageName, ":")
	values := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(values, []byte("cloudConfig:\n  inline: |\n    "+strings.ReplaceAll(strings.TrimSpace(lab.CloudConfig()), "\n", "\n    ")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	helm := func(args ...string) {
		t.Helper()
		if out, err := framework.Helm(t, lab.Kubeconfig, args...); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
	}
	if err := lab.InstallPrerequisites(); err != nil {
		t.Fatal(err)
	}
	// One control-plane node: one replica.
	helm("install", "baremetal-cloud-controller-manager", "deploy/chart/baremetal-cloud-controller-manager",
		"--namespace", "kube-system", "--take-ownership", "--force-conflicts", "--values", values,
		"--set", "image.repository="+ccmImageName[:cut]+",image.tag="+ccmImageName[cut+1:]+",replicaCount=1")
	t.Cleanup(func() {
		helm("uninstall", "baremetal-cloud-controller-manager", "--namespace", "kube-system", "--wait")
		if err := lab.WaitCCMPodsGone(); err != nil {
			t.Error(err)
		}
		// The rights and the policy go with the release; the tests after
		// this one apply them again.
	})

	w, err := lab.AddWorker()
	if err != nil {
		t.Fatal(err)
	}
	registeredUninitialised(t, w.Name)
	nodesInitialised(t, w.Name)
	noForbidden(t, ccmLogs(t, "baremetal-cloud-controller-manager-"))
}
