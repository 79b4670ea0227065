package mcptest

import (
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
)

// ConfigMap lays out a directory the way the kubelet mounts a ConfigMap
// volume: Dir/<file> -> ..data/<file>, ..data -> ..<timestamp>/, and
// updates it the way the kubelet does: a new timestamped directory, a
// ..data_tmp symlink to it renamed over ..data, the old directory removed.
type ConfigMap struct {
	// Dir is the mount directory; Path is Dir/<file>.
	Dir, Path string
	file      string
	gen       atomic.Int64
	t         testing.TB
}

// NewConfigMap mounts a ConfigMap holding file with content in a temp dir.
func NewConfigMap(t testing.TB, file, content string) *ConfigMap {
	t.Helper()
	dir := t.TempDir()
	m := &ConfigMap{Dir: dir, Path: filepath.Join(dir, file), file: file, t: t}
	ts := m.writeVersion(content)
	if err := os.Symlink(ts, filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join("..data", file), m.Path); err != nil {
		t.Fatal(err)
	}
	return m
}

// writeVersion writes content into a new timestamped directory and returns
// its name.
func (m *ConfigMap) writeVersion(content string) string {
	m.t.Helper()
	ts := fmt.Sprintf("..2026_12_01_09_00_%02d.%09d", m.gen.Add(1), os.Getpid())
	if err := os.Mkdir(filepath.Join(m.Dir, ts), 0o755); err != nil {
		m.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(m.Dir, ts, m.file), []byte(content), 0o644); err != nil {
		m.t.Fatal(err)
	}
	return ts
}

// Update swaps in new content atomically, as the kubelet does.
func (m *ConfigMap) Update(content string) {
	m.t.Helper()
	old, err := os.Readlink(filepath.Join(m.Dir, "..data"))
	if err != nil {
		m.t.Fatal(err)
	}
	ts := m.writeVersion(content)
	tmp := filepath.Join(m.Dir, "..data_tmp")
	if err := os.Symlink(ts, tmp); err != nil {
		m.t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(m.Dir, "..data")); err != nil {
		m.t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(m.Dir, old)); err != nil {
		m.t.Fatal(err)
	}
}
