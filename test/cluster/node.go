package cluster

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/test/framework"
)

// Node is one machine of the lab: a network namespace on the lab bridge
// and a private mount and UTS namespace, held by a sleeping process, in
// which containerd, the kubelet and kubeadm run. The paths the kubelet and
// kubeadm hard-code are this node's own directories there, and the global
// sysctls the kubelet writes are files of its own, so no file of the host
// is written (only the mount points are created where they are missing).
type Node struct {
	Name string
	IP   string // on the lab bridge
	IP6  string // on the lab bridge too
	NS   *framework.Netns
	Dir  string // on the host; its fs/ holds the node's private paths

	holder     *framework.Process
	containerd *framework.Process
	kubelet    *framework.Process
}

// privateDirs are the node's own, bound over the host's in its mount
// namespace.
var privateDirs = []string{"/etc/kubernetes", "/etc/cni/net.d", "/etc/baremetal", "/var/lib/kubelet",
	"/var/lib/etcd", "/var/lib/containerd", "/var/log/pods", "/var/log/containers", "/run"}

// privateSysctls are the global sysctls the kubelet sets; the node gets
// copies.
var privateSysctls = []string{"vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic", "kernel/panic_on_oops",
	"kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes"}

// Path is where the node's path p lives on the host.
func (n *Node) Path(p string) string { return filepath.Join(n.Dir, "fs", p) }

func (n *Node) cgroupRoot() string { return "/bm-" + n.Name }

// start makes the namespaces and starts containerd with the images loaded.
func (n *Node) start(images []string) error {
	for _, d := range privateDirs {
		if err := os.MkdirAll(n.Path(d), 0o755); err != nil {
			return err
		}
	}
	if err := n.makeCgroups(); err != nil {
		return err
	}
	var script strings.Builder
	fmt.Fprintf(&script, "set -e\nhostname %s\n", n.Name)
	for _, d := range privateDirs {
		fmt.Fprintf(&script, "mkdir -p %s && mount --bind %s %s\n", d, n.Path(d), d)
	}
	for _, s := range privateSysctls {
		copyPath := filepath.Join(n.Dir, "sysctl-"+strings.ReplaceAll(s, "/", "_"))
		fmt.Fprintf(&script, "cat /proc/sys/%s > %s && mount --bind %s /proc/sys/%s\n", s, copyPath, copyPath, s)
	}
	// kubeadm restarts the kubelet with systemctl where it finds one; here
	// the harness runs the kubelet, as a node without systemd would.
	script.WriteString("if [ -e /usr/bin/systemctl ]; then mount --bind /bin/false /usr/bin/systemctl; fi\n")
	fmt.Fprintf(&script, "touch %s\nexec sleep infinity\n", filepath.Join(n.Dir, "ready"))
	var err error
	n.holder, err = framework.StartProcess("nsenter", n.Dir, "namespaces", 0, nil,
		"--net=/run/netns/"+n.NS.Name, "--", "unshare", "--mount", "--uts", "--propagation", "private", "--", "sh", "-c", script.String())
	if err != nil {
		return err
	}
	if err := framework.Poll(20*time.Second, 200*time.Millisecond, func() (bool, string) {
		_, err := os.Stat(filepath.Join(n.Dir, "ready"))
		return err == nil, fmt.Sprint(err)
	}); err != nil {
		return fmt.Errorf("node %s: its namespaces: %w\n%s", n.Name, err, n.holder.Logs())
	}
	if err := n.startContainerd(); err != nil {
		return err
	}
	for _, img := range images {
		if out, err := n.Run(append(ctr, "images", "import", "--local", img)...); err != nil {
			return fmt.Errorf("node %s: importing %s: %w\n%s", n.Name, img, err, out)
		}
	}
	return nil
}

// ctr is the command line of containerd's client on the node's socket.
var ctr = []string{framework.ToolsBin() + "/ctr", "--address", "/run/containerd/containerd.sock", "--namespace", "k8s.io"}

