package config

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/fsnotify/fsnotify"
)

// Watcher reloads a cloud-config file when it changes. It watches the
// file's directory, not the file, so that it follows the atomic "..data"
// symlink swap by which the kubelet updates a mounted ConfigMap or Secret,
// and it also polls, in case the directory itself is replaced.
type Watcher struct {
	Path string
	// Poll is how often the file is re-read even without a change event.
	Poll time.Duration
	// OnReload is called with every new config that loads and validates.
	OnReload func(*Config)
	// OnError is called when the file changed but cannot be used; the
	// config in force stays as it is. It is called once per distinct error.
	OnError func(error)

	good    []byte // content of the config in force
	lastErr string
}

// NewWatcher returns a watcher for the file whose current content is
// already in force as initial.
func NewWatcher(path string, initial []byte) *Watcher {
	return &Watcher{Path: path, Poll: 10 * time.Second, good: initial}
}

// LoadWithContent is Load that also returns the bytes it parsed, to seed a
// Watcher.
func LoadWithContent(path string) (*Config, []byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("reading cloud config: %w", err)
	}
	cfg, err := Parse(data)
	if err != nil {
		return nil, nil, fmt.Errorf("cloud config %s: %w", path, err)
	}
	return cfg, data, nil
}

// Run watches until ctx ends.
func (w *Watcher) Run(ctx context.Context) {
	events := make(<-chan fsnotify.Event)
	errorsCh := make(<-chan error)
	if fw, err := fsnotify.NewWatcher(); err == nil {
		defer fw.Close()
		if err := fw.Add(filepath.Dir(w.Path)); err == nil {
			events, errorsCh = fw.Events, fw.Errors
		}
	}
	poll := time.NewTicker(w.Poll)
	defer poll.Stop()
	// Change events come in bursts (create, write, chmod, rename): read
	// once the burst has settled.
	settle := time.NewTimer(time.Hour)
	settle.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-events:
			settle.Reset(100 * time.Millisecond)
		case <-errorsCh:
		case <-settle.C:
			w.check()
		case <-poll.C:
			w.check()
		}
	}
}

// check re-reads the file and applies it if it changed and is valid.
func (w *Watcher) check() {
	data, err := os.ReadFile(w.Path)
	if err != nil {
		w.fail(fmt.Errorf("reading cloud config: %w", err))
		return
	}
	if bytes.Equal(data, w.good) {
		w.lastErr = ""
		return
	}
	cfg, err := Parse(data)
	if err != nil {
		w.fail(fmt.Errorf("cloud config %s: %w", w.Path, err))
		return
	}
	w.good, w.lastErr = data, ""
	if w.OnReload != nil {
		w.OnReload(cfg)
	}
}

func (w *Watcher) fail(err error) {
	if err.Error() == w.lastErr {
		return
	}
	w.lastErr = err.Error()
	if w.OnError != nil {
		w.OnError(err)
	}
}
