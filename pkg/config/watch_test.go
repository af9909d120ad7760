package config

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/config/configtest"
)

func TestWatcherFollowsConfigMapSwap(t *testing.T) {
	d := &configtest.ConfigDir{Dir: t.TempDir(), File: "cloud.yaml"}
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
	w.Poll = time.Hour   // prove the change events alone are enough
	w.Settle = time.Hour // and that a swapped ConfigMap is taken at once
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

// watch runs a watcher on path, whose content initial is in force, and
// reports what it does.
type watched struct {
	reloads   chan *Config
	failures  chan error
	recovered chan struct{}
}

func watch(t *testing.T, path string, initial []byte, settle time.Duration) *watched {
	t.Helper()
	got := &watched{reloads: make(chan *Config, 10), failures: make(chan error, 10), recovered: make(chan struct{}, 10)}
	w := NewWatcher(path, initial)
	w.Poll = 50 * time.Millisecond // polls catch a half-written file too
	w.Settle = settle
	w.OnReload = func(c *Config) { got.reloads <- c }
	w.OnError = func(err error) { got.failures <- err }
	w.OnRecovered = func() { got.recovered <- struct{}{} }
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go w.Run(ctx)
	time.Sleep(100 * time.Millisecond) // let the watch start
	return got
}

func machineNames(c *Config) []string {
	var names []string
	for _, m := range c.Inventory.Machines {
		names = append(names, m.Name)
	}
	return names
}

const threeMachines = "inventory:\n  machines:\n  - name: a\n  - name: b\n  - name: c\n"

func TestWatcherWaitsForInPlaceWriteToSettle(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cloud.yaml")
	initial := []byte("inventory:\n  machines:\n  - name: z\n")
	if err := os.WriteFile(path, initial, 0o644); err != nil {
		t.Fatal(err)
	}
	// Each prefix below parses: one machine, then two.
	prefix1 := strings.Index(threeMachines, "  - name: b")
	prefix2 := strings.Index(threeMachines, "  - name: c")
	for _, p := range []int{prefix1, prefix2} {
		if _, err := Parse([]byte(threeMachines[:p])); err != nil {
			t.Fatalf("the test needs a prefix that parses: %q: %v", threeMachines[:p], err)
		}
	}
	got := watch(t, path, initial, Settle)
	if err := configtest.WriteInPlace(path, threeMachines, []int{prefix1, prefix2}, 200*time.Millisecond); err != nil {
		t.Fatal(err)
	}

	select {
	case c := <-got.reloads:
		if names := machineNames(c); len(names) != 3 {
			t.Fatalf("a half-written file was put in force: machines %v", names)
		}
	case err := <-got.failures:
		t.Fatalf("a half-written file was reported: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("the whole file was never put in force")
	}
	select {
	case c := <-got.reloads:
		t.Errorf("a second reload: machines %v", machineNames(c))
	case <-time.After(500 * time.Millisecond):
	}
}

func TestWatcherWaitsForNewFileWrittenAtPath(t *testing.T) {
	// Some editors move the old file aside and write a new one at the path.
	dir := t.TempDir()
	path := filepath.Join(dir, "cloud.yaml")
	initial := []byte("inventory:\n  machines:\n  - name: z\n")
	if err := os.WriteFile(path, initial, 0o644); err != nil {
		t.Fatal(err)
	}
	got := watch(t, path, initial, Settle)
	if err := os.Rename(path, path+"~"); err != nil {
		t.Fatal(err)
	}
	if err := configtest.WriteInPlace(path, threeMachines, []int{strings.Index(threeMachines, "  - name: b")}, 200*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	for {
		select {
		case c := <-got.reloads:
			if names := machineNames(c); len(names) != 3 {
				t.Fatalf("a half-written file was put in force: machines %v", names)
			}
			return
		case err := <-got.failures:
			// Caught between the create and the first write: empty.
			if !strings.Contains(err.Error(), "empty") && !strings.Contains(err.Error(), "no such file") {
				t.Fatalf("a half-written file was reported: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the whole file was never put in force")
		}
	}
}

func TestWatcherTakesReplacedFileAtOnce(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "cloud.yaml")
	initial := []byte("inventory:\n  machines:\n  - name: z\n")
	if err := os.WriteFile(path, initial, 0o644); err != nil {
		t.Fatal(err)
	}
	// A settle time far longer than the wait below: a reload within it
	// proves the renamed file was not made to wait.
	got := watch(t, path, initial, time.Minute)
	tmp := filepath.Join(dir, ".cloud.yaml.tmp")
	if err := os.WriteFile(tmp, []byte(threeMachines), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	select {
	case c := <-got.reloads:
		if names := machineNames(c); len(names) != 3 {
			t.Errorf("machines %v, want a, b, c", names)
		}
	case err := <-got.failures:
		t.Fatalf("the renamed file was refused: %v", err)
	case <-time.After(5 * time.Second):
		t.Fatal("a file renamed over the path was not taken at once")
	}
}

func TestWatcherReportsRevertToConfigInForce(t *testing.T) {
	d := &configtest.ConfigDir{Dir: t.TempDir(), File: "cloud.yaml"}
	good := "inventory:\n  machines:\n  - name: a\n"
	if err := d.Write(good); err != nil {
		t.Fatal(err)
	}
	got := watch(t, d.Path(), []byte(good), Settle)
	if err := d.Write("inventory:\n  machines:\n  - name: a\n    powerState: sleeping\n"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-got.failures:
	case <-time.After(5 * time.Second):
		t.Fatal("the bad edit was not reported")
	}
	if err := d.Write(good); err != nil {
		t.Fatal(err)
	}
	select {
	case <-got.recovered:
	case c := <-got.reloads:
		t.Fatalf("the config in force was loaded again: %v", machineNames(c))
	case <-time.After(5 * time.Second):
		t.Fatal("going back to the config in force was not reported")
	}
}
