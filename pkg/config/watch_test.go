package config

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/test/framework"
)

func TestWatcherFollowsConfigMapSwap(t *testing.T) {
	d := &framework.ConfigDir{Dir: t.TempDir(), File: "cloud.yaml"}
	write := func(s string) {
		t.Helper()
		if err := d.Write(s); err != nil {
			t.Fatal(err)
		}
	}
	write("inventory:\n  machines:\n  - name: a\n")
	path := d.Path()
	cfg, data, err := LoadWithContent(path)
	if err != nil || len(cfg.Inventory.Machines) != 1 {
		t.Fatalf("initial load: %v", err)
	}

	reloads := make(chan *Config, 10)
	failures := make(chan error, 10)
	w := NewWatcher(path, data)
	w.Poll = time.Hour // prove the change events alone are enough
	w.OnReload = func(c *Config) { reloads <- c }
	w.OnError = func(err error) { failures <- err }
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go w.Run(ctx)
	time.Sleep(100 * time.Millisecond) // let the watch start

	write("inventory:\n  machines:\n  - name: a\n    powerState: sleeping\n")
	select {
	case err := <-failures:
		if !strings.Contains(err.Error(), `inventory.machines[0].powerState: "sleeping"`) {
			t.Errorf("reload error does not name the field: %v", err)
		}
	case c := <-reloads:
		t.Fatalf("an invalid config was put in force: %+v", c)
	case <-time.After(5 * time.Second):
		t.Fatal("no error reported for an invalid config")
	}

	write("inventory:\n  machines:\n  - name: a\n  - name: b\n")
	select {
	case c := <-reloads:
		if len(c.Inventory.Machines) != 2 {
			t.Errorf("reloaded config has %d machines, want 2", len(c.Inventory.Machines))
		}
	case err := <-failures:
		t.Fatalf("valid config refused: %v", err)
	case <-time.After(5 * time.Second):
		t.Fatal("valid config not reloaded")
	}
}

func TestWatcherPollsAndReportsMissingFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "cloud.yaml")
	if err := os.WriteFile(path, []byte("inventory: {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	failures := make(chan error, 10)
	w := NewWatcher(path, []byte("inventory: {}\n"))
	w.Poll = 50 * time.Millisecond
	w.OnReload = func(c *Config) { t.Errorf("reload without a valid change: %+v", c) }
	w.OnError = func(err error) { failures <- err }
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go w.Run(ctx)

	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-failures:
		if !strings.Contains(err.Error(), "no such file") {
			t.Errorf("error does not say the file is missing: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("missing file not reported")
	}
	// The same failure is reported once, not at every poll.
	select {
	case err := <-failures:
		t.Errorf("the same failure was reported again: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
}
