package proxy_test

import (
	"context"
	"io"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/mcp-mux/mcp-mux/internal/mcptest"
	"github.com/mcp-mux/mcp-mux/internal/proxy"
)

// TestThreadlessSessionLeavesNoProcess: one-shot clients (an Inspector CLI
// run: initialize, one call, exit without DELETE) each get a session that
// names no thread, so each gets its own stdio process. Once such a session
// has no request in flight and no open stream for a moment, its process
// is released; a session that holds its GET stream open keeps its
// process, and one that comes back gets a new one.
func TestThreadlessSessionLeavesNoProcess(t *testing.T) {
	name, starts := "oneshot", t.TempDir()
	m := startMux(t, `{"mcpServers": {`+stdioServerJSON(t, name, mcptest.StdioOptions{StartsDir: starts}, `, "session_scope": "thread"`)+`}}`,
		proxy.Options{ThreadlessIdle: 100 * time.Millisecond})
	base := m.ts.URL
	discovery := mcptest.StdioServers(name)
	if len(discovery) != 1 {
		t.Fatalf("want the discovery process only, got %v", discovery)
	}
	// A held session: its GET stream stays open.
	held := rawSession(t, base, "2025-11-25")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/mcp", nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", held)
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	stream, err := testHTTP.Do(req)
	if err != nil || stream.StatusCode != http.StatusOK {
		t.Fatalf("GET stream: %v %v", err, stream)
	}
	defer stream.Body.Close()
	callPid(t, base, held)
	heldProcs := others(mcptest.StdioServers(name), discovery)

	var sid string
	for range 3 { // three one-shot runs
		sid = rawSession(t, base, "2025-11-25")
		callPid(t, base, sid)
	}
	if n := mcptest.Starts(starts); n != 5 {
		t.Fatalf("%d processes started, want 5 (discovery, the held session, three one-shot runs)", n)
	}
	// Each one-shot process goes; the held session's and discovery's stay.
	deadline := time.Now().Add(10 * time.Second)
	for {
		left := others(mcptest.StdioServers(name), discovery)
		if slices.Equal(left, heldProcs) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("processes of ended one-shot sessions remain: %v (held session's: %v)", left, heldProcs)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// A released session that comes back gets a new process.
	callPid(t, base, sid)
	if n := mcptest.Starts(starts); n != 6 {
		t.Fatalf("%d processes started, want 6 (the returning session's)", n)
	}
	// A sweep far in the future still keeps the held session's process:
	// its stream is open.
	proxy.SweepSessionsForTest(m.srv, time.Now().Add(10*time.Minute)) // past ThreadlessIdle, within the session idle timeout
	// The returning session's process goes (its end is asynchronous); the
	// held session's never does.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		left := others(mcptest.StdioServers(name), discovery)
		if !slices.Contains(left, heldProcs[0]) {
			t.Fatalf("the process of a session holding its stream was released: %v, want %v", left, heldProcs)
		}
		if slices.Equal(left, heldProcs) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("processes left after the sweep: %v, want %v", left, heldProcs)
		}
	}
}

// callPid calls the stdio test server's pid tool on session sid.
func callPid(t *testing.T, base, sid string) {
	t.Helper()
	resp, err := rawPost(context.Background(), base, sid, "2025-11-25", `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"oneshot_pid","arguments":{}}}`)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("tools/call: HTTP %d", resp.StatusCode)
	}
}

// others returns the pids in all that are not in except, sorted.
func others(all, except []int) []int {
	var out []int
	for _, p := range all {
		if !slices.Contains(except, p) {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}

// TestFirstApplyDoesNotWaitForDiscovery: at startup there is nothing to
// keep serving while servers are discovered, so the first Apply returns at
// once even when a stdio server hangs on initialize (serve then listens at
// once); the hung server's tools simply are not there yet. Readiness waits
// for the first discovery, at most Options.SwapWait, so that a load
// balancer does not send calls to a replica that does not know its tools.
func TestFirstApplyDoesNotWaitForDiscovery(t *testing.T) {
	srv := proxy.New(proxy.Options{SwapWait: 300 * time.Millisecond, RetryMin: time.Hour, RetryMax: time.Hour})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Close(ctx)
	})
	cfg := parseCfg(t, `{"mcpServers": {`+stdioServerJSON(t, "hung", mcptest.StdioOptions{Hang: true}, `, "session_init_timeout": 3600`)+`}}`)
	applied := make(chan error, 1)
	go func() { applied <- srv.Apply(cfg) }()
	select {
	case err := <-applied:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the first Apply waits for a hung server's discovery")
	}
	appliedAt := time.Now()
	if st := srv.Status(); st.Ready || len(st.Servers) != 1 || st.Servers[0].State != "starting" {
		t.Fatalf("after the first Apply: ready %v, servers %+v; want not ready yet, the hung server starting", st.Ready, st.Servers)
	}
	waitLong(t, 10*time.Second, "readiness after SwapWait", func() bool { return srv.Status().Ready })
	if waited := time.Since(appliedAt); waited < 250*time.Millisecond {
		t.Fatalf("ready %s after the first Apply, before its hung server's discovery or SwapWait", waited)
	}
	if st := srv.Status(); st.Servers[0].State != "starting" {
		t.Fatalf("the hung server is %q", st.Servers[0].State)
	}
}
