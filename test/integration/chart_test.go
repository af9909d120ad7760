package integration

import (
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/test/framework"
)

var chartDir = filepath.Join("deploy", "chart", "baremetal-cloud-controller-manager")

func helm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	return framework.Helm(t, suite.Cluster.AdminKubeconfig, args...)
}

// rendered is one object of a chart's output.
type rendered struct {
	*unstructured.Unstructured
	text string
}

func render(t *testing.T, args ...string) []rendered {
	t.Helper()
	out, err := helm(t, append([]string{"template", "--kube-version", "1.37.2"}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	var objs []rendered
	for _, doc := range strings.Split(out, "\n---\n") {
		u := &unstructured.Unstructured{}
		if err := sigsyaml.Unmarshal([]byte(doc), &u.Object); err != nil {
			t.Fatalf("helm's output: %v\n%s", err, doc)
		}
		if len(u.Object) > 0 {
			objs = append(objs, rendered{u, doc})
		}
	}
	return objs
}

// find is the one object of a kind (and name, if given); typed into into.
func find(t *testing.T, objs []rendered, kind, name string, into any) *unstructured.Unstructured {
	t.Helper()
	var found []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == kind && (name == "" || o.GetName() == name) {
			found = append(found, o.Unstructured)
		}
	}
	if len(found) != 1 {
		t.Fatalf("the chart rendered %d %s %q, want one", len(found), kind, name)
	}
	if into != nil {
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(found[0].Object, into); err != nil {
			t.Fatal(err)
		}
	}
	return found[0]
}

func kinds(objs []rendered) []string {
	var k []string
	for _, o := range objs {
		k = append(k, o.GetKind())
	}
	return k
}

// applyDry applies the chart's output on a server-side dry run: the API
// server validates and admits every object.
func applyDry(t *testing.T, objs []rendered) {
	t.Helper()
	var docs []string
	for _, o := range objs {
		docs = append(docs, o.text)
	}
	cmd := exec.Command(filepath.Join(framework.ToolsBin(), "kubectl"), "--kubeconfig", suite.Cluster.AdminKubeconfig, "apply", "--dry-run=server", "-f", "-")
	cmd.Stdin = strings.NewReader(strings.Join(docs, "\n---\n"))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("applying the chart's output: %v\n%s", err, out)
	}
}

