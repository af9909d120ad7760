// Command demo shows the CCM at work on a local control plane: it registers
// the Nodes and PersistentVolumes of deploy/cloud-config.example.yaml as
// kubelets and a storage admin would, creates a LoadBalancer Service, and
// prints what the CCM made of them and what a BGP router (gobgpd on
// loopback) learned from it.
package main

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cloudapi "k8s.io/cloud-provider/api"
	"sigs.k8s.io/yaml"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/test/framework"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

// The nodes: as kubelets register them, each with the pod CIDR
// kube-controller-manager's node IPAM would give it.
var nodes = []struct {
	name, podCIDR string
	ready         bool
}{
	{"worker-1", "10.244.1.0/24", true},
	{"worker-2.lab.example", "10.244.2.0/24", true}, // matched by the machine's hostnames
	{"worker-3", "10.244.3.0/24", false},            // its machine is recorded as powered off
	{"stray-1", "10.244.4.0/24", true},              // in no inventory entry
}

func run() error {
	ctx := context.Background()
	step("Starting etcd + kube-apiserver on loopback, and a BGP router (gobgpd, AS 64500) on 127.0.0.1")
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
	router, err := framework.StartGoBGPD(cluster.Dir, "gobgpd", "127.0.0.1", 64500,
		[]framework.GoBGPNeighbor{{Address: "127.0.0.1", ASN: 64512, AddPath: true}})
	if err != nil {
		return err
	}
	defer router.Stop()
	deploy := filepath.Join(framework.RepoRoot(), "deploy")
	if err := cluster.Apply(ctx, filepath.Join(deploy, "rbac.yaml")); err != nil {
		return err
	}
	kubeconfig, err := cluster.ServiceAccountKubeconfig(ctx, "kube-system", "baremetal-cloud-controller-manager")
	if err != nil {
		return err
	}
	config, err := demoConfig(filepath.Join(deploy, "cloud-config.example.yaml"), cluster.Dir, router.Port)
	if err != nil {
		return err
	}

	step("Starting baremetal-cloud-controller-manager with deploy/cloud-config.example.yaml (peering with the router), as its ServiceAccount")
	ccm, err := framework.CCM{
		Binary: binary, Dir: cluster.Dir, Name: "ccm", Kubeconfig: kubeconfig, CloudConfig: config,
		Args: []string{"--configure-cloud-routes=true", "--cluster-cidr=10.244.0.0/16", "--route-reconciliation-period=2s"},
	}.Start()
	if err != nil {
		return err
	}
	defer ccm.Stop()

	step("Registering Nodes the way kubelets with --cloud-provider=external do (tainted uninitialized, NotReady, then Ready)")
	for _, n := range nodes {
		node := framework.KubeletNode(n.name, "")
		node.Spec.PodCIDR, node.Spec.PodCIDRs = n.podCIDR, []string{n.podCIDR}
		if err := framework.RegisterNodeObject(ctx, cluster.Admin, node, n.ready, nil); err != nil {
			return err
		}
		fmt.Printf("  node/%s (Ready=%v, pod CIDR %s)\n", n.name, n.ready, n.podCIDR)
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
	start := time.Now()
	deadline := start.Add(60 * time.Second)
	for time.Now().Before(deadline) && !done(ctx, cluster, router) {
		time.Sleep(200 * time.Millisecond)
	}
	fmt.Printf("  done in %s\n", time.Since(start).Round(100*time.Millisecond))

	if err := printNodes(ctx, cluster); err != nil {
		return err
	}
	if err := printPVs(ctx, cluster); err != nil {
		return err
	}
	if err := printService(ctx, cluster); err != nil {
		return err
	}
	printRouter(router)
	if err := printWarnings(ctx, cluster, router); err != nil {
		return err
	}
	step("What the CCM logged about it")
	for _, line := range strings.Split(ccm.Logs(), "\n") {
		for _, what := range []string{"Loaded cloud config", "Successfully initialized node", "Labelled PersistentVolume",
			"Load balancer ensured", "BGP session state changed", "Route created"} {
			if strings.Contains(line, what) {
				fmt.Println("  " + line)
			}
		}
	}
	step("Next")
	fmt.Println("  On a cluster of your own: the quick start in README.md, then docs/getting-started.md")
	return nil
}

func step(s string) { fmt.Printf("\n==> %s\n", s) }

// demoConfig is the example cloud config with the router as its BGP peer,
// routes on, and health checks off: the example's node addresses are not
// on this machine, and nothing may dial them.
func demoConfig(example, dir string, routerPort int) (string, error) {
	b, err := os.ReadFile(example)
	if err != nil {
		return "", err
	}
	var cfg map[string]any
	if err := yaml.Unmarshal(b, &cfg); err != nil {
		return "", err
	}
	lb := cfg["loadBalancer"].(map[string]any)
	lb["healthCheck"] = map[string]any{"enabled": false}
	cfg["routes"] = map[string]any{}
	bgp := cfg["bgp"].(map[string]any)
	bgp["routerID"] = "127.0.0.2"
	bgp["peers"] = []any{map[string]any{"address": "127.0.0.1", "port": routerPort, "asn": 64500}}
	out, err := yaml.Marshal(cfg)
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, "cloud.yaml")
	return path, os.WriteFile(path, out, 0o644)
}

