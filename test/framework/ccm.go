package framework

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// BuildCCM builds the CCM binary with `make build`, as a user would, and
// returns its path.
func BuildCCM() (string, error) {
	cmd := exec.Command("make", "-C", RepoRoot(), "build")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building the CCM: %w\n%s", err, b)
	}
	return filepath.Join(RepoRoot(), "bin", "baremetal-cloud-controller-manager"), nil
}

// FreePort returns a TCP port on loopback that nothing listens on now.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Process is a running CCM (or any other command) whose output is kept.
type Process struct {
	Name       string
	SecurePort int
	cmd        *exec.Cmd
	logPath    string
	out        *lockedBuffer
	done       chan struct{}
	exitErr    error
	// excused are stretches of the log (byte offsets) whose refusals do
	// not count: see ExcuseRefusals.
	excused [][2]int
}

// LogSize is how much the process has logged so far: an offset for
// ExcuseRefusals.
func (p *Process) LogSize() int { return len(p.Logs()) }

// ExcuseRefusals makes Refusal pass over what was logged between the two
// offsets: a kube-apiserver that is starting again refuses requests until
// its RBAC authorizer has caught up.
func (p *Process) ExcuseRefusals(from, to int) { p.excused = append(p.excused, [2]int{from, to}) }

// Refusal is the first log line in which the process was refused
// something by RBAC ("forbidden"), outside the excused stretches.
func (p *Process) Refusal() string {
	logs, offset := p.Logs(), 0
	for _, line := range strings.SplitAfter(logs, "\n") {
		start := offset
		offset += len(line)
		if !strings.Contains(line, "forbidden") {
			continue
		}
		excused := false
		for _, e := range p.excused {
			excused = excused || (start >= e[0] && start < e[1])
		}
		if !excused {
			return strings.TrimSuffix(line, "\n")
		}
	}
	return ""
}

type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
	f   *os.File
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.f.Write(p)
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// CCM says how to run one CCM replica.
type CCM struct {
	Binary      string
	Dir         string // for its log and certificates
	Name        string // names the log file
	Kubeconfig  string
	CloudConfig string
	Args        []string // added to, and overriding, the defaults
	Env         []string // added to the test's environment
	// Netns, if set, is the network namespace to run in.
	Netns string
}

// Start runs the CCM on a free loopback secure port, with short periods so
// that tests are quick. Its output goes to Name.log in Dir.
func (c CCM) Start() (*Process, error) {
	port, err := FreePort()
	if c.Netns != "" {
		port, err = FreePortIn(c.Netns)
	}
	if err != nil {
		return nil, err
	}
	args := []string{
		"--kubeconfig=" + c.Kubeconfig,
		"--authentication-kubeconfig=" + c.Kubeconfig,
		"--authorization-kubeconfig=" + c.Kubeconfig,
		"--cloud-config=" + c.CloudConfig,
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
		"--cert-dir=" + filepath.Join(c.Dir, c.Name+"-certs"),
		"--leader-elect=true",
		"--leader-elect-lease-duration=4s",
		"--leader-elect-renew-deadline=3s",
		"--leader-elect-retry-period=1s",
		"--node-monitor-period=1s",
		"--node-status-update-frequency=2s",
		"--configure-cloud-routes=false",
		"--v=2",
	}
	args = append(args, c.Args...)
	if c.Netns != "" {
		// ip execs the binary: the process is the CCM itself.
		return StartProcess("ip", c.Dir, c.Name, port, c.Env, append([]string{"netns", "exec", c.Netns, c.Binary}, args...)...)
	}
	return StartProcess(c.Binary, c.Dir, c.Name, port, c.Env, args...)
}

// StartProcess starts binary with args, its output kept in memory and in
// name.log in logDir.
func StartProcess(binary, logDir, name string, securePort int, env []string, args ...string) (*Process, error) {
	f, err := os.Create(filepath.Join(logDir, name+".log"))
	if err != nil {
		return nil, err
	}
	p := &Process{Name: name, SecurePort: securePort, logPath: f.Name(), out: &lockedBuffer{f: f}, done: make(chan struct{})}
	p.cmd = exec.Command(binary, args...)
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("starting %s: %w", binary, err)
	}
	go func() {
		p.exitErr = p.cmd.Wait()
		f.Close()
		close(p.done)
	}()
	return p, nil
}

// PID is the process ID.
func (p *Process) PID() int { return p.cmd.Process.Pid }

// Logs returns everything the process printed so far.
func (p *Process) Logs() string { return p.out.String() }

// LogPath is the file the output is also written to.
func (p *Process) LogPath() string { return p.logPath }

// Exited reports whether the process has ended, and how.
func (p *Process) Exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.exitErr
	default:
		return false, nil
	}
}

// Wait waits for the process to end by itself.
func (p *Process) Wait(timeout time.Duration) error {
	select {
	case <-p.done:
		return p.exitErr
	case <-time.After(timeout):
		return fmt.Errorf("%s still running after %s", p.Name, timeout)
	}
}

// Kill ends the process at once, as a crash would (SIGKILL).
func (p *Process) Kill() {
	p.cmd.Process.Kill()
	<-p.done
}

// Stop asks the process to end (SIGTERM) and waits; it kills it after 20 s.
func (p *Process) Stop() {
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(20 * time.Second):
		p.Kill()
	}
}

// LogContains reports whether the output has every one of the strings on
// one line.
func (p *Process) LogContains(parts ...string) bool { return p.LogLine(parts...) != "" }

// LogLine returns the first line of output that has every one of the
// strings, or "".
func (p *Process) LogLine(parts ...string) string {
	for _, line := range strings.Split(p.Logs(), "\n") {
		all := true
		for _, s := range parts {
			if !strings.Contains(line, s) {
				all = false
				break
			}
		}
		if all {
			return line
		}
	}
	return ""
}

// ShippedLeaderElection is the leader-election flags of deploy/, for the
// tests whose figures the docs quote at the shipped settings.
func ShippedLeaderElection(t testing.TB) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(RepoRoot(), "deploy", "deployment.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	flags := regexp.MustCompile(`--leader-elect-[a-z-]+=\S+`).FindAllString(string(b), -1)
	if len(flags) == 0 {
		t.Fatal("deploy/deployment.yaml sets no --leader-elect-* flags")
	}
	return flags
}
