package config

// The watcher trusts no single event type. A Kubernetes ConfigMap mount is
// config.json -> ..data/config.json with ..data -> ..<timestamp>/, and an
// update replaces ..data with a rename: a watch on the file itself never
// sees it, and the event that does arrive differs between systems (Create,
// Rename, sometimes Write). So the directory is watched, any event in it
// means "maybe changed", events are debounced, the file is re-read through
// its path (following the symlinks anew), and only content whose sha256
// differs from the last content seen is parsed and handed on. A slow poll
// with jitter does the same re-read as a safety net for missed events
// (a subPath mount, for one, never gets any).

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"
)

// Watch defaults.
const (
	DefaultDebounce = 200 * time.Millisecond
	DefaultPoll     = 30 * time.Second
)

// WatchOptions configure Watch.
type WatchOptions struct {
	// Path is the config file.
	Path string
	// Load configures parsing (Filename defaults to Path).
	Load LoadOptions
	// Initial is the content already loaded and running; nil when none.
	// Content equal to it does not call OnLoad.
	Initial []byte
	// Debounce is how long the directory must be quiet before the file is
	// re-read; default DefaultDebounce.
	Debounce time.Duration
	// Poll is the safety-net re-read interval (each wait adds up to 10 %
	// jitter, so replicas do not reload in lockstep); default DefaultPoll.
	Poll time.Duration
	// OnLoad receives the Parse result of each new content (cfg may be
	// non-nil together with err, as from Parse), one call at a time. trigger
	// is "file" for the watcher and the poll, else Reload's argument. Its
	// error is returned by Reload.
	OnLoad func(trigger string, cfg *Config, err error) error
	// OnWatchError, when set, receives errors of the directory watch (the
	// poll keeps working).
	OnWatchError func(error)
}

// Watcher re-reads a config file when it changes. It never calls OnLoad for
// a file that is missing (the last good config keeps serving, as in
// DeerFlow) or whose content did not change.
type Watcher struct {
	opts WatchOptions
	fsw  *fsnotify.Watcher

	mu   sync.Mutex // serializes reads and OnLoad calls
	last [sha256.Size]byte
	seen bool

	stop chan struct{}
	done chan struct{}
}

// Watch starts watching opts.Path's directory. Close stops it.
func Watch(opts WatchOptions) (*Watcher, error) {
	if opts.Path == "" || opts.OnLoad == nil {
		return nil, errors.New("config watch: Path and OnLoad are required")
	}
	opts.setDefaults()
	fsw, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, fmt.Errorf("config watch: %w", err)
	}
	dir := filepath.Dir(opts.Path)
	if err := fsw.Add(dir); err != nil {
		_ = fsw.Close()
		return nil, fmt.Errorf("config watch: watching directory %s: %w", dir, err)
	}
	w := &Watcher{opts: opts, fsw: fsw, stop: make(chan struct{}), done: make(chan struct{})}
	if opts.Initial != nil {
		w.last, w.seen = sha256.Sum256(opts.Initial), true
	}
	go w.run()
	return w, nil
}

// setDefaults fills the unset durations and Load.Filename.
func (o *WatchOptions) setDefaults() {
	if o.Debounce <= 0 {
		o.Debounce = DefaultDebounce
	}
	if o.Poll <= 0 {
		o.Poll = DefaultPoll
	}
	if o.Load.Filename == "" {
		o.Load.Filename = o.Path
	}
}

// Close stops the watcher and waits for a running OnLoad to return.
func (w *Watcher) Close() error {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	err := w.fsw.Close()
	<-w.done
	return err
}

// Reload re-reads the file now and calls OnLoad even when the content did
// not change (with the read error when the file cannot be read), and
// returns OnLoad's error.
func (w *Watcher) Reload(trigger string) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	data, err := ReadFile(w.opts.Path)
	if err != nil {
		return w.opts.OnLoad(trigger, nil, fmt.Errorf("reading config: %w", err))
	}
	w.last, w.seen = sha256.Sum256(data), true
	cfg, err := Parse(data, w.opts.Load)
	return w.opts.OnLoad(trigger, cfg, err)
}

// check re-reads the file and calls OnLoad when its content changed.
func (w *Watcher) check() {
	w.mu.Lock()
	defer w.mu.Unlock()
	data, err := ReadFile(w.opts.Path)
	if errors.Is(err, fs.ErrNotExist) {
		return
	}
	if err != nil {
		// Report a read error once per distinct error, like new content.
		sum := sha256.Sum256([]byte("\x00read error: " + err.Error()))
		if w.seen && sum == w.last {
			return
		}
		w.last, w.seen = sum, true
		_ = w.opts.OnLoad("file", nil, fmt.Errorf("reading config: %w", err))
		return
	}
	sum := sha256.Sum256(data)
	if w.seen && bytes.Equal(sum[:], w.last[:]) {
		return
	}
	w.last, w.seen = sum, true
	cfg, err := Parse(data, w.opts.Load)
	_ = w.opts.OnLoad("file", cfg, err) // OnLoad reports its own outcome
}

// run serves the watch: debounced directory events and the poll re-read
// the file, until Close.
func (w *Watcher) run() {
	defer close(w.done)
	poll := time.NewTimer(w.pollWait())
	defer poll.Stop()
	debounce := time.NewTimer(time.Hour)
	debounce.Stop()
	defer debounce.Stop()
	events, errs := w.fsw.Events, w.fsw.Errors
	for {
		select {
		case <-w.stop:
			return
		case _, ok := <-events:
			events = w.onEvent(events, ok, debounce)
		case err, ok := <-errs:
			errs = w.onWatchError(errs, err, ok)
		case <-debounce.C:
			w.check()
		case <-poll.C:
			w.check()
			poll.Reset(w.pollWait())
		}
	}
}

// onEvent restarts the debounce for an event in the directory; it returns
// the channel to read on (nil once it is closed).
func (w *Watcher) onEvent(events chan fsnotify.Event, ok bool, debounce *time.Timer) chan fsnotify.Event {
	if !ok {
		return nil
	}
	debounce.Reset(w.opts.Debounce)
	return events
}

// onWatchError hands a watch error to OnWatchError; it returns the
// channel to read on (nil once it is closed).
func (w *Watcher) onWatchError(errs chan error, err error, ok bool) chan error {
	if !ok {
		return nil
	}
	if w.opts.OnWatchError != nil {
		w.opts.OnWatchError(err)
	}
	return errs
}

// pollWait is the next safety-net poll's wait: Poll plus up to 10 %.
func (w *Watcher) pollWait() time.Duration {
	return w.opts.Poll + rand.N(w.opts.Poll/10+1)
}
