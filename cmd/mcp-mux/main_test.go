package main

// Process-level integration tests: TestMain builds the mcp-mux binary once,
// and the tests run it as users do (flags, environment, signals, exit codes,
// stderr logs). A few tests call run in-process where that is simpler.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcp-mux/mcp-mux/internal/mcptest"
	"github.com/mcp-mux/mcp-mux/internal/upstream"
)

// testVersion is stamped into the test binary with -X main.version.
const testVersion = "v0.0.0-test"

// muxBin is the mcp-mux binary built by TestMain.
var muxBin string

func TestMain(m *testing.M) {
	if code, ok := upstream.RunSupervisor(); ok { // in-process serve supervises with this binary
		os.Exit(code)
	}
	mcptest.MaybeServeStdio()
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "mcp-mux-cmd-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	muxBin = filepath.Join(dir, "mcp-mux")
	if err := buildMux(muxBin); err != nil {
		fmt.Fprintln(os.Stderr, "building mcp-mux:", err)
		return 1
	}
	code := m.Run()
	if code == 0 {
		if err := mcptest.LeakCheck(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			return 1
		}
	}
	return code
}

// buildMux builds this package (with -race when the tests use it).
func buildMux(out string) error {
	return goBuild(out, ".", "-ldflags", "-X main.version="+testVersion)
}

// goBuild builds the package pkg into out with the go command that runs the tests.
func goBuild(out, pkg string, flags ...string) error {
	return mcptest.GoBuild(out, pkg, raceEnabled, flags...)
}

// baseEnv is the test process environment without the mux's own variables.
func baseEnv() []string { return mcptest.BaseEnv() }

// result is a finished mcp-mux run.
type result struct {
	code           int
	stdout, stderr string
}

// runMux runs mcp-mux to completion in dir with extra environment.
func runMux(t *testing.T, dir string, env []string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, muxBin, args...)
	cmd.Dir = dir
	cmd.Env = append(baseEnv(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		t.Fatalf("running mcp-mux %v: %v", args, err)
	}
	return result{code: code, stdout: stdout.String(), stderr: stderr.String()}
}

// logBuf is a started mux's stderr (package mcptest).
type logBuf = mcptest.LogWaiter

func newLogBuf() *logBuf { return mcptest.NewLogWaiter() }

// logLines decodes the JSON log lines in s, skipping anything else.
func logLines(s string) []map[string]any { return mcptest.LogLines(s) }

// findLog returns the first JSON log line with the given message.
func findLog(s, msg string) map[string]any {
	for _, l := range logLines(s) {
		if l["@message"] == msg {
			return l
		}
	}
	return nil
}

// server is a running `mcp-mux serve`.
type server struct {
	t      *testing.T
	cmd    *exec.Cmd
	stderr *logBuf
	done   chan struct{}
	code   int
	addr   string
}

// startServe starts `mcp-mux serve` in dir (in its own process group) and
// waits for its "serving" log line, whose addr field gives the bound address.
func startServe(t *testing.T, dir string, env []string, args ...string) *server {
	t.Helper()
	cmd := exec.Command(muxBin, append([]string{"serve"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(baseEnv(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	s := &server{t: t, cmd: cmd, stderr: newLogBuf(), done: make(chan struct{})}
	cmd.Stdout = io.Discard
	cmd.Stderr = s.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		err := cmd.Wait()
		s.code = 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			s.code = ee.ExitCode()
			if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				s.code = -int(ws.Signal())
			}
		} else if err != nil {
			s.code = -1
		}
		close(s.done)
	}()
	t.Cleanup(func() {
		select {
		case <-s.done:
		default:
			_ = cmd.Process.Kill()
			<-s.done
		}
		if t.Failed() {
			t.Logf("mcp-mux stderr:\n%s", s.stderr.String())
		}
	})
	ok := s.stderr.WaitFor(60*time.Second, s.done, func(out string) bool {
		l := findLog(out, "serving")
		if l == nil {
			return false
		}
		s.addr, _ = l["addr"].(string)
		return true
	})
	if !ok || s.addr == "" {
		select {
		case <-s.done:
			t.Fatalf("mcp-mux serve exited with code %d before serving; stderr:\n%s", s.code, s.stderr.String())
		default:
		}
		t.Fatalf("mcp-mux serve did not log its address; stderr:\n%s", s.stderr.String())
	}
	return s
}

// url returns the URL of path on the running server.
func (s *server) url(path string) string { return "http://" + s.addr + path }

// stop sends SIGTERM and returns the exit code; it fails the test if the
// process does not exit within the timeout.
func (s *server) stop(timeout time.Duration) int {
	s.t.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		s.t.Fatalf("SIGTERM: %v", err)
	}
	select {
	case <-s.done:
		return s.code
	case <-time.After(timeout):
		s.t.Fatalf("mcp-mux did not exit within %s of SIGTERM; stderr:\n%s", timeout, s.stderr.String())
		return 0
	}
}

// newHTTPClient returns a client whose idle connections are closed when the
// test ends, so goleak sees no stray connection goroutines.
func newHTTPClient(t *testing.T) *http.Client {
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}
}

func httpGet(t *testing.T, c *http.Client, url string) (int, string) {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// writeFile writes a file in dir and returns its path.
func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// mustJSON renders v as JSON text.
func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// stdioServer returns the config entry of a stdio test server: this test
// binary re-executed as an MCP server named name.
func stdioServer(name string, o mcptest.StdioOptions) map[string]any {
	command, args, env := mcptest.StdioServer(name, o)
	env["GORACE"] = mcptest.NoExitSleep
	return map[string]any{"type": "stdio", "command": command, "args": args, "env": env}
}

// liveProcesses returns the pids of live (non-zombie) processes that are in
// one of the process groups pgids or whose environment contains envKV.
func liveProcesses(pgids []int, envKV string) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		s := string(stat)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:]) // state ppid pgrp ...
		if len(f) < 3 || f[0] == "Z" || f[0] == "X" {
			continue
		}
		pgrp, _ := strconv.Atoi(f[2])
		match := false
		for _, g := range pgids {
			if pgrp == g {
				match = true
			}
		}
		if !match && envKV != "" {
			environ, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
			for _, kv := range bytes.Split(environ, []byte{0}) {
				if string(kv) == envKV {
					match = true
				}
			}
		}
		if match {
			out = append(out, pid)
		}
	}
	return out
}
