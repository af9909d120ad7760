package integration

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/test/framework"
)

// deployment renders the chart with args and returns its Deployment.
func deployment(t *testing.T, args ...string) (appsv1.Deployment, []rendered) {
	t.Helper()
	objs := render(t, append([]string{"baremetal-cloud-controller-manager", chartDir, "--namespace", "kube-system"}, args...)...)
	var d appsv1.Deployment
	find(t, objs, "Deployment", "", &d)
	return d, objs
}

// What an operator expects of the chart on day 2, value by value.
func TestHelmChartDayTwo(t *testing.T) {
	t.Run("a rollout and a drain keep a ready replica", func(t *testing.T) {
		d, objs := deployment(t)
		ru := d.Spec.Strategy.RollingUpdate
		if ru == nil || ru.MaxSurge.IntValue() != 0 || ru.MaxUnavailable.IntValue() != 1 || d.Spec.MinReadySeconds < 5 ||
			d.Spec.RevisionHistoryLimit == nil || *d.Spec.RevisionHistoryLimit != 3 {
			t.Errorf("strategy %+v, minReadySeconds %d, revisionHistoryLimit %v: want one replica at a time, no surge (host ports), a few seconds ready, 3 kept",
				ru, d.Spec.MinReadySeconds, d.Spec.RevisionHistoryLimit)
		}
		var pdb policyv1.PodDisruptionBudget
		find(t, objs, "PodDisruptionBudget", "", &pdb)
		sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		if err != nil || !sel.Matches(labels.Set(d.Spec.Template.Labels)) || pdb.Spec.MaxUnavailable == nil ||
			*pdb.Spec.MaxUnavailable != intstr.FromInt32(1) || pdb.Spec.UnhealthyPodEvictionPolicy == nil ||
			*pdb.Spec.UnhealthyPodEvictionPolicy != policyv1.IfHealthyBudget {
			t.Errorf("the PodDisruptionBudget %+v does not keep all but one ready replica of %v", pdb.Spec, d.Spec.Template.Labels)
		}
		c := d.Spec.Template.Spec.Containers[0]
		p := c.ReadinessProbe
		if p == nil || p.HTTPGet == nil || p.HTTPGet.Host != "127.0.0.1" || p.HTTPGet.Path != "/readyz" ||
			!slices.Contains(c.Args, fmt.Sprintf("--readiness-address=127.0.0.1:%d", p.HTTPGet.Port.IntValue())) {
			t.Errorf("readiness probe %+v with args %v: want /readyz on the loopback port the CCM serves it on", p, c.Args)
		}
		if d, _ := deployment(t, "--set", "podDisruptionBudget.enabled=false"); d.Name == "" {
			t.Error("no Deployment")
		} else if objs := render(t, "x", chartDir, "--set", "podDisruptionBudget.enabled=false"); slices.Contains(kinds(objs), "PodDisruptionBudget") {
			t.Error("podDisruptionBudget.enabled=false still renders one")
		}
		applyDry(t, objs)
	})

	// The API server's eviction, against the chart's budget, with the
	// status the disruption controller would write (this suite runs no
	// controller manager): a replica that is not ready may go while the
	// others are enough, a ready one may not while the budget has no
	// disruption to give, and when no replica is ready (a network event
	// that took most of every replica's sessions: they still feed the
	// routers they have) none may go.
	t.Run("a drain evicts a replica that is not ready only while the ready ones suffice", func(t *testing.T) {
		ctx := context.Background()
		for _, tc := range []struct {
			ns         string
			readyOther bool // the second replica is ready
		}{{"pdb-drain", true}, {"pdb-drain-none-ready", false}} {
			ns := tc.ns
			framework.CreateNamespace(t, suite.Cluster.Admin, ns)
			d, objs := deployment(t, "--namespace", ns)
			var pdb policyv1.PodDisruptionBudget
			find(t, objs, "PodDisruptionBudget", "", &pdb)
			created, err := suite.Cluster.Admin.PolicyV1().PodDisruptionBudgets(ns).Create(ctx, &pdb, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			healthy := int32(0)
			for _, p := range []struct {
				name  string
				ready bool
			}{{"replica-ready", tc.readyOther}, {"replica-not-ready", false}} {
				pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: p.name, Labels: d.Spec.Template.Labels},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "ccm", Image: framework.ShippedImage()}}}}
				pc, err := suite.Cluster.Admin.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
				if err != nil {
					t.Fatal(err)
				}
				status := corev1.ConditionFalse
				if p.ready {
					status, healthy = corev1.ConditionTrue, healthy+1
				}
				pc.Status.Phase = corev1.PodRunning
				pc.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: status}}
				if _, err := suite.Cluster.Admin.CoreV1().Pods(ns).UpdateStatus(ctx, pc, metav1.UpdateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			// Two replicas, maxUnavailable 1: one must stay healthy.
			created.Status = policyv1.PodDisruptionBudgetStatus{ObservedGeneration: created.Generation, ExpectedPods: 2, DesiredHealthy: 1,
				CurrentHealthy: healthy, DisruptionsAllowed: max(healthy-1, 0)}
			if _, err := suite.Cluster.Admin.PolicyV1().PodDisruptionBudgets(ns).UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			// No retries: client-go would wait out the budget's 429s.
			evict := func(name string) error {
				return suite.Cluster.Admin.CoreV1().RESTClient().Post().Namespace(ns).Resource("pods").Name(name).SubResource("eviction").
					MaxRetries(0).Body(&policyv1.Eviction{TypeMeta: metav1.TypeMeta{APIVersion: "policy/v1", Kind: "Eviction"},
					ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}).Do(ctx).Error()
			}
			if tc.readyOther {
				if err := evict("replica-not-ready"); err != nil {
					t.Errorf("evicting the replica that is not ready while the other is: %v, want it evicted", err)
				}
				if err := evict("replica-ready"); !apierrors.IsTooManyRequests(err) {
					t.Errorf("evicting the ready replica with no disruption allowed: %v, want 429 from the budget", err)
				}
			} else if err := evict("replica-not-ready"); !apierrors.IsTooManyRequests(err) {
				t.Errorf("evicting a replica that is not ready while no replica is: %v, want 429 from the budget (it may still feed routers)", err)
			}
		}
	})

	// The labels and taints each distribution gives its control-plane
	// nodes; the chart's Pods must schedule on every one of them, and on no
	// worker.
	t.Run("scheduled on control-plane nodes of kubeadm, k3s and RKE2", func(t *testing.T) {
		selectorOf := func(args ...string) (*nodeaffinity.NodeSelector, corev1.PodSpec) {
			t.Helper()
			d, _ := deployment(t, args...)
			spec := d.Spec.Template.Spec
			selector, err := nodeaffinity.NewNodeSelector(spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution)
			if err != nil {
				t.Fatal(err)
			}
			return selector, spec
		}
		selector, spec := selectorOf()
		withMaster, _ := selectorOf("--set-json", `controlPlaneNodeLabels=["node-role.kubernetes.io/control-plane","node-role.kubernetes.io/master"]`)
		uninitialized := corev1.Taint{Key: "node.cloudprovider.kubernetes.io/uninitialized", Value: "true", Effect: corev1.TaintEffectNoSchedule}
		notReady := corev1.Taint{Key: "node.kubernetes.io/not-ready", Effect: corev1.TaintEffectNoSchedule}
		for _, n := range []struct {
			name   string
			labels map[string]string
			taints []corev1.Taint
			want   bool
		}{
			{"kubeadm", map[string]string{"node-role.kubernetes.io/control-plane": ""},
				[]corev1.Taint{{Key: "node-role.kubernetes.io/control-plane", Effect: corev1.TaintEffectNoSchedule}, uninitialized, notReady}, true},

			{"k3s", map[string]string{"node-role.kubernetes.io/control-plane": "true", "node-role.kubernetes.io/master": "true"},
				[]corev1.Taint{{Key: "CriticalAddonsOnly", Value: "true", Effect: corev1.TaintEffectNoExecute}, uninitialized}, true},
			{"RKE2", map[string]string{"node-role.kubernetes.io/control-plane": "true", "node-role.kubernetes.io/etcd": "true", "node-role.kubernetes.io/master": "true"},
				[]corev1.Taint{{Key: "node-role.kubernetes.io/control-plane", Value: "true", Effect: corev1.TaintEffectNoSchedule},
					{Key: "node-role.kubernetes.io/etcd", Value: "true", Effect: corev1.TaintEffectNoExecute}, uninitialized}, true},
			{"a worker", map[string]string{"node-role.kubernetes.io/worker": "true"}, nil, false},
		} {
			node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.name, Labels: n.labels}, Spec: corev1.NodeSpec{Taints: n.taints}}
			if got := selector.Match(node); got != n.want {
				t.Errorf("%s's node: selected %v, want %v", n.name, got, n.want)
			}
			if got := withMaster.Match(node); got != n.want {
				t.Errorf("%s's node, with the master label listed too: selected %v, want %v", n.name, got, n.want)
			}
			if taint, untolerated := corev1helpers.FindMatchingUntoleratedTaint(klog.Background(), n.taints, spec.Tolerations, nil, false); untolerated {
				t.Errorf("%s's control-plane node: taint %v not tolerated", n.name, taint)
			}
		}
		// A control plane labelled only master (kubeadm before 1.20), with
		// the label listed.
		old := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"node-role.kubernetes.io/master": ""}},
			Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: "node-role.kubernetes.io/master", Effect: corev1.TaintEffectNoSchedule}, uninitialized}}}
		if !withMaster.Match(old) || selector.Match(old) {
			t.Errorf("a node labelled only master: selected %v with the label listed (want true), %v by default (want false)", withMaster.Match(old), selector.Match(old))
		}
		if taint, untolerated := corev1helpers.FindMatchingUntoleratedTaint(klog.Background(), old.Spec.Taints, spec.Tolerations, nil, false); untolerated {
			t.Errorf("a master-only node: taint %v not tolerated", taint)
		}
		d, _ := deployment(t, "--set-json", "controlPlaneNodeLabels=[]")
		if d.Spec.Template.Spec.Affinity.NodeAffinity != nil || d.Spec.Template.Spec.Affinity.PodAntiAffinity == nil {
			t.Errorf("controlPlaneNodeLabels=[]: affinity %+v, want only the anti-affinity", d.Spec.Template.Spec.Affinity)
		}
	})

	t.Run("the policy alone needs Kubernetes 1.36", func(t *testing.T) {
		_, err := helm(t, "template", chartDir, "--kube-version", "1.33.0")
		if err == nil || !strings.Contains(err.Error(), "loadBalancerFinalizerPolicy") {
			t.Errorf("on 1.33 with the policy: %v, want an error naming loadBalancerFinalizerPolicy", err)
		}
		out, err := helm(t, "template", chartDir, "--kube-version", "1.33.0", "--set", "loadBalancerFinalizerPolicy=false")
		if err != nil || !strings.Contains(out, "kind: Deployment") || strings.Contains(out, "MutatingAdmissionPolicy") {
			t.Errorf("on 1.33 without the policy: %v\n%s", err, out)
		}
		if out, err := helm(t, "lint", "--strict", chartDir, "--kube-version", "1.33.0", "--set", "loadBalancerFinalizerPolicy=false"); err != nil {
			t.Errorf("%v\n%s", err, out)
		}
	})

	t.Run("the image: appVersion by default, a tag or a digest when given", func(t *testing.T) {
		image := func(args ...string) string {
			d, _ := deployment(t, args...)
			return d.Spec.Template.Spec.Containers[0].Image
		}
		repo := "ghcr.io/cloud-provider-baremetal/baremetal-cloud-controller-manager"
		digest := "sha256:" + strings.Repeat("ab", 32)
		for _, tc := range []struct {
			args []string
			want string
		}{
			{nil, framework.ShippedImage()},
			{[]string{"--set", "image.tag=v9.9.9"}, repo + ":v9.9.9"},
			{[]string{"--set", "image.digest=" + digest}, framework.ShippedImage() + "@" + digest},
		} {
			if got := image(tc.args...); got != tc.want {
				t.Errorf("%v: image %s, want %s", tc.args, got, tc.want)
			}
		}
		if _, err := helm(t, "template", chartDir, "--set", "image.digest=ab12"); err == nil || !strings.Contains(err.Error(), "digest") {
			t.Errorf("a malformed digest: %v, want an error naming image.digest", err)
		}
	})

	t.Run("names and the ServiceAccount", func(t *testing.T) {
		d, objs := deployment(t, "--set", "fullnameOverride=bm-ccm")
		if d.Name != "bm-ccm" || d.Spec.Template.Spec.ServiceAccountName != "bm-ccm" {
			t.Errorf("fullnameOverride: Deployment %s as %s", d.Name, d.Spec.Template.Spec.ServiceAccountName)
		}
		find(t, objs, "ServiceAccount", "bm-ccm", nil)
		find(t, render(t, "site", chartDir, "--set", "nameOverride=metal"), "Deployment", "", &d)
		if d.Name != "site-metal" || d.Spec.Template.Labels["app.kubernetes.io/name"] != "metal" {
			t.Errorf("nameOverride: Deployment %s with labels %v", d.Name, d.Spec.Template.Labels)
		}
		d, objs = deployment(t, "--set", "serviceAccount.create=false,serviceAccount.name=site-ccm")
		if slices.Contains(kinds(objs), "ServiceAccount") || d.Spec.Template.Spec.ServiceAccountName != "site-ccm" {
			t.Errorf("serviceAccount.create=false: kinds %v, runs as %s", kinds(objs), d.Spec.Template.Spec.ServiceAccountName)
		}
		var crb rbacv1.ClusterRoleBinding
		find(t, objs, "ClusterRoleBinding", "baremetal-cloud-controller-manager", &crb)
		if crb.Subjects[0].Name != "site-ccm" {
			t.Errorf("the rights go to %+v, want site-ccm", crb.Subjects)
		}
		if _, err := helm(t, "template", chartDir, "--set", "serviceAccount.create=false"); err == nil || !strings.Contains(err.Error(), "serviceAccount.name") {
			t.Errorf("serviceAccount.create=false without a name: %v, want an error naming serviceAccount.name", err)
		}
	})

	t.Run("the API server's endpoint, topology spread, BGP passwords from a Secret", func(t *testing.T) {
		d, objs := deployment(t, "--set", "k8sServiceHost=192.0.2.10,k8sServicePort=8443,bgpPasswords.secretName=bgp-passwords",
			"--set-json", `topologySpreadConstraints=[{"maxSkew":1,"topologyKey":"topology.kubernetes.io/zone","whenUnsatisfiable":"ScheduleAnyway"}]`)
		spec := d.Spec.Template.Spec
		env := map[string]string{}
		for _, e := range spec.Containers[0].Env {
			env[e.Name] = e.Value
		}
		if env["KUBERNETES_SERVICE_HOST"] != "192.0.2.10" || env["KUBERNETES_SERVICE_PORT"] != "8443" {
			t.Errorf("env %v: want the API server's endpoint", env)
		}
		if len(spec.TopologySpreadConstraints) != 1 || spec.TopologySpreadConstraints[0].LabelSelector == nil ||
			spec.TopologySpreadConstraints[0].LabelSelector.MatchLabels["app.kubernetes.io/name"] != "baremetal-cloud-controller-manager" {
			t.Errorf("topology spread %+v: want the Pods' own selector filled in", spec.TopologySpreadConstraints)
		}
		mounted := false
		for _, m := range spec.Containers[0].VolumeMounts {
			for _, v := range spec.Volumes {
				if v.Name == m.Name && v.Secret != nil && v.Secret.SecretName == "bgp-passwords" && m.MountPath == "/etc/baremetal-bgp" && m.SubPath == "" {
					mounted = true
				}
			}
		}
		if !mounted {
			t.Errorf("the Secret bgp-passwords is not mounted as a directory at /etc/baremetal-bgp: %+v", spec.Volumes)
		}
		applyDry(t, objs)
		d, _ = deployment(t)
		for _, e := range d.Spec.Template.Spec.Containers[0].Env {
			if e.Name == "KUBERNETES_SERVICE_HOST" {
				t.Errorf("KUBERNETES_SERVICE_HOST set by default: %+v", e)
			}
		}
	})

	t.Run("the dashboard for Grafana's sidecar, a ServiceMonitor with authorization", func(t *testing.T) {
		installMonitoringCRDs(t)
		_, objs := deployment(t, "--set", "metrics.grafanaDashboard.enabled=true,metrics.serviceMonitor.enabled=true")
		var cm corev1.ConfigMap
		find(t, objs, "ConfigMap", "baremetal-cloud-controller-manager-dashboard", &cm)
		if cm.Labels["grafana_dashboard"] != "1" || cm.Data["baremetal-cloud-controller-manager.json"] != strings.TrimRight(readFile(t, filepath.Join(framework.RepoRoot(), framework.DashboardFile)), "\n")+"\n" {
			t.Errorf("the dashboard ConfigMap has labels %v and not the dashboard's JSON", cm.Labels)
		}
		monitor := find(t, objs, "ServiceMonitor", "", nil)
		endpoints, _, _ := unstructured.NestedSlice(monitor.Object, "spec", "endpoints")
		ep := endpoints[0].(map[string]any)
		secret, _, _ := unstructured.NestedString(ep, "authorization", "credentials", "name")
		if _, old := ep["bearerTokenFile"]; old || secret == "" {
			t.Errorf("the ServiceMonitor's endpoint %v: want authorization from a Secret, not bearerTokenFile", ep)
		}
		var s corev1.Secret
		find(t, objs, "Secret", secret, &s)
		var role rbacv1.ClusterRole
		find(t, objs, "ClusterRole", secret, &role)
		if s.Type != corev1.SecretTypeServiceAccountToken || s.Annotations[corev1.ServiceAccountNameKey] != secret ||
			len(role.Rules) != 1 || !slices.Equal(role.Rules[0].NonResourceURLs, []string{"/metrics"}) || !slices.Equal(role.Rules[0].Verbs, []string{"get"}) {
			t.Errorf("the scrape token: Secret %+v, rights %+v; want a token of a ServiceAccount that may only get /metrics", s, role.Rules)
		}
		applyDry(t, objs)
		_, objs = deployment(t, "--set", "metrics.serviceMonitor.enabled=true,metrics.serviceMonitor.authorization.name=prometheus-token")
		if slices.Contains(kinds(objs), "Secret") {
			t.Errorf("with a Secret named, the chart still makes one: %v", kinds(objs))
		}
	})
}
