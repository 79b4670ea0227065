package upstream_test

import (
	"context"
	"errors"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/mcp-mux/mcp-mux/internal/mcptest"
	"github.com/mcp-mux/mcp-mux/internal/upstream"
	"github.com/mcp-mux/mcp-mux/internal/wire"
)

// An upstream HTTP server that forgot our session (restart) answers 404; the
// next call re-initializes transparently.
func TestHTTPSessionExpiryReinitializes(t *testing.T) {
	old := mcptest.NewServer("web")
	sh, ts := serveSwap(t, streamable(old))
	logs := &mcptest.LogBuffer{}
	u := start(t, upstream.Options{Name: "web", Transport: upstream.HTTP, URL: ts.URL + "/mcp", Logger: newLogger(logs)})
	callText(t, u, alice1, "count", "")
	if got := callText(t, u, alice1, "count", ""); got != "2" {
		t.Fatalf("count = %s, want 2", got)
	}
	// Restart: a new server that knows no sessions takes over the address.
	// The old one's streams stay up until the end of the test so that the
	// session looks alive and the next call meets the 404.
	sh.set(streamable(mcptest.NewServer("web")))
	t.Cleanup(func() {
		for ss := range old.Sessions() {
			_ = ss.Close()
		}
	})
	if got := callText(t, u, alice1, "count", ""); got != "1" {
		t.Errorf("count after upstream restart = %s, want 1 on a new session", got)
	}
	if got := callText(t, u, alice1, "count", ""); got != "2" {
		t.Errorf("count on the new session = %s, want 2", got)
	}
	if n := u.Sessions(); n != 1 {
		t.Errorf("Sessions() = %d, want 1", n)
	}
	if !strings.Contains(logs.String(), "session gone before the") {
		t.Errorf("the call did not go through the expired-session retry:\n%s", logs)
	}
}

func TestFailedDiscoveryRetried(t *testing.T) {
	down := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "starting up", http.StatusServiceUnavailable)
	})
	sh, ts := serveSwap(t, down)
	type report struct {
		n   int
		err error
	}
	reports := make(chan report, 16)
	var up atomic.Pointer[upstream.Upstream]
	u := startNoWait(t, upstream.Options{
		Name: "late", Transport: upstream.HTTP, URL: ts.URL + "/mcp",
		RetryMin: 10 * time.Millisecond, RetryMax: 40 * time.Millisecond,
		OnChange: func() { reports <- report{len(up.Load().Tools()), up.Load().Err()} },
	})
	up.Store(u) // before the server comes up, so before any OnChange
	recv(t, u.Discovered(), 10*time.Second, "first discovery")
	if err := u.Err(); err == nil || !strings.Contains(err.Error(), "Service Unavailable") {
		t.Errorf("Err() with the server down = %v, want the HTTP 503 status", err)
	}
	if n := len(u.Tools()); n != 0 {
		t.Errorf("%d tools before the server is up", n)
	}
	select {
	case r := <-reports:
		t.Fatalf("OnChange called while the server was down: %+v", r)
	default:
	}

	sh.set(streamable(mcptest.NewServer("late")))
	select {
	case r := <-reports:
		if r.n < 7 {
			t.Errorf("OnChange saw %d tools", r.n)
		}
		if r.err != nil {
			t.Errorf("Err() still %v when OnChange reported the recovery", r.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("server never discovered after it came up")
	}
	if err := u.Err(); err != nil {
		t.Errorf("Err() = %v after recovery", err)
	}
	if got := callText(t, u, alice1, "echo", `{"text":"up"}`); got != "up" {
		t.Errorf("echo = %q", got)
	}
}

func TestHungServerTimesOut(t *testing.T) {
	hung := mcptest.Hung(t)
	startAt := time.Now()
	u := startNoWait(t, upstream.Options{
		Name: "hung", Transport: upstream.HTTP, URL: hung.URL + "/mcp",
		InitTimeout: 300 * time.Millisecond, RetryMin: time.Hour,
	})
	recv(t, u.Discovered(), 5*time.Second, "discovery of a hung server")
	if d := time.Since(startAt); d > time.Second {
		t.Errorf("discovery of a hung server took %s with InitTimeout 300ms", d)
	}
	if err := u.Err(); err == nil || !strings.Contains(err.Error(), "timed out") {
		t.Errorf("Err() = %v, want a timeout", err)
	}
	// A call on a hung server fails within InitTimeout too.
	callStart := time.Now()
	_, err := call(context.Background(), u, alice1, "echo", `{"text":"x"}`)
	if err == nil || !strings.Contains(err.Error(), "timed out") {
		t.Errorf("call on hung server: err = %v, want a timeout", err)
	}
	if d := time.Since(callStart); d > 2*time.Second {
		t.Errorf("call on hung server took %s", d)
	}
	if n := u.Sessions(); n != 0 {
		t.Errorf("Sessions() = %d after a failed dial", n)
	}
}

func TestStdioStderrLoggedAndBannerIgnored(t *testing.T) {
	logs := &mcptest.LogBuffer{}
	o := stdioOptions("noisy", mcptest.StdioOptions{Banner: true})
	o.Logger = newLogger(logs)
	u := start(t, o)
	if got := callText(t, u, alice1, "echo", `{"text":"through"}`); got != "through" {
		t.Fatalf("echo = %q", got)
	}
	waitFor(t, 5*time.Second, "stderr line in the log", func() bool {
		return strings.Contains(logs.String(), `"@message":"stdio test server ready"`)
	})
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, "stdio test server ready") && !strings.Contains(line, `"@module":"test.stderr"`) {
			t.Errorf("stderr line not logged under the server's logger: %s", line)
		}
	}
	if !strings.Contains(logs.String(), "ignoring non-JSON line on stdout") {
		t.Errorf("banner not logged:\n%s", logs)
	}
	if strings.Contains(logs.String(), "this line is not JSON") {
		t.Error("stdout banner content logged verbatim")
	}
}

