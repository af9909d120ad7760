package framework

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/config/configtest"
)

// Suite is what a test package shares: the CCM binary, a control plane
// with deploy/rbac.yaml applied, and a kubeconfig for the CCM's
// ServiceAccount, so that the CCM has only the rights it ships with.
type Suite struct {
	Cluster    *Cluster
	Binary     string
	Kubeconfig string
}

// RunSuite sets up a Suite, runs the package's tests against it and
// returns the exit code, for TestMain.
func RunSuite(m *testing.M, suite **Suite) int {
	return RunSuiteWith(m, suite, func(*Suite) (func(), error) { return func() {}, nil })
}

// RunSuiteWith is RunSuite with more set up around the Suite (a package's
// network namespaces, say): setup runs after the Suite has started, and
// the teardown it returns before the Suite stops.
func RunSuiteWith(m *testing.M, suite **Suite, setup func(*Suite) (teardown func(), err error)) int {
	s, err := startSuite()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer s.Cluster.Stop()
	teardown, err := setup(s)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer teardown()
	*suite = s
	return m.Run()
}

func startSuite() (*Suite, error) {
	binary, err := BuildCCM()
	if err != nil {
		return nil, err
	}
	cluster, err := StartCluster()
	if err != nil {
		return nil, err
	}
	s := &Suite{Cluster: cluster, Binary: binary}
	if err := cluster.Install(); err != nil {
		cluster.Stop()
		return nil, err
	}
	if s.Kubeconfig, err = cluster.ServiceAccountKubeconfig(context.Background(), "kube-system", "baremetal-cloud-controller-manager"); err != nil {
		cluster.Stop()
		return nil, err
	}
	return s, nil
}

// Install applies what the README's install applies before the CCM runs:
// its rights and the policy that gives new LoadBalancer Services their
// cleanup finalizer, and waits until the API server applies the policy
// (it loads new policies within a few seconds; Services created before
// that do not get the finalizer).
func (c *Cluster) Install() error {
	if err := c.Apply(context.Background(), filepath.Join(RepoRoot(), "deploy", "rbac.yaml")); err != nil {
		return err
	}
	if !c.HasFinalizerPolicy() {
		return nil // install.md: the policy needs 1.36; leave it out before
	}
	if err := c.Apply(context.Background(), filepath.Join(RepoRoot(), "deploy", "load-balancer-finalizer.yaml")); err != nil {
		return err
	}
	probe := LBService("default", "policy-probe")
	err := Poll(time.Minute, 100*time.Millisecond, func() (bool, string) {
		svc, err := c.Admin.CoreV1().Services("default").Create(context.Background(), probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			return false, err.Error()
		}
		return slices.Contains(svc.Finalizers, LBFinalizer), fmt.Sprintf("a LoadBalancer Service would be created with finalizers %v", svc.Finalizers)
	})
	if err != nil {
		return fmt.Errorf("deploy/load-balancer-finalizer.yaml in force: %w", err)
	}
	return nil
}

// HasFinalizerPolicy says whether the API server takes
// deploy/load-balancer-finalizer.yaml (make minors-test runs 1.35 too).
func (c *Cluster) HasFinalizerPolicy() bool {
	has, err := ServesFinalizerPolicy(c.Admin)
	return has || err != nil // on an error, the apply then says what is wrong
}

// ServesFinalizerPolicy says whether an API server takes
// deploy/load-balancer-finalizer.yaml: a MutatingAdmissionPolicy, GA in
// Kubernetes 1.36 (install.md leaves it out before).
func ServesFinalizerPolicy(client kubernetes.Interface) (bool, error) {
	minor, err := ServerMinor(client)
	return minor >= 36, err
}

// ServerMinor is the Kubernetes minor an API server runs.
func ServerMinor(client kubernetes.Interface) (int, error) {
	v, err := client.Discovery().ServerVersion()
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSuffix(v.Minor, "+"))
}

// LBFinalizer is the upstream service controller's cleanup finalizer.
const LBFinalizer = "service.kubernetes.io/load-balancer-cleanup"

// StartReplica starts a CCM replica for the test and stops it when the
// test ends. A replica refused anything by RBAC fails the test: it runs
// with only the rights of deploy/rbac.yaml, so that is a hole in them. The
// log of a failed test is kept under $TMPDIR/baremetal-test-logs.
func StartReplica(t testing.TB, c CCM) *Process {
	t.Helper()
	if c.Dir == "" {
		c.Dir = t.TempDir()
	}
	p, err := c.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.Stop()
		if line := p.Refusal(); line != "" {
			t.Errorf("%s was refused something by RBAC: %s", p.Name, line)
		}
		if t.Failed() {
			kept := filepath.Join(os.TempDir(), "baremetal-test-logs", strings.ReplaceAll(t.Name(), "/", "_")+"-"+p.Name+".log")
			os.MkdirAll(filepath.Dir(kept), 0o755)
			os.WriteFile(kept, []byte(p.Logs()), 0o644)
			t.Logf("log of %s (whole log kept in %s):\n%s", p.Name, kept, Tail(p.Logs(), 120))
		}
	})
	return p
}

// WaitLeader waits until the replica holds the Lease.
func WaitLeader(t testing.TB, p *Process) {
	t.Helper()
	Eventually(t, 60*time.Second, p.Name+" leads", func() (bool, string) {
		if done, err := p.Exited(); done {
			t.Fatalf("%s exited: %v\n%s", p.Name, err, Tail(p.Logs(), 60))
		}
		return p.LogContains("Successfully acquired lease"), "no lease acquired yet"
	})
}

// Tail is the last lines of s.
func Tail(s string, lines int) string {
	l := strings.Split(s, "\n")
	if len(l) > lines {
		l = l[len(l)-lines:]
	}
	return strings.Join(l, "\n")
}