// startContainerd starts containerd and waits until it answers.
func (n *Node) startContainerd() error {
	config := filepath.Join(n.Dir, "containerd.toml")
	if err := os.WriteFile(config, []byte(containerdConfig), 0o644); err != nil {
		return err
	}
	var err error
	if n.containerd, err = n.Start("containerd", framework.ToolsBin()+"/containerd", "--config", config); err != nil {
		return err
	}
	if err := framework.Poll(30*time.Second, 200*time.Millisecond, func() (bool, string) {
		_, err := n.Run(append(ctr, "version")...)
		return err == nil, fmt.Sprint(err)
	}); err != nil {
		return fmt.Errorf("node %s: containerd did not answer: %w\n%s", n.Name, err, framework.Tail(n.containerd.Logs(), 20))
	}
	return nil
}

// containerdConfig is containerd v2's CRI set up for this machine: runc
// from Debian under cgroupfs, CNI plugins from Debian, the local pause
// image, and restrict_oom_score_adj, as root here lacks CAP_SYS_RESOURCE
// and runc could not give the pause container its -998.
const containerdConfig = `version = 3
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.blockfile", "io.containerd.snapshotter.v1.erofs"]
[plugins."io.containerd.cri.v1.images"]
  snapshotter = "overlayfs"
  [plugins."io.containerd.cri.v1.images".pinned_images]
    sandbox = "registry.k8s.io/pause:3.10.2"
[plugins."io.containerd.cri.v1.runtime"]
  netns_mounts_under_state_dir = true
  restrict_oom_score_adj = true
  [plugins."io.containerd.cri.v1.runtime".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.cri.v1.runtime".cni]
    bin_dirs = ["/usr/lib/cni"]
    conf_dir = "/etc/cni/net.d"
`

// enter is the command line that runs args inside the node.
func (n *Node) enter(args ...string) []string {
	return append([]string{"--target", strconv.Itoa(n.holder.PID()), "--mount", "--net", "--uts", "--"}, args...)
}

// Start runs a long-lived process inside the node; its log is name.log in
// the node's directory.
func (n *Node) Start(name string, args ...string) (*framework.Process, error) {
	return framework.StartProcess("nsenter", n.Dir, name, 0, []string{"PATH=" + framework.ToolsBin() + ":" + os.Getenv("PATH")}, n.enter(args...)...)
}

