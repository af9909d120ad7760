package integration

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/test/framework"
)

// TestManifestsApply applies everything in deploy/ to the real API server,
// the way the README says to.
func TestManifestsApply(t *testing.T) {
	deploy := filepath.Join(framework.RepoRoot(), "deploy")
	// rbac.yaml and load-balancer-finalizer.yaml were applied by TestMain; applying again must be clean too.
	// The static pod's rights, then the plain ones again: the suite's CCMs
	// run with deploy/rbac.yaml's.
	files := []string{"rbac.yaml", "load-balancer-finalizer.yaml", "deployment.yaml", "static-pod-rbac.yaml", "static-pod.yaml", "rbac.yaml"}
	if !suite.Cluster.HasFinalizerPolicy() {
		// install.md: before 1.36 the policy is left out, and the API
		// server refuses it by its kind.
		files = slices.DeleteFunc(files, func(f string) bool { return f == "load-balancer-finalizer.yaml" })
		if _, err := suite.Cluster.Kubectl("apply", "-f", filepath.Join(deploy, "load-balancer-finalizer.yaml")); err == nil || !strings.Contains(err.Error(), "MutatingAdmissionPolicy") {
			t.Errorf("applying deploy/load-balancer-finalizer.yaml before 1.36: %v, want a refusal naming MutatingAdmissionPolicy", err)
		}
	}
	for _, f := range files {
		if out, err := suite.Cluster.Kubectl("apply", "-f", filepath.Join(deploy, f)); err != nil {
			t.Errorf("applying deploy/%s: %v", f, err)
		} else {
			t.Logf("deploy/%s: %s", f, strings.TrimSpace(out))
		}
	}
	cm, err := suite.Cluster.Kubectl("-n", "kube-system", "create", "configmap", "baremetal-cloud-config",
		"--from-file=cloud.yaml="+filepath.Join(deploy, "cloud-config.example.yaml"), "--dry-run=client", "-o", "yaml")
	if err != nil {
		t.Fatal(err)
	}
	apply := exec.Command(filepath.Join(framework.ToolsBin(), "kubectl"), "--kubeconfig", suite.Cluster.AdminKubeconfig, "apply", "-f", "-")
	apply.Stdin = strings.NewReader(cm)
	if out, err := apply.CombinedOutput(); err != nil {
		t.Errorf("applying the example cloud config as a ConfigMap: %v\n%s", err, out)
	}
	ctx := context.Background()
	d, err := suite.Cluster.Admin.AppsV1().Deployments("kube-system").Get(ctx, "baremetal-cloud-controller-manager", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if *d.Spec.Replicas != 2 || !d.Spec.Template.Spec.HostNetwork || d.Spec.Template.Spec.ServiceAccountName != "baremetal-cloud-controller-manager" {
		t.Errorf("the Deployment is not two host-network replicas as the ServiceAccount: %+v", d.Spec)
	}
	checkLockedDown := func(what string, spec corev1.PodSpec) {
		t.Helper()
		if spec.SecurityContext == nil || spec.SecurityContext.RunAsNonRoot == nil || !*spec.SecurityContext.RunAsNonRoot {
			t.Errorf("%s does not require a non-root user", what)
		}
		for _, c := range spec.Containers {
			sc := c.SecurityContext
			switch {
			case sc == nil:
				t.Errorf("%s container %s has no securityContext", what, c.Name)
			case sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem:
				t.Errorf("%s container %s has a writable root filesystem", what, c.Name)
			case sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation:
				t.Errorf("%s container %s allows privilege escalation", what, c.Name)
			case sc.Capabilities == nil || len(sc.Capabilities.Add) > 0 || len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL":
				t.Errorf("%s container %s must drop ALL capabilities and add none: %+v", what, c.Name, sc.Capabilities)
			}
		}
	}
	checkLockedDown("the Deployment", d.Spec.Template.Spec)
	checkMemory(t, "the Deployment", d.Spec.Template.Spec)
	checkLayer2Patch(t, filepath.Join(deploy, "l2-patch.yaml"))
	pod, err := suite.Cluster.Admin.CoreV1().Pods("kube-system").Get(ctx, "baremetal-cloud-controller-manager", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if want := framework.ShippedImage(); pod.Spec.Containers[0].Image != want || d.Spec.Template.Spec.Containers[0].Image != want {
		t.Errorf("deploy/ runs %s (static pod) and %s (Deployment), want the chart's image of its appVersion, %s",
			pod.Spec.Containers[0].Image, d.Spec.Template.Spec.Containers[0].Image, want)
	}
	checkLockedDown("the static pod", pod.Spec)
	checkMemory(t, "the static pod", pod.Spec)
	if pod.Spec.Priority == nil || *pod.Spec.Priority < 2000000000 {
		t.Errorf("the static pod did not get a system-critical priority: %v", pod.Spec.Priority)
	}
	t.Cleanup(func() {
		suite.Cluster.Kubectl("delete", "-f", filepath.Join(deploy, "deployment.yaml"), "-f", filepath.Join(deploy, "static-pod.yaml"))
		suite.Cluster.Kubectl("-n", "kube-system", "delete", "configmap", "baremetal-cloud-config")
	})

	for _, f := range []string{"init.yaml", "join.yaml"} {
		cmd := exec.Command(filepath.Join(framework.ToolsBin(), "kubeadm"), "config", "validate", "--config", filepath.Join(deploy, "kubeadm", f))
		out, err := cmd.CombinedOutput()
		if err != nil || strings.Contains(string(out), "WARNING") {
			t.Errorf("kubeadm config validate deploy/kubeadm/%s: %v\n%s", f, err, out)
		}
		if !strings.Contains(readFile(t, filepath.Join(deploy, "kubeadm", f)), "value: external") {
			t.Errorf("deploy/kubeadm/%s does not run the kubelet with --cloud-provider=external", f)
		}
	}
}

// checkLayer2Patch applies deploy/l2-patch.yaml as the README says, on a
// server-side dry run: the container runs as root with NET_RAW and no other
// capability, and stays otherwise locked down.
func checkLayer2Patch(t *testing.T, patch string) {
	t.Helper()
	out, err := suite.Cluster.Kubectl("-n", "kube-system", "patch", "deployment", "baremetal-cloud-controller-manager",
		"--patch-file", patch, "--dry-run=server", "-o", "json")
	if err != nil {
		t.Fatalf("patching the Deployment with deploy/l2-patch.yaml: %v\n%s", err, out)
	}
	var d appsv1.Deployment
	if err := json.Unmarshal([]byte(out), &d); err != nil {
		t.Fatal(err)
	}
	checkLayer2Pod(t, "with deploy/l2-patch.yaml", d.Spec.Template.Spec)
}

// checkLayer2Pod: root with NET_RAW and no other capability, otherwise as
// locked down as without layer 2.
func checkLayer2Pod(t *testing.T, what string, spec corev1.PodSpec) {
	t.Helper()
	if sc := spec.SecurityContext; sc == nil || sc.RunAsUser == nil || *sc.RunAsUser != 0 {
		t.Errorf("%s the Pod does not run as root: %+v", what, spec.SecurityContext)
	}
	c := spec.Containers[0]
	if caps := c.SecurityContext.Capabilities; caps == nil || !slices.Equal(caps.Add, []corev1.Capability{"NET_RAW"}) || !slices.Equal(caps.Drop, []corev1.Capability{"ALL"}) {
		t.Errorf("%s the capabilities are %+v, want NET_RAW alone", what, caps)
	}
	if !*c.SecurityContext.ReadOnlyRootFilesystem || *c.SecurityContext.AllowPrivilegeEscalation || len(spec.Containers) != 1 {
		t.Errorf("%s more was loosened than the user and NET_RAW: %+v", what, c.SecurityContext)
	}
}

// peakAtTwiceBench is the CCM's peak RSS measured by `make bench` at twice
// its size (BENCHFLAGS="--services=2000 --nodes=100"), and fileBacked the
// part of it that is the binary's pages, which GOMEMLIMIT does not count.
const (
	peakAtTwiceBench = 298 << 20
	fileBacked       = 64 << 20
)

// checkMemory holds the shipped memory limit to the measurement: room for
// twice the benchmark's size, and a Go soft limit (GOMEMLIMIT) that leaves
// the binary's pages inside the limit.
func checkMemory(t *testing.T, what string, spec corev1.PodSpec) {
	t.Helper()
	for _, c := range spec.Containers {
		limit, ok := c.Resources.Limits[corev1.ResourceMemory]
		if !ok {
			t.Errorf("%s container %s has no memory limit", what, c.Name)
			continue
		}
		if limit.Value() < peakAtTwiceBench {
			t.Errorf("%s container %s: memory limit %s is below the peak measured at twice the benchmark's size (%d MiB)", what, c.Name, limit.String(), peakAtTwiceBench>>20)
		}
		soft := int64(-1)
		for _, e := range c.Env {
			if mib, found := strings.CutSuffix(e.Value, "MiB"); e.Name == "GOMEMLIMIT" && found {
				if n, err := strconv.ParseInt(mib, 10, 64); err == nil {
					soft = n << 20
				}
			}
		}
		switch {
		case soft < 0:
			t.Errorf("%s container %s sets no GOMEMLIMIT in MiB", what, c.Name)
		case soft+fileBacked > limit.Value():
			t.Errorf("%s container %s: GOMEMLIMIT %d MiB and the binary's %d MiB exceed the limit %s", what, c.Name, soft>>20, fileBacked>>20, limit.String())
		case soft < peakAtTwiceBench-fileBacked:
			t.Errorf("%s container %s: GOMEMLIMIT %d MiB is below what twice the benchmark's size needs (%d MiB)", what, c.Name, soft>>20, (peakAtTwiceBench-fileBacked)>>20)
		}
	}
}

// TestRightsAreLeastPrivilege: deploy/ grants what the CCM uses and no
// more (the whole suite runs its CCMs with deploy/rbac.yaml's rights, and
// fails on any refusal). Nothing writes Endpoints: write rights to them
// cluster-wide let a stolen token redirect selectorless Services
// (CVE-2021-25740). Only the static pod's manifest binds its user.
func TestRightsAreLeastPrivilege(t *testing.T) {
	type rule struct {
		Resources []string `json:"resources"`
		Verbs     []string `json:"verbs"`
	}
	type object struct {
		Kind     string `json:"kind"`
		Rules    []rule `json:"rules"`
		Subjects []struct {
			Kind string `json:"kind"`
			Name string `json:"name"`
		} `json:"subjects"`
	}
	read := func(f string) []object {
		data, err := os.ReadFile(filepath.Join(framework.RepoRoot(), "deploy", f))
		if err != nil {
			t.Fatal(err)
		}
		var out []object
		for _, doc := range strings.Split(string(data), "\n---") {
			var o object
			if err := yaml.Unmarshal([]byte(doc), &o); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if o.Kind != "" {
				out = append(out, o)
			}
		}
		return out
	}
	users := func(objs []object) (bindings, withUser int) {
		for _, o := range objs {
			if !strings.HasSuffix(o.Kind, "Binding") {
				continue
			}
			bindings++
			for _, s := range o.Subjects {
				if s.Kind == "User" && s.Name == "system:cloud-controller-manager" {
					withUser++
				}
			}
		}
		return
	}
	plain := read("rbac.yaml")
	for _, o := range plain {
		for _, r := range o.Rules {
			for _, res := range r.Resources {
				if res == "endpoints" || res == "serviceaccounts" || res == "*" {
					t.Errorf("%s grants %v on %s", o.Kind, r.Verbs, res)
				}
			}
			if slices.Contains(r.Verbs, "*") {
				t.Errorf("%s grants every verb on %v", o.Kind, r.Resources)
			}
		}
	}
	if b, u := users(plain); b == 0 || u != 0 {
		t.Errorf("deploy/rbac.yaml: %d bindings, %d of them to the static pod's user; want none to it", b, u)
	}
	if b, u := users(read("static-pod-rbac.yaml")); b == 0 || u != b {
		t.Errorf("deploy/static-pod-rbac.yaml: %d bindings, %d of them to the static pod's user; want all", b, u)
	}
}