// Close kills the stdio servers' whole process groups, grandchildren included.
func TestStdioProcessGroupGoneAfterClose(t *testing.T) {
	logs := &mcptest.LogBuffer{}
	o := stdioOptions("local", mcptest.StdioOptions{Grandchild: true})
	o.Logger = newLogger(logs)
	u, err := upstream.New(o)
	if err != nil {
		t.Fatal(err)
	}
	u.Start()
	recv(t, u.Discovered(), 20*time.Second, "discovery")
	server := pidOf(t, u, alice1)
	// Control and call session each started a grandchild; find their groups.
	re := regexp.MustCompile(`grandchild pid (\d+)`)
	var groups []int
	waitFor(t, 5*time.Second, "both grandchildren logged", func() bool {
		groups = groups[:0]
		for _, m := range re.FindAllStringSubmatch(logs.String(), -1) {
			pid, _ := strconv.Atoi(m[1])
			if _, pg, ok := mcptest.ProcStat(pid); ok {
				groups = append(groups, pg)
			}
		}
		return len(groups) == 2
	})
	_, serverGroup, _ := mcptest.ProcStat(server)
	found := false
	for _, g := range groups {
		found = found || g == serverGroup
		if n := len(membersOfGroup(g)); n != 3 {
			t.Errorf("group %d has %d live processes, want supervisor, server and grandchild", g, n)
		}
	}
	if !found {
		t.Errorf("call session process %d is in none of the groups %v", server, groups)
	}
	if err := u.Close(); err != nil {
		t.Fatal(err)
	}
	for _, g := range groups {
		if left := membersOfGroup(g); len(left) != 0 {
			t.Errorf("processes %v of group %d still running after Close", left, g)
		}
	}
	if n := u.Sessions(); n != 0 {
		t.Errorf("Sessions() = %d after Close", n)
	}
}

