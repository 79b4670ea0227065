package config

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/mcp-mux/mcp-mux/internal/mcptest"
)

type loaded struct {
	trigger string
	cfg     *Config
	err     error
}

// startWatch watches path and returns the loads it reports.
func startWatch(t *testing.T, opts WatchOptions) (*Watcher, chan loaded) {
	t.Helper()
	ch := make(chan loaded, 16)
	opts.Load.LookupEnv = envOf(map[string]string{"TOKEN": "s3cret"})
	opts.OnLoad = func(trigger string, cfg *Config, err error) error {
		ch <- loaded{trigger, cfg, err}
		return err
	}
	w, err := Watch(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Close() })
	return w, ch
}

func next(t *testing.T, ch chan loaded) loaded {
	t.Helper()
	select {
	case l := <-ch:
		return l
	case <-time.After(10 * time.Second):
		t.Fatal("no reload")
		return loaded{}
	}
}

func serverDoc(names ...string) string {
	var parts []string
	for _, n := range names {
		parts = append(parts, `"`+n+`": {"type": "http", "url": "http://127.0.0.1:1/mcp"}`)
	}
	return `{"mcpServers": {` + strings.Join(parts, ", ") + `}}`
}

func serverNames(c *Config) []string {
	if c == nil {
		return nil
	}
	var out []string
	for _, s := range c.Servers {
		out = append(out, s.Name)
	}
	return out
}

// TestWatchConfigMapSwap: the kubelet's ..data symlink swap is seen, an
// identical update is not reported, a broken one is reported as an error.
func TestWatchConfigMapSwap(t *testing.T) {
	first := serverDoc("a")
	cm := mcptest.NewConfigMap(t, "extensions_config.json", first)
	_, ch := startWatch(t, WatchOptions{Path: cm.Path, Initial: []byte(first), Debounce: 20 * time.Millisecond, Poll: time.Hour})

	cm.Update(serverDoc("a", "b"))
	l := next(t, ch)
	if l.err != nil || l.trigger != "file" || strings.Join(serverNames(l.cfg), ",") != "a,b" {
		t.Fatalf("after swap: trigger %q, servers %v, err %v", l.trigger, serverNames(l.cfg), l.err)
	}
	if l.cfg.Path != cm.Path {
		t.Errorf("Path = %q, want %q", l.cfg.Path, cm.Path)
	}

	cm.Update(serverDoc("a", "b")) // same bytes: no reload
	cm.Update(`{"mcpServers": `)   // broken
	l = next(t, ch)
	var syn *SyntaxError
	if !errors.As(l.err, &syn) {
		t.Fatalf("broken update: err = %v, want a syntax error (the identical update must not be reported)", l.err)
	}
	cm.Update(serverDoc("c"))
	if l = next(t, ch); l.err != nil || strings.Join(serverNames(l.cfg), ",") != "c" {
		t.Fatalf("after repair: %v %v", serverNames(l.cfg), l.err)
	}
}

// TestWatchPollSafetyNet: with the event path disabled (an hour of
// debounce), the poll alone picks a change up.
func TestWatchPollSafetyNet(t *testing.T) {
	path := t.TempDir() + "/c.json"
	if err := os.WriteFile(path, []byte(serverDoc("a")), 0o600); err != nil {
		t.Fatal(err)
	}
	_, ch := startWatch(t, WatchOptions{Path: path, Initial: []byte(serverDoc("a")), Debounce: time.Hour, Poll: 30 * time.Millisecond})
	// Replaced by a rename, as editors and the kubelet do: written in place,
	// a poll may land between the truncation and the write and rightly
	// report the half-written file as broken.
	if err := os.WriteFile(path+".tmp", []byte(serverDoc("z")), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		t.Fatal(err)
	}
	if l := next(t, ch); l.err != nil || strings.Join(serverNames(l.cfg), ",") != "z" {
		t.Fatalf("poll: %v %v", serverNames(l.cfg), l.err)
	}
}

// TestWatchMissingFileAndForcedReload: a vanished file keeps the last good
// config (no report); Reload re-reads unchanged content and returns
// OnLoad's error.
func TestWatchMissingFileAndForcedReload(t *testing.T) {
	dir := t.TempDir()
	path := dir + "/c.json"
	if err := os.WriteFile(path, []byte(serverDoc("a")), 0o600); err != nil {
		t.Fatal(err)
	}
	w, ch := startWatch(t, WatchOptions{Path: path, Initial: []byte(serverDoc("a")), Debounce: time.Hour, Poll: time.Hour})
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := w.Reload("signal"); err == nil || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Reload of a missing file = %v", err)
	}
	if l := next(t, ch); l.cfg != nil || !errors.Is(l.err, os.ErrNotExist) {
		t.Errorf("forced reload of a missing file reported %+v", l)
	}
	if err := os.WriteFile(path, []byte(serverDoc("a")), 0o600); err != nil {
		t.Fatal(err)
	}
	// The file came back with the content already running: nothing to report.
	if err := w.Reload("signal"); err != nil {
		t.Fatal(err)
	}
	if l := next(t, ch); l.trigger != "signal" || strings.Join(serverNames(l.cfg), ",") != "a" {
		t.Fatalf("forced reload: %q %v", l.trigger, serverNames(l.cfg))
	}
	if err := os.WriteFile(path, []byte(`{"guardrails": {"bogus": 1}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := w.Reload("api"); err == nil {
		t.Error("Reload of an invalid file returned no error")
	}
	if l := next(t, ch); l.err == nil {
		t.Error("invalid file reported without error")
	}
}
