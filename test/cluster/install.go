package cluster

import (
	"archive/tar"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/test/framework"
)

// shippedImage is the image name deploy/ ships with; the only thing the
// lab changes in the manifests.
var shippedImage = framework.ShippedImage()

// ImageName reads the name an image tarball carries.
func ImageName(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err != nil {
			return "", fmt.Errorf("%s: no manifest.json: %w", path, err)
		}
		if h.Name != "manifest.json" {
			continue
		}
		var manifest []struct{ RepoTags []string }
		if err := json.NewDecoder(io.LimitReader(tr, 1<<20)).Decode(&manifest); err != nil {
			return "", err
		}
		if len(manifest) != 1 || len(manifest[0].RepoTags) != 1 {
			return "", fmt.Errorf("%s: want one image with one name, got %+v", path, manifest)
		}
		return manifest[0].RepoTags[0], nil
	}
}

// Manifest is a file of deploy/ with the image name changed and both pod
// ranges in --cluster-cidr, as docs/operations/install.md says for a
// dual-stack cluster.
func Manifest(file, image string) (string, error) {
	_, cidrs, err := DualStack()
	if err != nil {
		return "", err
	}
	return LabCopy(file, [][2]string{{shippedImage, image}, {"--cluster-cidr=" + PodSubnet + "\n", "--cluster-cidr=" + cidrs + "\n"}}, "")
}

// DualStack is the networking section docs/operations/install.md gives
// kubeadm for both families, and its podSubnet: the CCM's --cluster-cidr.
func DualStack() (networking, podSubnets string, err error) {
	b, err := framework.MarkdownBlock("docs/operations/install.md", "kubeadm's networking", "yaml")
	if err != nil {
		return "", "", err
	}
	var doc struct {
		Networking struct {
			PodSubnet string `yaml:"podSubnet"`
		} `yaml:"networking"`
	}
	if err := yaml.Unmarshal([]byte(b.Text), &doc); err != nil {
		return "", "", fmt.Errorf("%s:%d: %w", b.File, b.Line, err)
	}
	if want := PodSubnet + "," + PodSubnet6; doc.Networking.PodSubnet != want {
		return "", "", fmt.Errorf("%s:%d: podSubnet %q; the lab's pod routes are checked in %s", b.File, b.Line, doc.Networking.PodSubnet, want)
	}
	return b.Text, doc.Networking.PodSubnet, nil
}

// inventorySize is how many machines the lab's inventory lists: the
// control plane and workers yet to join, as a site's inventory lists its
// racks.
const inventorySize = 8

// CloudConfig is the lab's inventory (a zone per machine, an address of
// each family), its VIP pool of both families,
// routes on, and the router as the BGP peer.
func (l *Lab) CloudConfig() string {
	var b strings.Builder
	b.WriteString("inventory:\n  machines:\n")
	for i := range inventorySize {
		name, ip := machine(i)
		fmt.Fprintf(&b, "  - name: %s\n    zone: lab-%s\n    addresses: [{type: InternalIP, address: %s}, {type: InternalIP, address: \"%s\"}]\n", name, name, ip, ip6Of(ip))
	}
	fmt.Fprintf(&b, `loadBalancer:
  pools:
  - name: lab
    addresses: [%s, "%s"]
    avoidBuggyIPs: true
routes: {}
bgp:
  localASN: %d
  peers:
  - address: %s
    asn: %d
    holdTime: 9s
    connectRetryTime: 1s
    gracefulRestart: {restartTime: 15s}
`, VIPPool, VIPPool6, CCMASN, LabGW, RouterASN)
	return b.String()
}

// apply applies a manifest's text with kubectl.
func (l *Lab) apply(name, text string) error {
	path := filepath.Join(l.Dir, name)
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		return err
	}
	_, err := l.Kubectl("apply", "-f", path)
	return err
}

// InstallPrerequisites applies what the README applies before running the
// CCM as a Deployment: its rights and the finalizer policy.
func (l *Lab) InstallPrerequisites() error { return l.install("deploy/rbac.yaml") }

// InstallStaticPodPrerequisites is the same for a static pod: the rights
// are bound to its user too.
func (l *Lab) InstallStaticPodPrerequisites() error { return l.install("deploy/static-pod-rbac.yaml") }

func (l *Lab) install(rights string) error {
	files := []string{rights, "deploy/load-balancer-finalizer.yaml"}
	if has, err := framework.ServesFinalizerPolicy(l.Admin); err != nil {
		return err
	} else if !has {
		files = files[:1] // install.md: the policy needs 1.36; leave it out before
	}
	for _, f := range files {
		text, err := LabCopy(f, nil, "")
		if err != nil {
			return err
		}
		if err := l.apply(filepath.Base(f), text); err != nil {
			return err
		}
	}
	return nil
}

// InstallDeployment runs the CCM as the README's kubeadm section does: the
// cloud config as the ConfigMap, then deploy/deployment.yaml.
func (l *Lab) InstallDeployment(image string) error {
	if err := l.InstallPrerequisites(); err != nil {
		return err
	}
	cm := &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "baremetal-cloud-config"},
		Data: map[string]string{"cloud.yaml": l.CloudConfig()}}
	if _, err := l.Admin.CoreV1().ConfigMaps("kube-system").Create(context.Background(), cm, metav1.CreateOptions{}); err != nil {
		return err
	}
	text, err := Manifest("deploy/deployment.yaml", image)
	if err != nil {
		return err
	}
	return l.apply("deployment.yaml", text)
}

// RemoveDeployment undoes InstallDeployment's Deployment and ConfigMap,
// and returns once its Pods are gone: a replica still terminating would
// hold the host's address, port and BGP session that a CCM started next
// on the node needs.
func (l *Lab) RemoveDeployment() error {
	if out, err := l.Kubectl("-n", "kube-system", "delete", "deployment", "baremetal-cloud-controller-manager", "--cascade=foreground", "--wait"); err != nil {
		return fmt.Errorf("%w: %s", err, out)
	}
	l.Admin.CoreV1().ConfigMaps("kube-system").Delete(context.Background(), "baremetal-cloud-config", metav1.DeleteOptions{})
	return l.WaitCCMPodsGone()
}

// WaitCCMPodsGone returns once no Pod of a CCM Deployment is left.
func (l *Lab) WaitCCMPodsGone() error {
	if err := framework.Poll(2*time.Minute, 200*time.Millisecond, func() (bool, string) {
		pods, err := l.Admin.CoreV1().Pods("kube-system").List(context.Background(), metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=baremetal-cloud-controller-manager"})
		if err != nil {
			return false, err.Error()
		}
		return len(pods.Items) == 0, fmt.Sprintf("%d CCM Pods", len(pods.Items))
	}); err != nil {
		return fmt.Errorf("CCM Pods still there after the Deployment was deleted: %w", err)
	}
	return nil
}
