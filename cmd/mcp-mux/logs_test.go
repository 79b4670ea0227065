package main

import (
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcp-mux/mcp-mux/internal/mcptest"
)

// Issue 17 attack 12a: text logs kept a stdio server's stderr raw, ESC and
// BEL included, so a server could drive the terminal that shows the log.
func TestServeTextLogsEscapeControls(t *testing.T) {
	dir := t.TempDir()
	srv := stdioServer("noisy", mcptest.StdioOptions{})
	// The server writes terminal controls on stderr, then serves.
	srv["args"] = append([]string{"-c", `printf '\033[31mred\033]0;title\007\n' >&2; exec "$0" "$@"`, srv["command"].(string)}, srv["args"].([]string)...)
	srv["command"] = "sh"
	cfg := writeFile(t, dir, "c.json", mustJSON(t, map[string]any{"mcpServers": map[string]any{"noisy": srv}}))
	// startServe reads JSON logs; this one is text.
	cmd := exec.Command(muxBin, "serve", "--config", cfg, "--listen", "127.0.0.1:0", "--log-format", "text", "--log-level", "debug")
	cmd.Dir, cmd.Env = dir, baseEnv()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stderr := newLogBuf()
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	const escaped = `\x1b[31mred\x1b]0;title\x07`
	ok := stderr.WaitFor(30*time.Second, nil, func(out string) bool { return strings.Contains(out, escaped) })
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("mcp-mux serve: %v", err)
		}
	case <-time.After(stopTimeout):
		_ = cmd.Process.Kill()
		t.Errorf("no exit after SIGTERM")
		<-done
	}
	out := stderr.String()
	if !ok {
		t.Fatalf("no escaped stderr line in the log:\n%q", out)
	}
	if strings.ContainsAny(out, "\x1b\x07") {
		t.Errorf("raw ESC or BEL in the text log:\n%q", out)
	}
}