// The Helm chart: it lints, the plain manifests of deploy/ are what it
// renders with its defaults, and with other values it renders objects the
// API server takes, doing what each value says. A real helm install puts
// them in the cluster and helm uninstall takes them away.
func TestHelmChart(t *testing.T) {
	root := framework.RepoRoot()
	example := filepath.Join(root, "deploy", "cloud-config.example.yaml")

	t.Run("lint", func(t *testing.T) {
		for _, values := range [][]string{
			nil,
			{"--set-file", "cloudConfig.inline=" + example},
			{"--set", "layer2=true,cloudConfig.secret=true,metrics.serviceMonitor.enabled=true,metrics.prometheusRule.enabled=true"},
		} {
			if out, err := helm(t, append([]string{"lint", "--strict", chartDir}, values...)...); err != nil {
				t.Errorf("%v\n%s", err, out)
			}
		}
	})

	t.Run("deploy/ is the chart rendered with its defaults", func(t *testing.T) {
		cmd := exec.Command(filepath.Join(root, "hack", "manifests.sh"), "--check")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("hack/manifests.sh --check: %v\n%s", err, out)
		}
	})

	t.Run("inline cloud config, another release name and namespace", func(t *testing.T) {
		objs := render(t, "ccm", chartDir, "--namespace", "ccm-system", "--set-file", "cloudConfig.inline="+example,
			"--set", "image.tag=v9.9.9,replicaCount=3", "--set-json", `extraArgs=["--kube-api-qps=50"]`)
		const name = "ccm-baremetal-cloud-controller-manager"
		var cm corev1.ConfigMap
		find(t, objs, "ConfigMap", "baremetal-cloud-config", &cm)
		if cm.Namespace != "ccm-system" || cm.Data["cloud.yaml"] != strings.TrimRight(readFile(t, example), "\n")+"\n" {
			t.Errorf("the cloud config ConfigMap is not the inline config in ccm-system: %s/%s %q", cm.Namespace, cm.Name, cm.Data["cloud.yaml"])
		}
		var d appsv1.Deployment
		find(t, objs, "Deployment", name, &d)
		c := d.Spec.Template.Spec.Containers[0]
		if *d.Spec.Replicas != 3 || !strings.HasSuffix(c.Image, ":v9.9.9") || !slices.Contains(c.Args, "--kube-api-qps=50") ||
			d.Spec.Template.Spec.ServiceAccountName != name || d.Spec.Template.Spec.Volumes[0].ConfigMap.Name != "baremetal-cloud-config" {
			t.Errorf("the Deployment does not follow the values: replicas %d, image %s, args %v, serviceAccount %s",
				*d.Spec.Replicas, c.Image, c.Args, d.Spec.Template.Spec.ServiceAccountName)
		}
		var binding rbacv1.RoleBinding
		find(t, objs, "RoleBinding", name+":leader-election", &binding)
		if binding.Namespace != "kube-system" || binding.Subjects[0].Namespace != "ccm-system" || binding.Subjects[0].Name != name {
			t.Errorf("leader election's RoleBinding must be in kube-system (the Lease's) for the ServiceAccount in ccm-system: %+v", binding)
		}
		framework.CreateNamespace(t, suite.Cluster.Admin, "ccm-system")
		applyDry(t, objs)
	})

	t.Run("layer 2, a Secret, monitoring on, no finalizer policy", func(t *testing.T) {
		installMonitoringCRDs(t)
		objs := render(t, "baremetal-cloud-controller-manager", chartDir, "--namespace", "kube-system",
			"--set", "layer2=true,cloudConfig.secret=true,loadBalancerFinalizerPolicy=false,metrics.serviceMonitor.enabled=true,metrics.prometheusRule.enabled=true")
		if slices.Contains(kinds(objs), "MutatingAdmissionPolicy") || slices.Contains(kinds(objs), "ConfigMap") {
			t.Errorf("rendered %v: no finalizer policy and no ConfigMap asked for", kinds(objs))
		}
		var d appsv1.Deployment
		find(t, objs, "Deployment", "", &d)
		checkLayer2Pod(t, "with layer2=true", d.Spec.Template.Spec)
		if v := d.Spec.Template.Spec.Volumes[0]; v.Secret == nil || v.Secret.SecretName != "baremetal-cloud-config" {
			t.Errorf("the cloud config volume is %+v, want the Secret baremetal-cloud-config", v)
		}
		var svc corev1.Service
		find(t, objs, "Service", "", &svc)
		monitor := find(t, objs, "ServiceMonitor", "", nil)
		selector, _, _ := unstructured.NestedStringMap(monitor.Object, "spec", "selector", "matchLabels")
		for k, v := range selector {
			if svc.Labels[k] != v {
				t.Errorf("the ServiceMonitor selects %v; the metrics Service has %v", selector, svc.Labels)
			}
		}
		rule := find(t, objs, "PrometheusRule", "", nil)
		groups, _, _ := unstructured.NestedSlice(rule.Object, "spec", "groups")
		var fileRules struct {
			Groups []struct{ Rules []struct{ Alert string } }
		}
		if err := sigsyaml.Unmarshal([]byte(readFile(t, filepath.Join(root, framework.AlertsFile))), &fileRules); err != nil {
			t.Fatal(err)
		}
		if len(groups) != 1 || len(fileRules.Groups) != 1 {
			t.Fatalf("PrometheusRule groups %v", groups)
		}
		rules, _, _ := unstructured.NestedSlice(groups[0].(map[string]any), "rules")
		if len(rules) != len(fileRules.Groups[0].Rules) || len(rules) == 0 {
			t.Errorf("the PrometheusRule has %d rules, %s has %d", len(rules), framework.AlertsFile, len(fileRules.Groups[0].Rules))
		}
		applyDry(t, objs)
	})

	t.Run("a misspelt or mistyped value is refused by name", func(t *testing.T) {
		for set, want := range map[string]string{
			"replicas=3":               "additional properties 'replicas' not allowed",
			"replicaCount=two":         "/replicaCount': got string, want integer",
			"cloudConfig.secrets=true": "at '/cloudConfig': additional properties 'secrets' not allowed",
		} {
			_, err := helm(t, "template", chartDir, "--set", set)
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("helm template --set %s: %v, want an error with %q", set, err, want)
			}
		}
	})

	t.Run("beside another implementation: its class only, the finalizer for it only", func(t *testing.T) {
		const class = "example.com/baremetal"
		objs := render(t, "ccm", chartDir, "--namespace", "ccm-system", "--set-file", "cloudConfig.inline="+example,
			"--set", "loadBalancerClass="+class+",ignoreClassLessServices=true")
		var d appsv1.Deployment
		find(t, objs, "Deployment", "", &d)
		args := d.Spec.Template.Spec.Containers[0].Args
		for _, want := range []string{"--load-balancer-class=" + class, "--ignore-class-less-services"} {
			if !slices.Contains(args, want) {
				t.Errorf("the CCM's args %v lack %s", args, want)
			}
		}
		policy := find(t, objs, "MutatingAdmissionPolicy", "", nil)
		conds, _, _ := unstructured.NestedSlice(policy.Object, "spec", "matchConditions")
		expr := ""
		for _, c := range conds {
			if c.(map[string]any)["name"] == "served-by-this-ccm" {
				expr = c.(map[string]any)["expression"].(string)
			}
		}
		if !strings.Contains(expr, "has(object.spec.loadBalancerClass) &&") || !strings.Contains(expr, "'"+class+"'") || strings.Contains(expr, "!has(") {
			t.Errorf("the finalizer policy's condition %q does not take exactly the Services of %s", expr, class)
		}
		applyDry(t, objs)
		if _, err := helm(t, "template", chartDir, "--set", "ignoreClassLessServices=true"); err == nil || !strings.Contains(err.Error(), "set loadBalancerClass too") {
			t.Errorf("ignoreClassLessServices without a class: %v, want an error naming loadBalancerClass", err)
		}
	})

	t.Run("an inline config cannot go into a Secret", func(t *testing.T) {
		_, err := helm(t, "template", chartDir, "--set", "cloudConfig.secret=true,cloudConfig.inline=x")
		if err == nil || !strings.Contains(err.Error(), "cloudConfig.inline makes a ConfigMap") {
			t.Errorf("helm template with both: %v, want an error naming cloudConfig.inline", err)
		}
	})

	t.Run("helm install and uninstall", func(t *testing.T) {
		framework.CreateNamespace(t, suite.Cluster.Admin, "ccm-helm")
		if out, err := helm(t, "install", "ccm", chartDir, "--namespace", "ccm-helm", "--set-file", "cloudConfig.inline="+example,
			"--set", "loadBalancerFinalizerPolicy=false"); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		out, err := suite.Cluster.Kubectl("-n", "ccm-helm", "get", "deployment,configmap,serviceaccount", "-l", "app.kubernetes.io/instance=ccm", "-o", "name")
		if err != nil || strings.Count(out, "\n") != 3 {
			t.Errorf("after helm install: %v\n%s", err, out)
		}
		if out, err := helm(t, "uninstall", "ccm", "--namespace", "ccm-helm", "--wait"); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		out, _ = suite.Cluster.Kubectl("get", "clusterrole,clusterrolebinding", "-l", "app.kubernetes.io/instance=ccm", "-o", "name")
		if strings.TrimSpace(out) != "" {
			t.Errorf("left after helm uninstall: %s", out)
		}
	})
}

// installMonitoringCRDs gives the API server the Prometheus operator's
// kinds, so that the chart's ServiceMonitor and PrometheusRule can be
// applied. Their schemas here check nothing inside spec: the test checks
// what matters of them itself.
func installMonitoringCRDs(t *testing.T) {
	t.Helper()
	var docs []string
	for _, kind := range []string{"ServiceMonitor", "PrometheusRule"} {
		plural := strings.ToLower(kind) + "s"
		docs = append(docs, `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: `+plural+`.monitoring.coreos.com}
spec:
  group: monitoring.coreos.com
  scope: Namespaced
  names: {kind: `+kind+`, plural: `+plural+`}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
`)
	}
	cmd := exec.Command(filepath.Join(framework.ToolsBin(), "kubectl"), "--kubeconfig", suite.Cluster.AdminKubeconfig, "apply", "-f", "-")
	cmd.Stdin = strings.NewReader(strings.Join(docs, "---\n"))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("installing the monitoring CRDs: %v\n%s", err, out)
	}
	if out, err := suite.Cluster.Kubectl("wait", "--for=condition=Established", "crd/servicemonitors.monitoring.coreos.com", "crd/prometheusrules.monitoring.coreos.com"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
}
