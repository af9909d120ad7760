package config

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// configMapDir lays out a directory the way the kubelet mounts a ConfigMap:
// the file is a symlink through "..data", which is swapped atomically.
type configMapDir struct {
	t   *testing.T
	dir string
	gen int
}

func (d *configMapDir) write(content string) {
	d.t.Helper()
	d.gen++
	ts := filepath.Join(d.dir, "..2026_"+strings.Repeat("x", d.gen))
	if err := os.Mkdir(ts, 0o755); err != nil {
		d.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ts, "cloud.yaml"), []byte(content), 0o644); err != nil {
		d.t.Fatal(err)
	}
	tmp := filepath.Join(d.dir, "..data_tmp")
	if err := os.Symlink(filepath.Base(ts), tmp); err != nil {
		d.t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(d.dir, "..data")); err != nil {
		d.t.Fatal(err)
	}
	link := filepath.Join(d.dir, "cloud.yaml")
	if _, err := os.Lstat(link); os.IsNotExist(err) {
		if err := os.Symlink("..data/cloud.yaml", link); err != nil {
			d.t.Fatal(err)
		}
	}
}

func TestWatcherFollowsConfigMapSwap(t *testing.T) {
	d := &configMapDir{t: t, dir: t.TempDir()}
	d.write("inventory:\n  machines:\n  - name: a\n")
	path := filepath.Join(d.dir, "cloud.yaml")
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

	d.write("inventory:\n  machines:\n  - name: a\n    powerState: sleeping\n")
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

	d.write("inventory:\n  machines:\n  - name: a\n  - name: b\n")
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
