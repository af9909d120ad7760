package framework

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

// BIRD is a router: Debian's bird2 in a network namespace, exporting what
// it learns over BGP into that namespace's kernel table as its config says.
type BIRD struct {
	ns     *Netns
	socket string
	proc   *Process
}

// StartBIRD runs bird in the foreground in ns with config.
func StartBIRD(ns *Netns, dir, config string) (*BIRD, error) {
	if err := EnsureCommands(map[string]string{"bird": "bird2", "birdc": "bird2"}); err != nil {
		return nil, err
	}
	conf := filepath.Join(dir, "bird.conf")
	if err := os.WriteFile(conf, []byte(config), 0o644); err != nil {
		return nil, err
	}
	b := &BIRD{ns: ns, socket: filepath.Join(dir, "bird.ctl")}
	if out, err := exec.Command("bird", "-p", "-c", conf).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("bird refuses the config: %v\n%s", err, out)
	}
	var err error
	b.proc, err = StartProcess("ip", dir, "bird", 0, nil, "netns", "exec", ns.Name, "bird", "-f", "-c", conf, "-s", b.socket)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, err := b.Birdc("show", "status"); err == nil {
			return b, nil
		}
		if time.Now().After(deadline) {
			b.Stop()
			return nil, fmt.Errorf("bird did not start:\n%s", b.proc.Logs())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// Birdc runs one birdc command against this router.
func (b *BIRD) Birdc(args ...string) (string, error) {
	out, err := exec.Command("birdc", append([]string{"-s", b.socket}, args...)...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("birdc %q: %w: %s", args, err, out)
	}
	return string(out), nil
}

// Logs is what bird printed.
func (b *BIRD) Logs() string { return b.proc.Logs() }

// Stop ends bird.
func (b *BIRD) Stop() {
	if b.proc != nil {
		b.proc.Stop()
	}
}
