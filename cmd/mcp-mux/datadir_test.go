package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcp-mux/mcp-mux/internal/mcptest"
)

// TestTasksDefaultDataDir: mcp_tasks on the embedded store needs no
// --data-dir: serve keeps its store in $XDG_STATE_HOME/mcp-mux, else
// ~/.local/state/mcp-mux (created 0700); --data-dir still wins; and
// validate accepts exactly what serve starts with.
func TestTasksDefaultDataDir(t *testing.T) {
	up := &mcptest.TaskServer{}
	upTS := mcptest.ServeHTTP(t, up.MCP())
	dir := t.TempDir()
	cfg := writeFile(t, dir, "config.json", `{"mcpServers": {"jobs": `+mcptest.TaskServerJSON(upTS.URL+"/mcp", "")+`}, "mcp_tasks": {"enabled": true}}`)
	// startsWith runs validate and serve with env and returns where the
	// store file is expected to be after serve started.
	startsWith := func(t *testing.T, env []string, args ...string) {
		t.Helper()
		if r := runMux(t, dir, env, append([]string{"validate", "--config", cfg}, args...)...); r.code != 0 {
			t.Fatalf("validate: %d %s %s", r.code, r.stdout, r.stderr)
		}
		s := startServe(t, dir, env, append([]string{"--config", cfg, "--listen", "127.0.0.1:0"}, args...)...)
		if code := s.stop(30 * time.Second); code != 0 {
			t.Fatalf("serve exited %d:\n%s", code, s.stderr.String())
		}
	}
	storeIn := func(t *testing.T, d string) {
		t.Helper()
		if _, err := os.Stat(filepath.Join(d, "tasks.db")); err != nil {
			t.Fatalf("no store file in %s: %v", d, err)
		}
		fi, err := os.Stat(d)
		if err != nil || fi.Mode().Perm() != 0o700 {
			t.Fatalf("%s: %v %v, want mode 0700", d, fi.Mode(), err)
		}
	}
	t.Run("XDG_STATE_HOME", func(t *testing.T) {
		state, home := t.TempDir(), t.TempDir()
		startsWith(t, []string{"XDG_STATE_HOME=" + state, "HOME=" + home})
		storeIn(t, filepath.Join(state, "mcp-mux"))
		if _, err := os.Stat(filepath.Join(home, ".local")); err == nil {
			t.Error("the store went under HOME although XDG_STATE_HOME is set")
		}
	})
	t.Run("HOME", func(t *testing.T) {
		home := t.TempDir()
		startsWith(t, []string{"XDG_STATE_HOME=", "HOME=" + home})
		storeIn(t, filepath.Join(home, ".local", "state", "mcp-mux"))
	})
	t.Run("--data-dir wins", func(t *testing.T) {
		state, data := t.TempDir(), filepath.Join(t.TempDir(), "data")
		startsWith(t, []string{"XDG_STATE_HOME=" + state}, "--data-dir", data)
		storeIn(t, data)
		if _, err := os.Stat(filepath.Join(state, "mcp-mux")); err == nil {
			t.Error("the store went to XDG_STATE_HOME although --data-dir is given")
		}
	})
	t.Run("nowhere", func(t *testing.T) {
		env := []string{"XDG_STATE_HOME=", "HOME="}
		v := runMux(t, dir, env, "validate", "--config", cfg)
		s := runMux(t, dir, env, "serve", "--config", cfg, "--listen", "127.0.0.1:0")
		const want = "--data-dir"
		if v.code != 1 || !strings.Contains(v.stderr, want) || s.code != 1 || !strings.Contains(s.stderr, want) {
			t.Fatalf("validate %d %q; serve %d %q", v.code, v.stderr, s.code, s.stderr)
		}
	})
}