func TestKilledStdioServerReplacedOnNextCall(t *testing.T) {
	u := start(t, stdioOptions("local", mcptest.StdioOptions{}))
	first := pidOf(t, u, alice1)
	callText(t, u, alice1, "count", "")
	if err := syscall.Kill(first, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitGone(t, first)
	second := pidOf(t, u, alice1)
	if second == first {
		t.Fatalf("call served by pid %d after it was killed", first)
	}
	if got := callText(t, u, alice1, "count", ""); got != "1" {
		t.Errorf("count on the replacement = %s, want 1", got)
	}
	if n := u.Sessions(); n != 1 {
		t.Errorf("Sessions() = %d, want 1", n)
	}
}

func TestCallTimeout(t *testing.T) {
	for _, tg := range targets(t, nil) {
		t.Run(tg.name, func(t *testing.T) {
			t.Parallel()
			o := tg.opts
			o.CallTimeout = 300 * time.Millisecond
			u := start(t, o)
			// The session (for stdio, a process) comes up before the timed
			// call, through Request, which CallTimeout does not bound: only
			// the call under test races the 300 ms limit, not a process
			// start on a loaded machine.
			countParams := wire.AppendCallParams(nil, "count", nil, nil)
			raw, err := u.Request(context.Background(), "tools/call", upstream.Call{Key: alice1, Params: countParams})
			if err != nil || resultText(t, raw) != "1" {
				t.Fatalf("first count = %s, %v; want 1", raw, err)
			}
			begin := time.Now()
			_, err = call(context.Background(), u, alice1, "sleep", `{"ms":10000}`)
			if err == nil || !strings.Contains(err.Error(), "timed out") {
				t.Errorf("err = %v, want a timeout", err)
			}
			if d := time.Since(begin); d > 3*time.Second {
				t.Errorf("timed-out call returned after %s", d)
			}
			// The session is still usable (Request again: unbounded).
			raw, err = u.Request(context.Background(), "tools/call", upstream.Call{Key: alice1, Params: countParams})
			if err != nil || resultText(t, raw) != "2" {
				t.Errorf("count after timeout = %s, %v; want 2", raw, err)
			}
			if n := u.Sessions(); n != 1 {
				t.Errorf("Sessions() = %d, want 1 (the timed-out call must not cost the session)", n)
			}
		})
	}
}

// The upstream learns that a timed-out or cancelled call was abandoned.
func TestAbandonedCallCancelledUpstream(t *testing.T) {
	for _, tr := range []string{upstream.HTTP, upstream.SSE} {
		t.Run(tr, func(t *testing.T) {
			t.Parallel()
			bs := newBlockingServer()
			o := httpOptions(t, bs.Server)
			if tr == upstream.SSE {
				o = sseOptions(t, bs.Server)
			}
			o.CallTimeout = 300 * time.Millisecond
			u := start(t, o)
			_, err := call(context.Background(), u, alice1, "block", "")
			if err == nil || !strings.Contains(err.Error(), "timed out") {
				t.Errorf("err = %v, want a timeout", err)
			}
			recv(t, bs.entered, time.Second, "block call to have started")
			recv(t, bs.cancelled, 10*time.Second, "upstream handler to be cancelled")
		})
	}
}

func TestCancelHTTPCallReturnsPromptly(t *testing.T) {
	bs := newBlockingServer()
	u := start(t, httpOptions(t, bs.Server))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := call(ctx, u, alice1, "block", "")
		done <- err
	}()
	recv(t, bs.entered, 10*time.Second, "block call to start")
	cancelled := time.Now()
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("err = %v, want context.Canceled", err)
		}
		if d := time.Since(cancelled); d > 500*time.Millisecond {
			t.Errorf("CallTool returned %s after cancellation", d)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("CallTool did not return after cancellation")
	}
	recv(t, bs.cancelled, 10*time.Second, "upstream handler to be cancelled")
	if got := callText(t, u, alice1, "count", ""); got != "1" {
		t.Errorf("session after cancellation: count %s", got)
	}
}

func TestCallAfterCloseFails(t *testing.T) {
	for _, tg := range targets(t, nil) {
		t.Run(tg.name, func(t *testing.T) {
			t.Parallel()
			u := start(t, tg.opts)
			callText(t, u, alice1, "count", "")
			if err := u.Close(); err != nil {
				t.Fatal(err)
			}
			if _, err := call(context.Background(), u, alice2, "count", ""); err == nil {
				t.Error("CallTool succeeded on a closed upstream")
			}
			if n := u.Sessions(); n != 0 {
				t.Errorf("Sessions() = %d after Close", n)
			}
		})
	}
}

// A discovery session that ends by itself (its stdio process killed, its
// SSE stream closed by the server) is noticed from its connection's reader
// and re-established: no goroutine of mcp-mux's waits on it.
func TestDiscoverySessionEndNoticed(t *testing.T) {
	t.Run("stdio", func(t *testing.T) {
		name := "ended-" + strconv.FormatInt(time.Now().UnixNano(), 36)
		u := start(t, stdioOptions(name, mcptest.StdioOptions{}))
		first := mcptest.StdioServers(name)
		if len(first) != 1 {
			t.Fatalf("stdio servers before any call = %v, want the discovery session's one", first)
		}
		if err := syscall.Kill(first[0], syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 20*time.Second, "the discovery session to be re-established", func() bool {
			now := mcptest.StdioServers(name)
			return u.Reconnects() >= 1 && len(now) == 1 && now[0] != first[0]
		})
	})
	t.Run("sse", func(t *testing.T) {
		srv := mcptest.NewServer("old")
		u := start(t, sseOptions(t, srv))
		for ss := range srv.Sessions() {
			_ = ss.Close()
		}
		waitFor(t, 20*time.Second, "the discovery session to be re-established", func() bool {
			n := 0
			for range srv.Sessions() {
				n++
			}
			return u.Reconnects() >= 1 && n == 1
		})
	})
}
