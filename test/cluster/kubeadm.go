package cluster

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/test/framework"
)

// labOnly is what the lab adds to deploy/kubeadm/init.yaml, for this
// machine and nothing else: kube-proxy must not set the host's global
// conntrack table size from inside a node's namespace (maxPerCore: 0
// leaves it), and its image carries nft, not iptables.
const labOnly = `---
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: nftables
conntrack:
  maxPerCore: 0
`

// labAPICallTimeout gives kubeadm init's first API call (it makes the
// admin's ClusterRoleBinding before waiting for the control plane) four
// minutes instead of one. A lab kubelet that starts slowly (seen in CI: its
// runtime-dependent modules took 10 s, then it admitted one static pod per
// 10 s node-status period) had not started etcd when the minute was up.
const labAPICallTimeout = "timeouts:\n  kubernetesAPICall: 4m0s\n"

// kubeletDropIn is the node's kubelet configuration for this machine, a
// drop-in (--config-dir) over what kubeadm writes, as a site adds its own
// settings: cgroup v1 with cgroupfs under the node's own cgroup root, a
// resolv.conf of its own, and no eviction or image garbage collection on
// a small disk (nothing could be pulled back).
func (n *Node) kubeletDropIn() string {
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: %s
resolvConf: %s
evictionHard: {memory.available: "100Mi", nodefs.available: "1%%", imagefs.available: "1%%", nodefs.inodesFree: "1%%"}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
`, n.cgroupRoot(), filepath.Join(n.Dir, "resolv.conf"))
}

// LabCopy is a project file with the given replacements (each must be
// there: a copy that silently kept a placeholder would not be the file
// users run) and an appended part.
func LabCopy(projectFile string, replace [][2]string, appended string) (string, error) {
	raw, err := os.ReadFile(filepath.Join(framework.RepoRoot(), projectFile))
	if err != nil {
		return "", err
	}
	s := string(raw)
	for _, r := range replace {
		if !strings.Contains(s, r[0]) {
			return "", fmt.Errorf("%s has no %q to replace: the lab's copy is out of step", projectFile, r[0])
		}
		s = strings.ReplaceAll(s, r[0], r[1])
	}
	return s + appended, nil
}

func (n *Node) writeKubeadmFiles(name, config string) (string, error) {
	dropIns := filepath.Join(n.Dir, "kubelet.conf.d")
	if err := os.MkdirAll(dropIns, 0o755); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(dropIns, "50-lab.conf"), []byte(n.kubeletDropIn()), 0o644); err != nil {
		return "", err
	}
	// The node's upstream resolver is the router, which runs none: the
	// cluster's CoreDNS answers cluster names and forwards the rest there,
	// inside the lab, to no answer.
	if err := os.WriteFile(filepath.Join(n.Dir, "resolv.conf"), []byte("nameserver "+LabGW+"\noptions ndots:1\n"), 0o644); err != nil {
		return "", err
	}
	path := filepath.Join(n.Dir, name)
	return path, os.WriteFile(path, []byte(config), 0o644)
}

// kubeadm runs kubeadm on the node while starting the kubelet as soon as
// kubeadm has configured it, as systemd would.
func (n *Node) kubeadm(args ...string) error {
	done := make(chan struct{})
	kubeletErr := make(chan error, 1)
	go func() { kubeletErr <- n.startKubelet(done) }()
	out, err := n.Run(append([]string{filepath.Join(framework.ToolsBin(), "kubeadm")}, args...)...)
	close(done)
	os.WriteFile(filepath.Join(n.Dir, "kubeadm-"+args[0]+".log"), []byte(out), 0o644)
	if kerr := <-kubeletErr; kerr != nil && err == nil {
		err = kerr
	}
	if err != nil {
		kubelet := "(not started)"
		if n.kubelet != nil {
			kubelet = framework.Tail(n.kubelet.Logs(), 15)
		}
		return fmt.Errorf("kubeadm %s on %s: %w\n%s\nthe kubelet's last lines:\n%s", args[0], n.Name, err, framework.Tail(out, 40), kubelet)
	}
	return nil
}

// kubeadmInit makes the control plane, with the project's init.yaml, the
// way the README says, with both families as docs/operations/install.md
// says, CoreDNS included (upstream's e2e specs resolve Service names); the
// preflight checks are not run (they would pull images and check the
// host's kernel settings).
func (l *Lab) kubeadmInit(cp *Node) error {
	networking, _, err := DualStack()
	if err != nil {
		return err
	}
	release, err := kubeadmRelease()
	if err != nil {
		return err
	}
	config, err := LabCopy("deploy/kubeadm/init.yaml", append(append([][2]string{
		{"networking:\n  podSubnet: " + PodSubnet + "\n  serviceSubnet: 10.96.0.0/12\n", networking},
		{"kind: InitConfiguration\n", "kind: InitConfiguration\n" + labAPICallTimeout}}, release...), l.withoutCloudProvider()...), labOnly)
	if err != nil {
		return err
	}
	path, err := cp.writeKubeadmFiles("init.yaml", config)
	if err != nil {
		return err
	}
	if err := cp.kubeadm("init", "--config", path, "--skip-phases=preflight"); err != nil {
		return err
	}
	if err := l.connect(cp); err != nil {
		return err
	}
	go l.writeCNIConfig(cp)
	return nil
}

// kubeadmRelease makes init.yaml name the release of the kubeadm the lab
// runs, where that is an older minor's (make minors-test), with the etcd
// and CoreDNS images the lab has (one of each, whatever the minor; a
// site's kubeadm takes other tags the same way).
func kubeadmRelease() ([][2]string, error) {
	raw, err := os.ReadFile(filepath.Join(framework.RepoRoot(), "deploy", "kubeadm", "init.yaml"))
	if err != nil {
		return nil, err
	}
	m := regexp.MustCompile(`kubernetesVersion: (\S+)\n`).FindStringSubmatch(string(raw))
	if m == nil {
		return nil, fmt.Errorf("deploy/kubeadm/init.yaml names no kubernetesVersion")
	}
	out, err := exec.Command(filepath.Join(framework.ToolsBin(), "kubeadm"), "version", "-o", "short").Output()
	if err != nil {
		return nil, fmt.Errorf("kubeadm version: %w", err)
	}
	release := strings.TrimSpace(string(out))
	if release == m[1] {
		return nil, nil
	}
	tag := func(image string) (string, error) {
		name, err := ImageName(filepath.Join(framework.ToolsBin(), "images", image))
		return name[strings.LastIndex(name, ":")+1:], err
	}
	etcd, err := tag("etcd.tar")
	if err != nil {
		return nil, err
	}
	dns, err := tag("coredns.tar")
	if err != nil {
		return nil, err
	}
	return [][2]string{{m[0], "kubernetesVersion: " + release + "\netcd:\n  local:\n    imageTag: " + etcd + "\ndns:\n  imageTag: " + dns + "\n"}}, nil
}

// Join makes a node a worker with the project's join.yaml, filled in with
// a fresh token and the cluster's CA hash, as `kubeadm token create
// --print-join-command` gives them.
func (l *Lab) Join(n *Node) error {
	cp := l.Nodes[0]
	out, err := cp.Run(filepath.Join(framework.ToolsBin(), "kubeadm"), "token", "create", "--kubeconfig", "/etc/kubernetes/admin.conf")
	if err != nil {
		return fmt.Errorf("%w: %s", err, out)
	}
	token := strings.TrimSpace(out)
	hash, err := caCertHash(cp.Path("/etc/kubernetes/pki/ca.crt"))
	if err != nil {
		return err
	}
	config, err := LabCopy("deploy/kubeadm/join.yaml", append([][2]string{
		{"control-plane.lab.example:6443", cp.IP + ":6443"},
		{"abcdef.0123456789abcdef", token},
		{"sha256:0000000000000000000000000000000000000000000000000000000000000000", hash},
	}, l.withoutCloudProvider()...), "")
	if err != nil {
		return err
	}
	path, err := n.writeKubeadmFiles("join.yaml", config)
	if err != nil {
		return err
	}
	if err := n.kubeadm("join", "--config", path, "--skip-phases=preflight"); err != nil {
		return err
	}
	go l.writeCNIConfig(n)
	// kubeadm is done once the kubelet has its credentials; the Node
	// follows.
	if err := framework.Poll(time.Minute, 200*time.Millisecond, func() (bool, string) {
		_, err := l.Admin.CoreV1().Nodes().Get(context.Background(), n.Name, metav1.GetOptions{})
		return err == nil, fmt.Sprint(err)
	}); err != nil {
		return fmt.Errorf("node %s joined but registered no Node: %w\n%s", n.Name, err, framework.Tail(n.kubelet.Logs(), 20))
	}
	return nil
}

// externalFlag is the kubelet's flag in the project's kubeadm files.
const externalFlag = "nodeRegistration:\n  kubeletExtraArgs:\n  - name: cloud-provider\n    value: external\n"

// withoutCloudProvider takes the kubelet's --cloud-provider=external out
// of the project's kubeadm files when the lab is a cluster made before
// its CCM.
func (l *Lab) withoutCloudProvider() [][2]string {
	if l.external {
		return nil
	}
	return [][2]string{{externalFlag, ""}}
}

// caCertHash is kubeadm's discovery hash: SHA-256 of the CA's public key.
func caCertHash(path string) (string, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	block, _ := pem.Decode(raw)
	if block == nil {
		return "", fmt.Errorf("%s: no PEM", path)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(cert.RawSubjectPublicKeyInfo)
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}

// writeCNIConfig gives the node its pod network once kube-controller-
// manager has given it its pod CIDRs, one per family: a bridge with the
// node as the gateway and no masquerading, so that pods on other nodes are
// reached only over the routes the CCM announces.
func (l *Lab) writeCNIConfig(n *Node) {
	var cidrs []string
	framework.Poll(5*time.Minute, 200*time.Millisecond, func() (bool, string) {
		select {
		case <-l.stopping:
			return true, ""
		default:
		}
		node, err := l.Admin.CoreV1().Nodes().Get(context.Background(), n.Name, metav1.GetOptions{})
		if err == nil {
			cidrs = node.Spec.PodCIDRs
		}
		return len(cidrs) == 2, fmt.Sprintf("pod CIDRs %v", cidrs)
	})
	if len(cidrs) == 0 {
		return
	}
	var ranges, routes []string
	for _, c := range cidrs {
		ranges = append(ranges, fmt.Sprintf(`[{"subnet": %q}]`, c))
		if strings.Contains(c, ":") {
			routes = append(routes, `{"dst": "::/0"}`)
		} else {
			routes = append(routes, `{"dst": "0.0.0.0/0"}`)
		}
	}
	conf := fmt.Sprintf(`{"cniVersion": "1.0.0", "name": "lab",
  "plugins": [
    {"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": false, "hairpinMode": true,
     "ipam": {"type": "host-local", "ranges": [%s], "routes": [%s], "dataDir": "/var/lib/kubelet/cni-ipam"}},
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]}
`, strings.Join(ranges, ", "), strings.Join(routes, ", "))
	os.WriteFile(n.Path("/etc/cni/net.d/10-lab.conflist"), []byte(conf), 0o644)
}
