// Package framework runs the test control plane (etcd and kube-apiserver,
// built from source by hack/tools) and the real CCM binary against it.
package framework

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// RepoRoot is the root of this repository: where this file is, or in a
// binary built with -trimpath (which records no such path, as make demo
// builds, to share the CCM build's packages) the working directory or the
// nearest one above it with a go.mod.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	if filepath.IsAbs(file) {
		return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
	}
	dir, _ := os.Getwd()
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d
		}
		if d == filepath.Dir(d) {
			return dir
		}
	}
}

// ToolsBin is where `make tools` puts kube-apiserver, etcd, kubectl and
// kubeadm, or BAREMETAL_TOOLS_BIN: make minors-test names there an older
// Kubernetes minor's (hack/tools/bin/k8s-1.NN), and every test then runs
// that minor's control plane, kubelets, kubeadm and e2e.test.
func ToolsBin() string {
	if d := os.Getenv("BAREMETAL_TOOLS_BIN"); d != "" {
		if !filepath.IsAbs(d) {
			d = filepath.Join(RepoRoot(), d)
		}
		return d
	}
	return filepath.Join(RepoRoot(), "hack", "tools", "bin")
}

// EnsureTools builds the test control plane (kube-apiserver and etcd) if
// it is not built yet.
func EnsureTools() error {
	for _, b := range []string{"kube-apiserver", "etcd"} {
		if _, err := os.Stat(filepath.Join(ToolsBin(), b)); err != nil {
			cmd := exec.Command("make", "-C", RepoRoot(), "control-plane")
			cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
			if err := cmd.Run(); err != nil {
				return fmt.Errorf("building the test control plane (make control-plane): %w", err)
			}
			return nil
		}
	}
	return nil
}

// Cluster is a running etcd and kube-apiserver with RBAC on, listening on
// loopback at random ports, with its state in temporary directories.
type Cluster struct {
	env *envtest.Environment
	// Dir holds this cluster's files: kubeconfigs, logs.
	Dir string
	// Admin is a client with full rights, for test set-up and assertions.
	Admin       kubernetes.Interface
	AdminConfig *rest.Config
	// AdminKubeconfig is the path of a kubeconfig file for Admin.
	AdminKubeconfig string
	// AuditLog is the API server's audit log (JSON lines, metadata level).
	AuditLog string
	// restarted is kube-apiserver once RestartAPIServer has run it again.
	restarted *Process
}

// AuditEvent is what the audit log says of one request.
type AuditEvent struct {
	Verb string `json:"verb"`
	User struct {
		Username string `json:"username"`
	} `json:"user"`
	UserAgent string `json:"userAgent"`
	ObjectRef struct {
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
	} `json:"objectRef"`
	StageTimestamp time.Time `json:"stageTimestamp"`
}

// Audit reads the audit log.
func (c *Cluster) Audit() ([]AuditEvent, error) {
	data, err := os.ReadFile(c.AuditLog)
	if err != nil {
		return nil, err
	}
	var out []AuditEvent
	for _, line := range strings.Split(string(data), "\n") {
		var ev AuditEvent
		if line != "" && json.Unmarshal([]byte(line), &ev) == nil {
			out = append(out, ev)
		}
	}
	return out, nil
}

// CCMUser is who the tests' CCMs are: the ServiceAccount of deploy/rbac.yaml.
const CCMUser = "system:serviceaccount:kube-system:baremetal-cloud-controller-manager"

// Writes is the write requests user made since from, from the audit log.
func (c *Cluster) Writes(user string, from time.Time) ([]AuditEvent, error) {
	events, err := c.Audit()
	if err != nil {
		return nil, err
	}
	var out []AuditEvent
	for _, ev := range events {
		if ev.User.Username != user || ev.StageTimestamp.Before(from) {
			continue
		}
		switch ev.Verb {
		case "create", "update", "patch", "delete", "deletecollection":
			out = append(out, ev)
		}
	}
	return out, nil
}

// StartCluster starts a new control plane.
func StartCluster() (*Cluster, error) {
	if err := EnsureTools(); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "baremetal-ccm-test-")
	if err != nil {
		return nil, err
	}
	env := &envtest.Environment{
		BinaryAssetsDirectory:    ToolsBin(),
		ControlPlaneStartTimeout: 2 * time.Minute,
		ControlPlaneStopTimeout:  time.Minute,
	}
	// Every request is audited (metadata only), so that tests and
	// benchmarks can count what the CCM wrote.
	policy := filepath.Join(dir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte("apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [RequestReceived]\nrules:\n- level: Metadata\n"), 0o644); err != nil {
		return nil, err
	}
	api := env.ControlPlane.GetAPIServer()
	args := api.Configure()
	args.Set("audit-policy-file", policy)
	args.Set("audit-log-path", filepath.Join(dir, "audit.log"))
	args.Set("authorization-mode", "RBAC")
	args.Set("bind-address", "127.0.0.1")
	// Events are what users read; keep them for the whole test.
	args.Set("event-ttl", "1h")
	// Dual-stack Services need a range of each family (addresses in them
	// are only ever written into objects).
	args.Set("service-cluster-ip-range", "10.0.0.0/16,fd00:10::/108")
	if os.Getenv("TEST_CONTROL_PLANE_OUTPUT") != "" {
		env.AttachControlPlaneOutput = true
	}
	cfg, err := env.Start()
	if err != nil {
		return nil, fmt.Errorf("starting kube-apiserver and etcd: %w", err)
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	c := &Cluster{env: env, Dir: dir, Admin: client, AdminConfig: cfg, AdminKubeconfig: filepath.Join(dir, "admin.kubeconfig"),
		AuditLog: filepath.Join(dir, "audit.log")}
	if err := os.WriteFile(c.AdminKubeconfig, env.KubeConfig, 0o600); err != nil {
		return nil, err
	}
	return c, nil
}