// Site is one test's CCM set-up: its cloud config, laid out like a
// mounted ConfigMap, and the replicas started on it.
type Site struct {
	T      testing.TB
	Suite  *Suite
	Config *configtest.ConfigDir
}

// NewSite writes cloudConfig for a new site.
func (s *Suite) NewSite(t testing.TB, cloudConfig string) *Site {
	t.Helper()
	site := &Site{T: t, Suite: s, Config: &configtest.ConfigDir{Dir: t.TempDir(), File: "cloud.yaml"}}
	site.WriteConfig(cloudConfig)
	return site
}

// WriteConfig replaces the cloud config.
func (s *Site) WriteConfig(content string) {
	s.T.Helper()
	if err := s.Config.Write(content); err != nil {
		s.T.Fatalf("writing the cloud config: %v", err)
	}
}

// StartReplica starts one replica as the Pod name in kube-system, without
// waiting for it to lead. Its BGP sessions come from 127.0.0.1.
func (s *Site) StartReplica(name string, extraArgs ...string) *Process {
	s.T.Helper()
	return StartReplica(s.T, CCM{
		Binary:      s.Suite.Binary,
		Name:        name,
		Kubeconfig:  s.Suite.Kubeconfig,
		CloudConfig: s.Config.Path(),
		Args:        extraArgs,
		Env:         []string{"POD_NAME=" + name, "POD_NAMESPACE=kube-system"},
	})
}

// StartReplicaFrom starts a replica as on another host: its BGP sessions
// come from source (another loopback address), and its router ID is
// source. It reads a copy of the cloud config that differs from the site's
// only there: replicas on different hosts share one config, and each
// host's routing picks its own address.
func (s *Site) StartReplicaFrom(name, source string, extraArgs ...string) *Process {
	s.T.Helper()
	b, err := os.ReadFile(s.Config.Path())
	if err != nil {
		s.T.Fatal(err)
	}
	own := regexp.MustCompile(`(?m)^( +)asn: (\d+)$`).ReplaceAllString(string(b), "${1}asn: ${2}\n${1}sourceAddress: "+source)
	own = regexp.MustCompile(`(?m)^  routerID: .*$`).ReplaceAllString(own, "  routerID: "+source)
	path := filepath.Join(s.T.TempDir(), "cloud.yaml")
	if err := os.WriteFile(path, []byte(own), 0o644); err != nil {
		s.T.Fatal(err)
	}
	return StartReplica(s.T, CCM{
		Binary:      s.Suite.Binary,
		Name:        name,
		Kubeconfig:  s.Suite.Kubeconfig,
		CloudConfig: path,
		Args:        extraArgs,
		Env:         []string{"POD_NAME=" + name, "POD_NAMESPACE=kube-system"},
	})
}

// StartCCM starts one replica and waits until it leads.
func (s *Site) StartCCM(name string, extraArgs ...string) *Process {
	s.T.Helper()
	p := s.StartReplica(name, extraArgs...)
	WaitLeader(s.T, p)
	return p
}

// StartPeer starts a gobgpd on 127.0.0.1 (AS 64500) that takes every path
// (ADD-PATH) from a CCM on 127.0.0.1 with AS 64512, and from replicas at
// the other addresses, for the test.
func StartPeer(t testing.TB, others ...string) *GoBGPD {
	t.Helper()
	neighbours := []GoBGPNeighbor{{Address: "127.0.0.1", ASN: 64512, AddPath: true}}
	for _, a := range others {
		neighbours = append(neighbours, GoBGPNeighbor{Address: a, ASN: 64512, AddPath: true})
	}
	peer, err := StartGoBGPD(t.TempDir(), "gobgpd", "127.0.0.1", 64500, neighbours)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(peer.Stop)
	return peer
}

// PeerConfig is the bgp section of a cloud config whose speaker peers with
// peer (from StartPeer): AS 64512 to its 64500, hold time 9 s. The peer
// list comes last, so a test may append peers to it.
func PeerConfig(peer *GoBGPD) string {
	return fmt.Sprintf(`bgp:
  localASN: 64512
  routerID: 127.0.0.2
  peers:
  - address: 127.0.0.1
    port: %d
    asn: 64500
    holdTime: 9s
    connectRetryTime: 1s
`, peer.Port)
}

// Metrics reads a replica's /metrics as the cluster admin.
func (s *Suite) Metrics(t testing.TB, p *Process) string {
	t.Helper()
	body, err := s.Cluster.AdminGet(p, "/metrics", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return string(body)
}

// AdminGet reads a path of a CCM's secure port as the cluster admin. Just
// after it starts, a CCM may not have loaded the cluster's client CA yet
// and takes the admin for anonymous: that refusal is retried for 30 s.
func (c *Cluster) AdminGet(p *Process, path string, timeout time.Duration) ([]byte, error) {
	cert, err := tls.X509KeyPair(c.AdminConfig.CertData, c.AdminConfig.KeyData)
	if err != nil {
		return nil, err
	}
	admin := &http.Client{Timeout: timeout, Transport: &http.Transport{TLSClientConfig: &tls.Config{
		InsecureSkipVerify: true, // the CCM's serving certificate is self-signed
		Certificates:       []tls.Certificate{cert},
	}}}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		resp, err := admin.Get(fmt.Sprintf("https://127.0.0.1:%d%s", p.SecurePort, path))
		if err != nil {
			return nil, err
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		switch {
		case err != nil:
			return nil, err
		case resp.StatusCode == http.StatusOK:
			return body, nil
		case resp.StatusCode != http.StatusForbidden || time.Now().After(deadline):
			return nil, fmt.Errorf("admin GET %s of %s: %s: %s", path, p.Name, resp.Status, body)
		}
	}
}