// done reports whether the CCM has done all it will: listed Nodes
// initialised, the powered-off one tainted, matched volumes labelled, the
// Service given its address, and the router holding it via both Ready
// listed nodes, and their pod CIDRs.
func done(ctx context.Context, c *framework.Cluster, router *framework.GoBGPD) bool {
	nodes, err := c.Admin.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return false
	}
	for _, n := range nodes.Items {
		if n.Name != "stray-1" && tainted(n, cloudapi.TaintExternalCloudProvider) {
			return false
		}
		if n.Name == "worker-3" && !tainted(n, cloudapi.TaintNodeShutdown) {
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
	if err != nil || len(svc.Status.LoadBalancer.Ingress) == 0 {
		return false
	}
	rib, err := router.RIB("ipv4")
	return err == nil && len(rib[svc.Status.LoadBalancer.Ingress[0].IP+"/32"]) == 2 && len(rib["10.244.1.0/24"]) == 1 && len(rib["10.244.2.0/24"]) == 1
}

func tainted(n v1.Node, key string) bool {
	return slices.ContainsFunc(n.Spec.Taints, func(t v1.Taint) bool { return t.Key == key })
}

func table(header string, rows [][]string) {
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "  "+strings.ReplaceAll(header, " ", "\t"))
	for _, r := range rows {
		for i, c := range r {
			if c == "" {
				r[i] = "-"
			}
		}
		fmt.Fprintln(w, "  "+strings.Join(r, "\t"))
	}
	w.Flush()
}

func printNodes(ctx context.Context, c *framework.Cluster) error {
	step("Nodes")
	list, err := c.Admin.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	var rows [][]string
	for _, n := range list.Items {
		var addrs, taints []string
		for _, a := range n.Status.Addresses {
			addrs = append(addrs, a.Address)
		}
		for _, t := range n.Spec.Taints {
			taints = append(taints, t.Key)
		}
		rows = append(rows, []string{n.Name, n.Spec.ProviderID, n.Labels[v1.LabelInstanceTypeStable], n.Labels[v1.LabelTopologyZone],
			n.Labels[v1.LabelTopologyRegion], strings.Join(addrs, ","), strings.Join(taints, ",")})
	}
	table("NAME PROVIDER-ID TYPE ZONE REGION ADDRESSES TAINTS", rows)
	fmt.Println("  (node.kubernetes.io/not-ready comes from the API server's TaintNodesByCondition admission;\n   kube-controller-manager, which this demo does not run, takes it off Ready Nodes)")
	return nil
}