// Run runs a command inside the node and returns its output.
func (n *Node) Run(args ...string) (string, error) {
	cmd := exec.Command("nsenter", n.enter(args...)...)
	cmd.Env = append(os.Environ(), "PATH="+framework.ToolsBin()+":"+os.Getenv("PATH"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("on %s: %s: %w", n.Name, strings.Join(args, " "), err)
	}
	return string(out), nil
}

// startKubelet runs the kubelet as kubeadm's systemd drop-in does, once
// kubeadm has written its flags and configuration (or not, if kubeadm is
// done first).
func (n *Node) startKubelet(kubeadmDone <-chan struct{}) error {
	flagsFile := n.Path("/var/lib/kubelet/kubeadm-flags.env")
	written := func() bool {
		_, e1 := os.Stat(flagsFile)
		_, e2 := os.Stat(n.Path("/var/lib/kubelet/config.yaml"))
		return e1 == nil && e2 == nil
	}
	for !written() {
		select {
		case <-kubeadmDone:
			if !written() {
				return nil // kubeadm failed before; its error says why
			}
		case <-time.After(200 * time.Millisecond):
		}
	}
	raw, err := os.ReadFile(flagsFile)
	if err != nil {
		return err
	}
	line := strings.TrimSpace(string(raw))
	line = strings.TrimPrefix(line, "KUBELET_KUBEADM_ARGS=")
	line = strings.Trim(line, `"`)
	args := []string{framework.ToolsBin() + "/kubelet",
		"--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf",
		"--kubeconfig=/etc/kubernetes/kubelet.conf",
		"--config=/var/lib/kubelet/config.yaml",
		"--config-dir=" + filepath.Join(n.Dir, "kubelet.conf.d")}
	args = append(args, strings.Fields(line)...)
	n.kubelet, err = n.Start("kubelet", args...)
	return err
}

// StopKubelet stops the kubelet, as a crashed or stopped service would be;
// the node's containers go on running.
func (n *Node) StopKubelet() {
	if n.kubelet != nil {
		n.kubelet.Stop()
		n.kubelet = nil
	}
}

// RestartKubelet restarts the kubelet with the flags kubeadm's files now
// give it (systemctl restart kubelet, on a node with systemd); the node's
// containers go on running.
func (n *Node) RestartKubelet() error {
	n.StopKubelet()
	done := make(chan struct{})
	close(done)
	return n.startKubelet(done)
}

// PowerOff is the machine losing power: its kubelet, containerd, the
// shims and every container are killed at once, with nothing told to the
// API server; its network namespace, disks (directories) and images stay,
// as a powered-off machine's disks do.
func (n *Node) PowerOff() {
	for _, p := range []*framework.Process{n.kubelet, n.containerd} {
		if p != nil {
			p.Kill()
		}
	}
	n.kubelet, n.containerd = nil, nil
	killSharing(n.holder.PID(), "mnt")
	for _, d := range cgroupDirs(n.cgroupRoot()) {
		killCgroupTree(d)
	}
}

// PowerOn boots the machine again: containerd, then the kubelet with the
// configuration kubeadm wrote when it joined.
func (n *Node) PowerOn() error {
	if err := n.makeCgroups(); err != nil {
		return err
	}
	if err := n.startContainerd(); err != nil {
		return err
	}
	return n.RestartKubelet()
}

// makeCgroups creates the node's cgroup root in every cgroup v1 hierarchy
// (the kubelet's cgroupRoot must exist), or under cgroup v2.
func (n *Node) makeCgroups() error {
	for _, d := range cgroupDirs(n.cgroupRoot()) {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("cgroup %s: %w (the real-cluster tests need writable cgroups)", d, err)
		}
		if filepath.Base(filepath.Dir(d)) == "cpuset" {
			for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
				v, err := os.ReadFile(filepath.Join(filepath.Dir(d), f))
				if err != nil {
					return err
				}
				if err := os.WriteFile(filepath.Join(d, f), v, 0o644); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func cgroupDirs(root string) []string {
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		return []string{filepath.Join("/sys/fs/cgroup", root)}
	}
	entries, _ := os.ReadDir("/sys/fs/cgroup")
	var out []string
	for _, e := range entries {
		if e.IsDir() && e.Name() != "unified" {
			out = append(out, filepath.Join("/sys/fs/cgroup", e.Name(), root))
		}
	}
	return out
}

// stop ends everything the node ran: its processes, every process left in
// its cgroups (containers outlive containerd), then the cgroups.
func (n *Node) stop() {
	for _, p := range []*framework.Process{n.kubelet, n.containerd} {
		if p != nil {
			p.Kill()
		}
	}
	if n.holder != nil {
		killSharing(n.holder.PID(), "mnt")
		n.holder.Kill()
	}
	for _, d := range cgroupDirs(n.cgroupRoot()) {
		killCgroupTree(d)
	}
}

// killSharing kills every process in the same namespace of kind as pid.
func killSharing(pid int, kind string) {
	for _, other := range sharing(pid, kind) {
		syscall.Kill(other, syscall.SIGKILL)
	}
}

// sharing are the processes, other than pid, in the same namespace of kind
// as pid.
func sharing(pid int, kind string) []int {
	want, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/%s", pid, kind))
	if err != nil {
		return nil
	}
	var out []int
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		other, err := strconv.Atoi(p.Name())
		if err != nil || other == pid {
			continue
		}
		if ns, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/%s", other, kind)); err == nil && ns == want {
			out = append(out, other)
		}
	}
	return out
}

// killCgroupTree kills the tasks of a cgroup and its children and removes
// them, deepest first.
func killCgroupTree(dir string) {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if e.IsDir() {
			killCgroupTree(filepath.Join(dir, e.Name()))
		}
	}
	for range 50 {
		raw, _ := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
		pids := strings.Fields(string(raw))
		if len(pids) == 0 {
			break
		}
		for _, p := range pids {
			if pid, err := strconv.Atoi(p); err == nil {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	os.Remove(dir)
}
