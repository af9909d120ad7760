package config

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/fsnotify/fsnotify"
)

// Settle is how long a file written in place must stay the same before it
// is read as whole. Editors and scp write in place, in chunks, and a
// prefix of a YAML file often parses: read too early, it would drop the
// machines, pools and peers of the part not yet written.
const Settle = 2 * time.Second

// Watcher reloads a cloud-config file when it changes. It watches the
// file's directory, not the file, so that it follows the atomic "..data"
// symlink swap by which the kubelet updates a mounted ConfigMap or Secret,
// and it also polls, in case the directory itself is replaced.
//
// A file that is replaced whole (the "..data" swap, or a complete file
// renamed over the path) is read at once. A file that is written, in place
// or as a new file at the path, is read only once it has stayed the same
// for Settle.
type Watcher struct {
	Path string
	// Poll is how often the file is re-read even without a change event.
	Poll time.Duration
	// Settle is how long a written file must stay the same; Settle above
	// unless set.
	Settle time.Duration
	// OnReload is called with every new config that loads and validates.
	OnReload func(*Config)
	// OnError is called when the file changed but cannot be used; the
	// config in force stays as it is. It is called once per distinct error.
	OnError func(error)
	// OnRecovered is called when, after an error, the file holds the
	// config in force again (its bytes were put back).
	OnRecovered func()

	good    []byte // content of the config in force
	lastErr string
	seen    snapshot  // the file as last read
	written bool      // a write to the file's name was seen since it was read
	blind   bool      // no change events: every change counts as a write
	changed time.Time // when seen was last found changed by a write; zero once used
}

// snapshot is the file as read once: which file the path led to, and its
// bytes.
type snapshot struct {
	target string
	info   os.FileInfo
	data   []byte
}

// NewWatcher returns a watcher for the file whose current content is
// already in force as initial.
func NewWatcher(path string, initial []byte) *Watcher {
	w := &Watcher{Path: path, Poll: 10 * time.Second, good: initial}
	if s, err := readSnapshot(path); err == nil {
		w.seen = s
		if !bytes.Equal(s.data, initial) {
			// Written since it was loaded: let it settle.
			w.changed = time.Now()
		}
	}
	return w
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

func readSnapshot(path string) (snapshot, error) {
	target, err := filepath.EvalSymlinks(path)
	if err != nil {
		return snapshot{}, err
	}
	f, err := os.Open(target)
	if err != nil {
		return snapshot{}, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return snapshot{}, err
	}
	data, err := io.ReadAll(f)
	if err != nil {
		return snapshot{}, err
	}
	return snapshot{target: target, info: info, data: data}, nil
}

// Run watches until ctx ends.
func (w *Watcher) Run(ctx context.Context) {
	if w.Settle == 0 {
		w.Settle = Settle
	}
	events := make(<-chan fsnotify.Event)
	errorsCh := make(<-chan error)
	w.blind = true
	if fw, err := fsnotify.NewWatcher(); err == nil {
		defer fw.Close()
		if err := fw.Add(filepath.Dir(w.Path)); err == nil {
			events, errorsCh = fw.Events, fw.Errors
			w.blind = false
		}
	}
	poll := time.NewTicker(w.Poll)
	defer poll.Stop()
	// Change events come in bursts (create, write, chmod, rename): read
	// once the burst has settled, or when a written file may have.
	next := time.NewTimer(time.Hour)
	next.Stop()
	var due time.Time // when next fires; zero when it is not set
	reset := func(d time.Duration) { next.Reset(d); due = time.Now().Add(d) }
	if !w.changed.IsZero() {
		reset(w.Settle)
	}
	name := filepath.Base(w.Path)
	note := func(ev fsnotify.Event) {
		if ev.Has(fsnotify.Write) && filepath.Base(ev.Name) == name {
			w.written = true
		}
	}
	check := func(polled bool) {
		// Take in the events already queued: a write that came before the
		// read below must count.
		for drained := false; !drained; {
			select {
			case ev := <-events:
				note(ev)
			default:
				drained = true
			}
		}
		// A look asked for by a check never puts off one already due.
		if wait := w.check(time.Now(), polled); wait > 0 && (due.IsZero() || time.Until(due) > wait) {
			reset(wait)
		}
	}
	for {
		select {
		case <-ctx.Done():
			return
		case ev := <-events:
			note(ev)
			reset(eventQuiet)
		case <-errorsCh:
		case <-next.C:
			due = time.Time{}
			check(false)
		case <-poll.C:
			check(true)
		}
	}
}

// eventQuiet is how long the change events must pause before the file is
// read: a new file at the path counts as replaced whole only if no write
// to it has come by then.
const eventQuiet = 100 * time.Millisecond

// check re-reads the file and puts it in force if it changed, is whole and
// is valid. It returns how soon to look again when a written file has not
// settled yet. A poll does not judge a new file at the path: the change
// events, a moment later, tell whether it was renamed there whole or is
// being written.
func (w *Watcher) check(now time.Time, polled bool) time.Duration {
	s, err := readSnapshot(w.Path)
	if err != nil {
		w.seen, w.changed = snapshot{}, time.Time{}
		w.fail(fmt.Errorf("reading cloud config: %w", err))
		return 0
	}
	sameFile := w.seen.info != nil && w.seen.target == s.target && os.SameFile(w.seen.info, s.info)
	switch {
	case sameFile && bytes.Equal(s.data, w.seen.data) && !w.written:
		if !w.changed.IsZero() {
			if wait := w.Settle - now.Sub(w.changed); wait > 0 {
				return wait
			}
		}
	case sameFile || w.written || w.blind:
		// Being written: wait until it has stayed the same for Settle.
		w.seen, w.written, w.changed = s, false, now
		return w.Settle
	case polled:
		return eventQuiet
	}
	// Replaced whole, or written and settled.
	w.seen, w.changed = s, time.Time{}
	w.use(s.data)
	return 0
}

// use puts data in force if it is a new, valid config.
func (w *Watcher) use(data []byte) {
	if bytes.Equal(data, w.good) {
		if w.lastErr != "" {
			w.lastErr = ""
			if w.OnRecovered != nil {
				w.OnRecovered()
			}
		}
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
