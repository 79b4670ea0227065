package upstream_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcp-mux/mcp-mux/internal/mcptest"
	"github.com/mcp-mux/mcp-mux/internal/upstream"
)

// A stdio server is asked for its era with server/discover: a go-sdk server
// speaks 2026-07-28, one that refuses or ignores the probe is initialized on
// the same process, and one that exits on it is restarted once and initialized; the
// answer holds for the server's later processes. No process outlives Close.
func TestStdioEraNegotiated(t *testing.T) {
	for _, tc := range []struct {
		name, first, want string
		starts            int // processes after discovery and one call session
	}{
		{"modern", "", upstream.VersionModern, 2},
		{"refuses-discover", mcptest.FirstRefuse, upstream.VersionLegacy, 2},
		{"exits-on-discover", mcptest.FirstExit, upstream.VersionLegacy, 3},
		// Silence after reading the probe is waited out for 10s, then
		// initialize goes to the same process.
		{"silent-on-discover", mcptest.FirstSilent, upstream.VersionLegacy, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			logs := &mcptest.LogBuffer{}
			o := stdioOptions("local", mcptest.StdioOptions{First: tc.first, StartsDir: dir})
			o.Logger = newLogger(logs)
			u := start(t, o)
			if got := u.Era(); got != tc.want {
				t.Errorf("Era() = %q, want %q", got, tc.want)
			}
			raw, err := call(context.Background(), u, alice1, "echo", `{"text":"hi"}`)
			if err != nil {
				t.Fatalf("echo: %v", err)
			}
			if got := resultText(t, raw); got != "hi" {
				t.Errorf("echo = %q", got)
			}
			// A go-sdk server marks the result of a request that carried
			// the 2026-07-28 _meta resultType complete, and only that one
			// (its serverInfo there is dropped by Request).
			if got, want := strings.Contains(string(raw), `"resultType":"complete"`), tc.want == upstream.VersionModern; got != want {
				t.Errorf("result %s: resultType = %v, want %v", raw, got, want)
			}
			if strings.Contains(string(raw), "io.modelcontextprotocol/serverInfo") {
				t.Errorf("result %s: the server's serverInfo was not dropped", raw)
			}
			if got := mcptest.Starts(dir); got != tc.starts {
				t.Errorf("%d processes started for discovery and one call session, want %d", got, tc.starts)
			}
			// A second call session does not probe again.
			if got := callText(t, u, bob1, "echo", `{"text":"again"}`); got != "again" {
				t.Errorf("echo on a second session = %q", got)
			}
			if got := mcptest.Starts(dir); got != tc.starts+1 {
				t.Errorf("%d processes started with a second call session, want %d", got, tc.starts+1)
			}
			restarts := strings.Count(logs.String(), "restarting it for initialize")
			if want := tc.starts - 2; restarts != want {
				t.Errorf("logged %d restarts after the probe, want %d", restarts, want)
			}
			if err := u.Close(); err != nil {
				t.Fatal(err)
			}
			ents, _ := os.ReadDir(dir)
			for _, e := range ents {
				pid, _ := strconv.Atoi(filepath.Base(e.Name()))
				if mcptest.Exists(pid) {
					t.Errorf("server process %d still exists after Close", pid)
				}
			}
		})
	}
}

// A pinned era is used without a probe.
func TestStdioEraPinned(t *testing.T) {
	for _, v := range []string{upstream.VersionLegacy, upstream.VersionModern} {
		t.Run(v, func(t *testing.T) {
			dir := t.TempDir()
			o := stdioOptions("local", mcptest.StdioOptions{First: mcptest.FirstExit, StartsDir: dir})
			o.ProtocolVersion = v
			if v == upstream.VersionModern {
				o = stdioOptions("local", mcptest.StdioOptions{StartsDir: dir})
				o.ProtocolVersion = v
			}
			u := start(t, o)
			if got := u.Era(); got != v {
				t.Errorf("Era() = %q, want %q", got, v)
			}
			if got := callText(t, u, alice1, "echo", `{"text":"hi"}`); got != "hi" {
				t.Errorf("echo = %q", got)
			}
			if got := mcptest.Starts(dir); got != 2 {
				t.Errorf("%d processes started, want 2 (no probe restart)", got)
			}
		})
	}
}

