package main

import (
	"bytes"
	"context"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcp-mux/mcp-mux/internal/doctest"
)

// quickStartPorts is the README's command that moves the quick start's
// ports; the test runs it with free ports in place of these.
const quickStartPorts = "MCP_MUX_LISTEN=127.0.0.1:9931 DEMO_HTTP_LISTEN=127.0.0.1:9932 ./examples/run.sh"

// TestQuickStartPortsFromEnv is the newcomer's path (issue 39): from a
// clean copy of the checkout, the README's quick start with both ports
// moved by the environment — examples/run.sh builds the binaries, starts
// the demo server and mcp-mux — serves the demo's tools on the moved mcp-mux
// port, reaching the demo server on its moved port, with nothing in
// examples/ edited; and Ctrl-C's signal stops both.
func TestQuickStartPortsFromEnv(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the checkout's mcp-mux and demo server")
	}
	readme, err := doctest.Load("README.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(readme.Text, quickStartPorts) {
		t.Fatalf("the README's quick start no longer shows %q; keep the two in step", quickStartPorts)
	}
	root, err := doctest.Root()
	if err != nil {
		t.Fatal(err)
	}
	src := copyCheckout(t, root)
	muxAddr, demoAddr := freeAddr(t), freeAddr(t)

	cmd := exec.Command("./examples/run.sh")
	cmd.Dir = src
	cmd.Env = quickStartEnv(muxAddr, demoAddr)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out := newLogBuf()
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
		if t.Failed() {
			t.Logf("examples/run.sh output:\n%s", out.String())
		}
	})

	// Building the copy's binaries takes a while on a cold cache.
	waitReady(t, "http://"+muxAddr+"/readyz", 10*time.Minute, done)
	cs := connect(t, "http://"+muxAddr+"/mcp")
	waitToolsFor(t, cs, 60*time.Second, "demo_echo", "demo_headers")
	if got := callText(t, cs, "demo_echo", map[string]any{"text": "moved ports"}); got != "moved ports" {
		t.Errorf("demo_echo = %q", got)
	}
	if got := callText(t, cs, "demo_headers", nil); !strings.Contains(got, "X-Demo-Token: demo-token") {
		t.Errorf("demo_headers did not see run.sh's default DEMO_TOKEN:\n%s", got)
	}
	if c, err := net.DialTimeout("tcp", demoAddr, 5*time.Second); err != nil {
		t.Errorf("the demo server is not on the moved port %s: %v", demoAddr, err)
	} else {
		_ = c.Close()
	}
	_ = cs.Close()

	// Ctrl-C stops both.
	if err := syscall.Kill(cmd.Process.Pid, syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		stopped = true
		if err != nil {
			t.Errorf("examples/run.sh after SIGINT: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("examples/run.sh did not stop within 30 s of SIGINT")
	}
	if live := liveProcesses([]int{cmd.Process.Pid}, ""); len(live) > 0 {
		t.Errorf("processes of the quick start still running after it stopped: %v", live)
	}
}

// quickStartEnv is the test's environment as a newcomer's shell has it
// (no DEMO_* or MCP_MUX_* variables), with the two ports moved. GOFLAGS
// gets -trimpath so that the copy's build shares the build cache across
// runs (without it the cache keys include the copy's directory).
func quickStartEnv(muxAddr, demoAddr string) []string {
	var env []string
	goflags := "-trimpath"
	for _, kv := range baseEnv() {
		switch {
		case strings.HasPrefix(kv, "DEMO_"):
		case strings.HasPrefix(kv, "GOFLAGS="):
			goflags = strings.TrimSpace(strings.TrimPrefix(kv, "GOFLAGS=") + " -trimpath")
		default:
			env = append(env, kv)
		}
	}
	return append(env, "GOFLAGS="+goflags, "MCP_MUX_LISTEN="+muxAddr, "DEMO_HTTP_LISTEN="+demoAddr)
}

// copyCheckout copies the checkout at root — the files git tracks, and
// those it would track, as a clean clone of the working tree has them —
// into a temporary directory and returns it.
func copyCheckout(t *testing.T, root string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "mcp-mux")
	files, err := exec.Command("git", "-C", root, "ls-files", "-z", "--cached", "--others", "--exclude-standard").Output()
	if err != nil {
		t.Fatalf("listing the checkout's files (git ls-files): %v", err)
	}
	n := 0
	for _, rel := range strings.Split(strings.TrimRight(string(files), "\x00"), "\x00") {
		from := filepath.Join(root, rel)
		info, err := os.Lstat(from)
		if err != nil || !info.Mode().IsRegular() {
			continue // deleted in the working tree, or not a file
		}
		copyFile(t, from, filepath.Join(dst, rel), info.Mode().Perm())
		n++
	}
	if _, err := os.Stat(filepath.Join(dst, "examples", "run.sh")); err != nil || n < 100 {
		t.Fatalf("copied %d files of the checkout, examples/run.sh: %v", n, err)
	}
	return dst
}

// copyFile copies one file, keeping its permission bits.
func copyFile(t *testing.T, from, to string, mode fs.FileMode) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, mode); err != nil {
		t.Fatal(err)
	}
}

// freeAddr returns a loopback address with a port that was free a moment
// ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}

// waitReady polls url until it answers 200, failing the test when the
// process behind it ends (done) or timeout passes.
func waitReady(t *testing.T, url string, timeout time.Duration, done <-chan error) {
	t.Helper()
	c := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	deadline := time.Now().Add(timeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := c.Do(req)
		if err == nil {
			var body bytes.Buffer
			_, _ = body.ReadFrom(resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				cancel()
				return
			}
		}
		cancel()
		select {
		case err := <-done:
			t.Fatalf("examples/run.sh ended before %s was ready: %v", url, err)
		case <-time.After(200 * time.Millisecond): // poll interval
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not ready within %s", url, timeout)
		}
	}
}
