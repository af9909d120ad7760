// Command demo shows the CCM at work on a local test control plane: it
// registers the Nodes and PersistentVolumes of deploy/cloud-config.example.yaml
// as a kubelet and a storage admin would, and prints what the CCM made of them.
package main

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cloudapi "k8s.io/cloud-provider/api"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/test/framework"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

func run() error {
	ctx := context.Background()
	step("Building the CCM and starting etcd + kube-apiserver on loopback")
	binary, err := framework.BuildCCM()
	if err != nil {
		return err
	}
	cluster, err := framework.StartCluster()
	if err != nil {
		return err
	}
	defer func() {
		step("Cleaning up")
		cluster.Stop()
	}()
	deploy := filepath.Join(framework.RepoRoot(), "deploy")
	if _, err := cluster.Kubectl("apply", "-f", filepath.Join(deploy, "rbac.yaml")); err != nil {
		return err
	}
	kubeconfig, err := cluster.ServiceAccountKubeconfig(ctx, "kube-system", "baremetal-cloud-controller-manager")
	if err != nil {
		return err
	}

	step("Starting baremetal-cloud-controller-manager with deploy/cloud-config.example.yaml, as its ServiceAccount")
	ccm, err := framework.CCM{
		Binary: binary, Dir: cluster.Dir, Name: "ccm", Kubeconfig: kubeconfig,
		CloudConfig: filepath.Join(deploy, "cloud-config.example.yaml"),
	}.Start()
	if err != nil {
		return err
	}
	defer ccm.Stop()

	step("Registering Nodes the way kubelets with --cloud-provider=external do (tainted uninitialized)")
	nodes := []struct {
		name  string
		ready bool
	}{
		{"worker-1", true},
		{"worker-2.lab.example", true}, // matched by the machine's hostnames
		{"worker-3", false},            // its machine is recorded as powered off
		{"stray-1", true},              // in no inventory entry
	}
	for _, n := range nodes {
		if err := framework.RegisterNode(ctx, cluster.Admin, n.name, "", n.ready, nil); err != nil {
			return err
		}
		fmt.Printf("  node/%s (Ready=%v)\n", n.name, n.ready)
	}

	step("Creating PersistentVolumes on the site's storage")
	pvs := map[string]v1.PersistentVolumeSource{
		"pv-nas-nfs":   {NFS: &v1.NFSVolumeSource{Server: "192.0.2.50", Path: "/export/db"}},
		"pv-nas-csi":   {CSI: &v1.CSIPersistentVolumeSource{Driver: "nfs.csi.k8s.io", VolumeHandle: "192.0.2.50#export#logs"}},
		"pv-san":       {ISCSI: &v1.ISCSIPersistentVolumeSource{TargetPortal: "192.0.2.60", IQN: "iqn.2026-01.example:db", Lun: 1}},
		"pv-ceph-rbd":  {CSI: &v1.CSIPersistentVolumeSource{Driver: "rbd.csi.ceph.com", VolumeHandle: "0001-0009-ceph-dc-1-vol", VolumeAttributes: map[string]string{"clusterID": "ceph-dc-1"}}},
		"pv-elsewhere": {NFS: &v1.NFSVolumeSource{Server: "198.51.100.9", Path: "/x"}},
	}
	for _, name := range slices.Sorted(maps.Keys(pvs)) {
		if err := createPV(ctx, cluster, name, pvs[name]); err != nil {
			return err
		}
		fmt.Printf("  persistentvolume/%s\n", name)
	}

	step("Creating a Service of type LoadBalancer")
	svc := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"},
		Spec: v1.ServiceSpec{
			Type:     v1.ServiceTypeLoadBalancer,
			Selector: map[string]string{"app": "web"},
			Ports:    []v1.ServicePort{{Protocol: v1.ProtocolTCP, Port: 80}},
		},
	}
	if _, err := cluster.Admin.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		return err
	}
	fmt.Println("  service/web")

	step("Waiting for the CCM")
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if done(ctx, cluster) {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}

	step("Nodes")
	out, _ := cluster.Kubectl("get", "nodes", "-o", "custom-columns="+
		"NAME:.metadata.name,PROVIDER-ID:.spec.providerID,"+
		`TYPE:.metadata.labels.node\.kubernetes\.io/instance-type,`+
		`ZONE:.metadata.labels.topology\.kubernetes\.io/zone,`+
		`REGION:.metadata.labels.topology\.kubernetes\.io/region,`+
		"ADDRESSES:.status.addresses[*].address,TAINTS:.spec.taints[*].key")
	fmt.Print(out)
	fmt.Println("  (node.kubernetes.io/not-ready comes from the API server's TaintNodesByCondition admission;\n   kube-controller-manager, which this demo does not run, takes it off Ready Nodes)")
	step("PersistentVolumes")
	out, _ = cluster.Kubectl("get", "pv", "-L", "topology.kubernetes.io/zone,topology.kubernetes.io/region")
	fmt.Print(out)
	step("Services")
	out, _ = cluster.Kubectl("get", "svc", "web")
	fmt.Print(out)
	step("Warnings the CCM left for the cluster owner")
	out, _ = cluster.Kubectl("get", "events", "-A", "--field-selector", "type=Warning", "-o", "custom-columns=OBJECT:.involvedObject.name,REASON:.reason,MESSAGE:.message")
	fmt.Print(out)
	step("What the CCM logged about it")
	for _, line := range strings.Split(ccm.Logs(), "\n") {
		for _, what := range []string{"Loaded cloud config", "Successfully initialized node", "Labelled PersistentVolume", "Load balancer ensured"} {
			if strings.Contains(line, what) {
				fmt.Println("  " + line)
			}
		}
	}
	return nil
}

func step(s string) { fmt.Printf("\n==> %s\n", s) }

// done reports whether the CCM has done all it will: listed Nodes
// initialised, the powered-off one tainted, matched volumes labelled.
func done(ctx context.Context, c *framework.Cluster) bool {
	nodes, err := c.Admin.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return false
	}
	for _, n := range nodes.Items {
		tainted := func(key string) bool {
			return slices.ContainsFunc(n.Spec.Taints, func(t v1.Taint) bool { return t.Key == key })
		}
		if n.Name != "stray-1" && tainted(cloudapi.TaintExternalCloudProvider) {
			return false
		}
		if n.Name == "worker-3" && !tainted(cloudapi.TaintNodeShutdown) {
			return false
		}
	}
	pvs, err := c.Admin.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return false
	}
	for _, pv := range pvs.Items {
		if pv.Name != "pv-elsewhere" && pv.Labels[v1.LabelTopologyRegion] == "" {
			return false
		}
	}
	svc, err := c.Admin.CoreV1().Services("default").Get(ctx, "web", metav1.GetOptions{})
	return err == nil && len(svc.Status.LoadBalancer.Ingress) > 0
}

func createPV(ctx context.Context, c *framework.Cluster, name string, src v1.PersistentVolumeSource) error {
	pv := &v1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1.PersistentVolumeSpec{
			Capacity:               v1.ResourceList{v1.ResourceStorage: resource.MustParse("10Gi")},
			AccessModes:            []v1.PersistentVolumeAccessMode{v1.ReadWriteMany},
			PersistentVolumeSource: src,
		},
	}
	_, err := c.Admin.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{})
	return err
}