func printPVs(ctx context.Context, c *framework.Cluster) error {
	step("PersistentVolumes")
	list, err := c.Admin.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	var rows [][]string
	for _, pv := range list.Items {
		rows = append(rows, []string{pv.Name, pv.Labels[v1.LabelTopologyZone], pv.Labels[v1.LabelTopologyRegion]})
	}
	table("NAME ZONE REGION", rows)
	return nil
}

func printService(ctx context.Context, c *framework.Cluster) error {
	step("Services")
	svc, err := c.Admin.CoreV1().Services("default").Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		return err
	}
	table("NAME TYPE CLUSTER-IP EXTERNAL-IP PORT(S)", [][]string{{svc.Name, string(svc.Spec.Type), svc.Spec.ClusterIP,
		strings.Join(framework.IngressIPs(svc), ","), fmt.Sprintf("%d/%s", svc.Spec.Ports[0].Port, svc.Spec.Ports[0].Protocol)}})
	return nil
}

func printRouter(router *framework.GoBGPD) {
	step("What the router learned (gobgpd's RIB: each prefix once per next hop)")
	rib, err := router.RIB("ipv4")
	if err != nil {
		fmt.Println("  ", err)
		return
	}
	var rows [][]string
	for _, prefix := range slices.Sorted(maps.Keys(rib)) {
		for _, hop := range rib[prefix] {
			what := "VIP of default/web"
			if strings.HasPrefix(prefix, "10.244.") {
				what = "pod CIDR"
			}
			rows = append(rows, []string{prefix, hop, what})
		}
	}
	table("PREFIX NEXT-HOP WHAT", rows)
	fmt.Println("  (worker-3 is powered off and stray-1 is in no inventory entry: neither carries the VIP, nor has a route to its pod CIDR)")
}

// printWarnings lists the Warning Events with what is true of each now:
// the first seconds of a cluster leave Events that resolved themselves (a
// route asked for before its Node was initialised, a VIP before any node
// could carry it), which a newcomer would read as failures.
func printWarnings(ctx context.Context, c *framework.Cluster, router *framework.GoBGPD) error {
	step("Warnings the CCM left for the cluster owner")
	list, err := c.Admin.CoreV1().Events("").List(ctx, metav1.ListOptions{FieldSelector: "type=Warning"})
	if err != nil {
		return err
	}
	rib, _ := router.RIB("ipv4")
	var open, resolved [][]string
	for _, e := range list.Items {
		row := []string{e.InvolvedObject.Name, e.Reason, e.Message}
		if now := resolvedSince(ctx, c, rib, e); now != "" {
			resolved = append(resolved, append(row, now))
		} else {
			open = append(open, append(row, "still true"))
		}
	}
	table("OBJECT REASON MESSAGE NOW", append(open, resolved...))
	fmt.Printf("  %d still true (these need the owner), %d resolved by themselves in the first seconds\n", len(open), len(resolved))
	return nil
}

// resolvedSince says how a Warning resolved itself, or "" if it did not.
func resolvedSince(ctx context.Context, c *framework.Cluster, rib map[string][]string, e v1.Event) string {
	switch e.Reason {
	case "FailedToCreateRoute":
		node, err := c.Admin.CoreV1().Nodes().Get(ctx, e.InvolvedObject.Name, metav1.GetOptions{})
		if err == nil && len(rib[node.Spec.PodCIDR]) > 0 {
			return "resolved: the route is at the router (the Node was not initialised yet)"
		}
	case "VIPNotAnnounced":
		svc, err := c.Admin.CoreV1().Services(e.InvolvedObject.Namespace).Get(ctx, e.InvolvedObject.Name, metav1.GetOptions{})
		if err != nil {
			return ""
		}
		for _, ip := range framework.IngressIPs(svc) {
			if len(rib[ip+"/32"]) == 0 {
				return ""
			}
		}
		return "resolved: the VIP is at the router (no node could carry it yet)"
	}
	return ""
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