// Stop stops the control plane and removes its files.
func (c *Cluster) Stop() error {
	if c.restarted != nil {
		c.restarted.Stop()
	}
	err := c.env.Stop()
	if os.Getenv("TEST_KEEP_FILES") == "" {
		os.RemoveAll(c.Dir)
	}
	return err
}

// Apply applies every object of a YAML file as admin, by server-side
// apply (as kubectl apply --server-side does), so that nothing but the
// API server is needed.
func (c *Cluster) Apply(ctx context.Context, path string) error {
	text, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(c.AdminConfig)
	if err != nil {
		return err
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(c.Admin.Discovery()))
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(text), 4096)
	for {
		var obj unstructured.Unstructured
		if err := dec.Decode(&obj.Object); errors.Is(err, io.EOF) {
			return nil
		} else if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		if len(obj.Object) == 0 {
			continue
		}
		gvk := obj.GroupVersionKind()
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return fmt.Errorf("%s: %s: %w", path, gvk, err)
		}
		var r dynamic.ResourceInterface = dyn.Resource(m.Resource)
		if m.Scope.Name() == meta.RESTScopeNameNamespace {
			r = dyn.Resource(m.Resource).Namespace(obj.GetNamespace())
		}
		if _, err := r.Apply(ctx, obj.GetName(), &obj, metav1.ApplyOptions{FieldManager: "baremetal-test", Force: true}); err != nil {
			return fmt.Errorf("%s: applying %s %s: %w", path, gvk.Kind, obj.GetName(), err)
		}
	}
}

// Kubectl runs the built kubectl as admin and returns its combined output.
func (c *Cluster) Kubectl(args ...string) (string, error) {
	cmd := exec.Command(filepath.Join(ToolsBin(), "kubectl"), append([]string{"--kubeconfig", c.AdminKubeconfig}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("kubectl %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// ServiceAccountKubeconfig writes a kubeconfig that authenticates as the
// service account, with a token from the TokenRequest API, and returns
// its path.
func (c *Cluster) ServiceAccountKubeconfig(ctx context.Context, namespace, name string) (string, error) {
	return c.ServiceAccountKubeconfigVia(ctx, namespace, name, c.AdminConfig.Host)
}

// ServiceAccountKubeconfigVia is ServiceAccountKubeconfig for a client that
// reaches the API server at another URL (through a forward).
func (c *Cluster) ServiceAccountKubeconfigVia(ctx context.Context, namespace, name, server string) (string, error) {
	expiry := int64(24 * time.Hour / time.Second)
	tr, err := c.Admin.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiry},
	}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("requesting a token for service account %s/%s: %w", namespace, name, err)
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["test"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: c.AdminConfig.CAData}
	kc.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	kc.Contexts["test"] = &clientcmdapi.Context{Cluster: "test", AuthInfo: name}
	kc.CurrentContext = "test"
	path := filepath.Join(c.Dir, fmt.Sprintf("%s-%s-%d.kubeconfig", namespace, name, time.Now().UnixNano()))
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		return "", err
	}
	return path, nil
}

// StopAPIServer kills kube-apiserver (etcd keeps running), as a crash or a
// lost control-plane machine would, and returns a function that starts it
// again with the same command line, so with the same port, certificates
// and service-account keys. (A SIGTERM would have it drain its watches for
// a minute or more, refusing connections all along: an outage of no
// controlled length.)
func (c *Cluster) StopAPIServer() (restart func() error, err error) {
	port := c.env.ControlPlane.APIServer.SecureServing.Port
	pid, cmdline, err := findProcess("kube-apiserver", "--secure-port="+port)
	if err != nil {
		return nil, err
	}
	if c.restarted != nil {
		c.restarted.Stop()
		c.restarted = nil
	} else if err := killPID(pid); err != nil {
		return nil, err
	}
	return func() error {
		p, err := StartProcess(cmdline[0], c.Dir, fmt.Sprintf("kube-apiserver-%d", time.Now().UnixNano()), 0, nil, cmdline[1:]...)
		if err != nil {
			return err
		}
		c.restarted = p
		deadline := time.Now().Add(2 * time.Minute)
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_, err := c.Admin.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
			cancel()
			if err == nil {
				return nil
			}
			if done, exitErr := p.Exited(); done || time.Now().After(deadline) {
				return fmt.Errorf("kube-apiserver did not come back (%v, exited: %v): %v\n%s", err, exitErr, done, Tail(p.Logs(), 30))
			}
			time.Sleep(200 * time.Millisecond)
		}
	}, nil
}

// findProcess finds the process running the named binary with arg among
// its arguments, and returns its PID and command line.
func findProcess(binary, arg string) (int, []string, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, nil, err
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		raw, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || len(raw) == 0 {
			continue
		}
		cmdline := strings.Split(strings.TrimSuffix(string(raw), "\x00"), "\x00")
		if filepath.Base(cmdline[0]) == binary && slices.Contains(cmdline, arg) {
			return pid, cmdline, nil
		}
	}
	return 0, nil, fmt.Errorf("no %s process with %s", binary, arg)
}

// killPID kills the process and waits until it has gone (envtest, its
// parent, reaps it).
func killPID(pid int) error {
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return err
	}
	for deadline := time.Now().Add(time.Minute); syscall.Kill(pid, 0) == nil; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			return fmt.Errorf("kube-apiserver (pid %d) is still there a minute after SIGKILL", pid)
		}
	}
	return nil
}
