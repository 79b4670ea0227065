package proxy_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcp-mux/mcp-mux/internal/config"
	"github.com/mcp-mux/mcp-mux/internal/mcptest"
	"github.com/mcp-mux/mcp-mux/internal/proxy"
)

// TestStdioCwd: a stdio server's processes start in its cwd — a real
// process writes its working directory to a file there, and serves — and
// a reload that changes the cwd (a relative one, from the config file's
// directory) reconnects the server, whose new process starts in the new
// directory (issue 39: @playwright/mcp wrote into mcp-mux's own working
// directory).
func TestStdioCwd(t *testing.T) {
	dir := t.TempDir()
	first, second := filepath.Join(dir, "first"), filepath.Join(dir, "second")
	for _, d := range []string{first, second} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	cmd, args, env := mcptest.StdioServer("cwd", mcptest.StdioOptions{})
	// The shell records where it runs (a relative path: its cwd), then
	// becomes the test server.
	server := func(cwd string) string {
		a, _ := json.Marshal(append([]string{"-c", `pwd -P > observed-cwd && exec "$0" "$@"`, cmd}, args...))
		e, _ := json.Marshal(env)
		return fmt.Sprintf(`{"mcpServers": {"local": {"type": "stdio", "command": "/bin/sh", "args": %s, "env": %s, "cwd": %q}}}`, a, e, cwd)
	}
	wd, _ := os.Getwd()
	t.Cleanup(func() { _ = os.Remove(filepath.Join(wd, "observed-cwd")) }) // only there when the cwd was not used
	m := startMux(t, server(first), proxy.Options{})
	cs := connect(t, m.ts.URL, nil)
	if got, _ := callText(t, cs, "local_echo", map[string]any{"text": "in first"}); got != "in first" {
		t.Fatalf("local_echo = %q", got)
	}
	observed := func(d string) string {
		b, _ := os.ReadFile(filepath.Join(d, "observed-cwd"))
		return strings.TrimSpace(string(b))
	}
	real := func(d string) string { p, _ := filepath.EvalSymlinks(d); return p }
	if got := observed(first); got != real(first) {
		t.Fatalf("the server's process ran in %q, want %q", got, real(first))
	}
	if _, err := os.Stat(filepath.Join(wd, "observed-cwd")); err == nil {
		t.Fatal("the server wrote into mcp-mux's working directory")
	}

	path := filepath.Join(dir, "c.json")
	cfg, err := config.Parse([]byte(server("second")), config.LoadOptions{Filename: path})
	if err != nil || len(cfg.Invalid) > 0 {
		t.Fatalf("config: %v %v", err, cfg.Invalid)
	}
	if err := m.srv.Apply(cfg); err != nil {
		t.Fatal(err)
	}
	cs = connect(t, m.ts.URL, nil)
	deadline := time.Now().Add(20 * time.Second)
	for observed(second) == "" {
		if time.Now().After(deadline) {
			t.Fatalf("no process of the reloaded server started in %s:\n%s", second, m.logs)
		}
		if _, res := callText(t, cs, "local_echo", map[string]any{"text": "x"}); res.IsError {
			time.Sleep(20 * time.Millisecond) // polling a condition, with a deadline
		}
	}
	if got := observed(second); got != real(second) {
		t.Errorf("after the reload the server runs in %q, want %q", got, real(second))
	}
}
