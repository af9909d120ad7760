// Package configtest writes cloud configs the ways they reach the CCM on a
// real site (a kubelet's ConfigMap mount, scp or an editor saving in
// place), for the config package's tests and the integration harness.
package configtest

import (
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// ConfigDir is a directory laid out the way the kubelet mounts a ConfigMap
// or Secret: the file is a symlink through "..data", which each update
// swaps atomically to a new timestamped directory.
type ConfigDir struct {
	Dir  string
	File string // the file's name, e.g. cloud.yaml
	gen  int
}

// Path is the path the CCM is given.
func (d *ConfigDir) Path() string { return filepath.Join(d.Dir, d.File) }

// Write publishes new content the way the kubelet does.
func (d *ConfigDir) Write(content string) error {
	d.gen++
	ts := fmt.Sprintf("..2026_12_02_00_00_%02d.%d", d.gen%60, d.gen)
	if err := os.MkdirAll(filepath.Join(d.Dir, ts), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(d.Dir, ts, d.File), []byte(content), 0o644); err != nil {
		return err
	}
	old, _ := os.Readlink(filepath.Join(d.Dir, "..data"))
	tmp := filepath.Join(d.Dir, "..data_tmp")
	os.Remove(tmp)
	if err := os.Symlink(ts, tmp); err != nil {
		return err
	}
	if err := os.Rename(tmp, filepath.Join(d.Dir, "..data")); err != nil {
		return err
	}
	if _, err := os.Lstat(d.Path()); os.IsNotExist(err) {
		if err := os.Symlink(filepath.Join("..data", d.File), d.Path()); err != nil {
			return err
		}
	}
	if old != "" {
		os.RemoveAll(filepath.Join(d.Dir, old))
	}
	return nil
}

// MakePlain replaces the path's symlink with a plain file of the same
// content, renamed over it, the way a static pod's hostPath config or a
// file edited on the machine is laid out.
func (d *ConfigDir) MakePlain() error {
	data, err := os.ReadFile(d.Path())
	if err != nil {
		return err
	}
	tmp := d.Path() + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, d.Path())
}

// WriteInPlace writes content over the file the path leads to, the way
// scp or an editor saving in place does: it truncates the file, then
// writes content in pieces, ending at the given offsets, with a pause
// after each. The file is created if it does not exist.
func WriteInPlace(path, content string, ends []int, pause time.Duration) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	start := 0
	for _, end := range append(ends, len(content)) {
		if _, err := f.WriteString(content[start:end]); err != nil {
			return err
		}
		start = end
		time.Sleep(pause)
	}
	return f.Close()
}