// Over stdio a 2026-07-28 call is still cancelled with
// notifications/cancelled: the server's handler ends.
func TestStdioModernCallCancelled(t *testing.T) {
	dir := t.TempDir()
	u := start(t, stdioOptions("local", mcptest.StdioOptions{CallsDir: dir}))
	if u.Era() != upstream.VersionModern {
		t.Fatalf("era %q", u.Era())
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := call(ctx, u, alice1, "sleep", `{"ms":600000}`)
		done <- err
	}()
	waitFor(t, 30*time.Second, "the call to reach the server", func() bool { return exists(filepath.Join(dir, "sleep")) })
	cancel()
	if err := <-done; err == nil {
		t.Fatal("cancelled call succeeded")
	}
	waitFor(t, 30*time.Second, "the server's handler to be cancelled", func() bool { return exists(filepath.Join(dir, "sleep.cancelled")) })
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// Only the discovery process of a 2026-07-28 stdio server gets a
// subscriptions/listen (list changes arrive there); a call session's
// process gets none.
func TestStdioModernCallSessionOpensNoListen(t *testing.T) {
	dir := t.TempDir()
	u := start(t, stdioOptions("local", mcptest.StdioOptions{MethodsDir: dir}))
	if u.Era() != upstream.VersionModern {
		t.Fatalf("era %q", u.Era())
	}
	key := upstream.Key{User: "alice", Thread: "t1", Era: upstream.VersionModern}
	pid, err := strconv.Atoi(callText(t, u, key, "pid", `{}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := callText(t, u, key, "echo", `{"text":"again"}`); got != "again" {
		t.Fatalf("echo = %q", got)
	}
	if err := u.Close(); err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 2 {
		t.Fatalf("%d server processes noted methods, want 2 (discovery and one call session)", len(ents))
	}
	for _, e := range ents {
		p, _ := strconv.Atoi(e.Name())
		listened := mcptest.Received(dir, p, "subscriptions/listen")
		switch {
		case p == pid && !mcptest.Received(dir, p, "tools/call"):
			t.Errorf("the call session's process %d got no tools/call", p)
		case p == pid && listened:
			t.Errorf("the call session's process %d got a subscriptions/listen", p)
		case p != pid && !listened:
			t.Errorf("the discovery process %d got no subscriptions/listen", p)
		}
	}
}

// A stdio server that fails at every start (it exits without reading its
// stdin) costs one process start per discovery attempt: the probed process
// exited before it read server/discover, so no second process is started
// for initialize.
func TestStdioFailingServerOneStartPerAttempt(t *testing.T) {
	starts := filepath.Join(t.TempDir(), "starts")
	var failed atomic.Int64
	logs := &mcptest.LogBuffer{}
	u := startNoWait(t, upstream.Options{Name: "failing", Transport: upstream.Stdio, Command: "/bin/sh",
		Args: []string{"-c", `echo start >> "$STARTS"; echo no config >&2; exit 1`}, Env: map[string]string{"STARTS": starts},
		Supervisor: "/proc/self/exe", RetryMin: 10 * time.Millisecond, RetryMax: 20 * time.Millisecond,
		Logger: newLogger(logs),
		OnDiscovery: func(_ time.Duration, ok bool) {
			if !ok {
				failed.Add(1)
			}
		}})
	waitFor(t, 30*time.Second, "three failed discovery attempts", func() bool { return failed.Load() >= 3 })
	if err := u.Close(); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(starts)
	n, attempts := strings.Count(string(b), "start"), failed.Load()
	// An attempt cut short by Close may have started its process unreported.
	if n < int(attempts) || n > int(attempts)+1 {
		t.Errorf("%d process starts for %d failed discovery attempts, want one each", n, attempts)
	}
	if strings.Contains(logs.String(), "restarting it for initialize") {
		t.Errorf("a server that exited before reading the probe was restarted:\n%s", logs)
	}
}

// A stdio server slow to start (it reads stdin only after longer than the
// probe's bound, as npx does while npm downloads it) keeps its process: the
// probe waits while its server/discover is unread, and the session starts
// on that process, with no restart.
func TestStdioSlowStartNotRestarted(t *testing.T) {
	dir := t.TempDir()
	logs := &mcptest.LogBuffer{}
	o := stdioOptions("slow", mcptest.StdioOptions{StartsDir: dir, StartDelay: 1500 * time.Millisecond})
	o.ProbeTimeout = 200 * time.Millisecond
	o.Logger = newLogger(logs)
	u := start(t, o)
	if got := u.Era(); got != upstream.VersionModern {
		t.Errorf("Era() = %q, want %q", got, upstream.VersionModern)
	}
	if got := mcptest.Starts(dir); got != 1 {
		t.Errorf("%d processes started for discovery, want 1", got)
	}
	if got := callText(t, u, alice1, "echo", `{"text":"hi"}`); got != "hi" {
		t.Errorf("echo = %q", got)
	}
	if strings.Contains(logs.String(), "restart") {
		t.Errorf("a slow start was restarted:\n%s", logs)
	}
}
