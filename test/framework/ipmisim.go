package framework

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// IPMISim is a BMC: OpenIPMI's ipmi_sim (Debian openipmi) serving IPMI
// v2.0 over LAN (RMCP+) on a UDP port of loopback, one user with admin
// rights. Its chassis's power is a file that its chassis_control script
// reads and writes, so that `chassis power off` through the BMC and the
// test's SetPower both switch it.
type IPMISim struct {
	// Addr is host:port; User and Password log in.
	Addr, User, Password string
	// Netns, if set, is the host the BMC runs in.
	Netns *Netns
	dir   string
	mu    sync.Mutex
	cmd   *exec.Cmd
}

// StartIPMISim starts a BMC on 127.0.0.1 with the machine powered on; it
// is stopped at the test's end.
func StartIPMISim(t testing.TB, name string) *IPMISim {
	t.Helper()
	port, err := freeUDPPort()
	if err != nil {
		t.Fatal(err)
	}
	return startIPMISim(t, name, nil, "127.0.0.1", port)
}

// StartIPMISimIn starts a BMC in a host of the test's (a namespace), on
// ip and IPMI's own port, 623.
func StartIPMISimIn(t testing.TB, name string, ns *Netns, ip string) *IPMISim {
	t.Helper()
	return startIPMISim(t, name, ns, ip, 623)
}

func startIPMISim(t testing.TB, name string, ns *Netns, ip string, port int) *IPMISim {
	t.Helper()
	s, err := NewIPMISim(t.TempDir(), name, ns, ip, port)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return s
}

// NewIPMISim starts a BMC with its files in dir (ns nil: this host's
// network); Stop stops it.
func NewIPMISim(dir, name string, ns *Netns, ip string, port int) (*IPMISim, error) {
	if err := EnsureCommands(map[string]string{"ipmi_sim": "openipmi"}); err != nil {
		return nil, err
	}
	dir = filepath.Join(dir, "bmc-"+name)
	if err := os.MkdirAll(filepath.Join(dir, "state"), 0o700); err != nil {
		return nil, err
	}
	s := &IPMISim{Addr: net.JoinHostPort(ip, fmt.Sprint(port)), User: "admin", Password: "bmc-" + name, Netns: ns, dir: dir}
	files := map[string]string{
		"lan.conf": fmt.Sprintf(`name "%s"
set_working_mc 0x20
  startlan 1
    addr %s %d
    priv_limit admin
    allowed_auths_admin md5
    guid a123456789abcdefa123456789abcdef
  endlan
  chassis_control "%s 0x20"
  user 2 true "%s" "%s" admin 10 md5
`, name, ip, port, filepath.Join(dir, "chassis"), s.User, s.Password),
		"sim.emu": "mc_setbmc 0x20\nmc_add 0x20 0 no-device-sdrs 0x23 0x09 0x08 0x9f 0x1291 0xf02\nmc_enable 0x20\n",
		// ipmi_sim runs it as "chassis 0x20 get power" and "chassis 0x20
		// set power 0|1".
		"chassis": fmt.Sprintf(`#!/bin/sh
power=%s/power
shift
op=$1; shift
case $op in
get) for k in "$@"; do [ "$k" = power ] && echo "power:$(cat $power)"; done ;;
set) while [ -n "$1" ]; do [ "$1" = power ] && echo "$2" > $power; shift 2; done ;;
esac
`, dir),
		"power": "1\n",
	}
	for f, content := range files {
		mode := os.FileMode(0o600)
		if f == "chassis" {
			mode = 0o700
		}
		if err := os.WriteFile(filepath.Join(dir, f), []byte(content), mode); err != nil {
			return nil, err
		}
	}
	return s, s.Start()
}

// freeUDPPort is a UDP port of loopback that nothing listens on now.
func freeUDPPort() (int, error) {
	c, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).Port, nil
}

// Start starts the BMC (again, after Stop) and waits until it listens.
func (s *IPMISim) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		return nil
	}
	args := []string{"ipmi_sim", "-n", "-c", filepath.Join(s.dir, "lan.conf"), "-f", filepath.Join(s.dir, "sim.emu"), "-s", filepath.Join(s.dir, "state")}
	if s.Netns != nil {
		args = append([]string{"ip", "netns", "exec", s.Netns.Name}, args...)
	}
	cmd := exec.Command(args[0], args[1:]...)
	log, err := os.OpenFile(filepath.Join(s.dir, "ipmi_sim.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer log.Close()
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting ipmi_sim: %w", err)
	}
	s.cmd = cmd
	go cmd.Wait()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if s.listening() {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("ipmi_sim does not listen on %s after 10s", s.Addr)
}

// listening is whether something holds the BMC's UDP port.
func (s *IPMISim) listening() bool {
	held := false
	check := func() error {
		c, err := net.ListenPacket("udp", s.Addr)
		if err != nil {
			held = true
			return nil
		}
		return c.Close()
	}
	if s.Netns != nil {
		s.Netns.Do(check)
	} else {
		check()
	}
	return held
}

// Stop stops the BMC: it answers nothing until Start.
func (s *IPMISim) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
	s.cmd = nil
	for i := 0; i < 100 && s.listening(); i++ {
		time.Sleep(20 * time.Millisecond)
	}
}

// SetPower switches the chassis's power, as a person at the machine does.
func (s *IPMISim) SetPower(on bool) {
	v := "0"
	if on {
		v = "1"
	}
	if err := os.WriteFile(filepath.Join(s.dir, "power"), []byte(v+"\n"), 0o600); err != nil {
		panic(err)
	}
}

// Power is the chassis's power as the file holds it.
func (s *IPMISim) Power() bool {
	b, _ := os.ReadFile(filepath.Join(s.dir, "power"))
	return strings.TrimSpace(string(b)) == "1"
}

// WriteCredentials writes the BMC's user name and password into files in
// dir, as a mounted Secret holds them, and returns their paths.
func (s *IPMISim) WriteCredentials(t testing.TB, dir string) (userFile, passwordFile string) {
	t.Helper()
	userFile, passwordFile, err := s.WriteCredentialsTo(dir)
	if err != nil {
		t.Fatal(err)
	}
	return userFile, passwordFile
}

// WriteCredentialsTo is WriteCredentials outside a test.
func (s *IPMISim) WriteCredentialsTo(dir string) (userFile, passwordFile string, err error) {
	userFile, passwordFile = filepath.Join(dir, s.Password+"-user"), filepath.Join(dir, s.Password+"-password")
	for f, v := range map[string]string{userFile: s.User, passwordFile: s.Password} {
		if err := os.WriteFile(f, []byte(v+"\n"), 0o600); err != nil {
			return "", "", err
		}
	}
	return userFile, passwordFile, nil
}
