package upstream_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"

	"github.com/mcp-mux/mcp-mux/internal/mcptest"
	"github.com/mcp-mux/mcp-mux/internal/upstream"
	"github.com/mcp-mux/mcp-mux/internal/wire"
)

func TestMain(m *testing.M) {
	if code, ok := upstream.RunSupervisor(); ok {
		os.Exit(code)
	}
	mcptest.MaybeServeStdio()
	goleak.VerifyTestMain(m)
}

func newLogger(l *mcptest.LogBuffer) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{Name: "test", Output: l, Level: hclog.Debug, JSONFormat: true})
}

// target is one upstream server reachable over one transport.
type target struct {
	name string
	opts upstream.Options
}

func stdioOptions(name string, o mcptest.StdioOptions) upstream.Options {
	cmd, args, env := mcptest.StdioServer(name, o)
	// A -race child otherwise sleeps 1s in its exit handler, which every
	// session close would wait for.
	env["GORACE"] = "atexit_sleep_ms=0"
	return upstream.Options{Name: name, Transport: upstream.Stdio, Command: cmd, Args: args, Env: env, Supervisor: "/proc/self/exe"}
}

func httpOptions(t testing.TB, s *mcp.Server) upstream.Options {
	return upstream.Options{Name: "web", Transport: upstream.HTTP, URL: mcptest.ServeHTTP(t, s).URL + "/mcp"}
}

func sseOptions(t testing.TB, s *mcp.Server) upstream.Options {
	return upstream.Options{Name: "old", Transport: upstream.SSE, URL: mcptest.ServeSSE(t, s).URL + "/sse"}
}

// targets returns the mcptest server over stdio, Streamable HTTP and SSE.
// newServer builds the HTTP and SSE servers (nil: mcptest.NewServer); the
// stdio server is always the plain mcptest one.
func targets(t *testing.T, newServer func() *mcp.Server) []target {
	t.Helper()
	if newServer == nil {
		newServer = func() *mcp.Server { return mcptest.NewServer("test") }
	}
	return []target{
		{upstream.Stdio, stdioOptions("local", mcptest.StdioOptions{})},
		{upstream.HTTP, httpOptions(t, newServer())},
		{upstream.SSE, sseOptions(t, newServer())},
	}
}

// startNoWait creates and starts an Upstream that is closed with the test.
func startNoWait(t testing.TB, o upstream.Options) *upstream.Upstream {
	t.Helper()
	if o.Logger == nil {
		o.Logger = hclog.NewNullLogger()
	}
	u, err := upstream.New(o)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	u.Start()
	t.Cleanup(func() { _ = u.Close() })
	return u
}

// start is startNoWait followed by a successful first discovery.
func start(t testing.TB, o upstream.Options) *upstream.Upstream {
	t.Helper()
	u := startNoWait(t, o)
	select {
	case <-u.Discovered():
	case <-time.After(20 * time.Second):
		t.Fatal("first discovery did not finish")
	}
	if err := u.Err(); err != nil {
		t.Fatalf("discovery failed: %v", err)
	}
	return u
}

// call calls tool name with raw JSON arguments (may be empty).
func call(ctx context.Context, u *upstream.Upstream, k upstream.Key, name, args string) (json.RawMessage, error) {
	return u.CallTool(ctx, upstream.Call{Key: k, Params: wire.AppendCallParams(nil, name, json.RawMessage(args), nil)})
}

// callText calls a tool that must succeed and returns its text content.
func callText(t testing.TB, u *upstream.Upstream, k upstream.Key, name, args string) string {
	t.Helper()
	raw, err := call(context.Background(), u, k, name, args)
	if err != nil {
		t.Fatalf("call %s for %+v: %v", name, k, err)
	}
	return resultText(t, raw)
}

func resultText(t testing.TB, raw json.RawMessage) string {
	t.Helper()
	var res struct {
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
		IsError bool `json:"isError"`
	}
	if err := json.Unmarshal(raw, &res); err != nil {
		t.Fatalf("decoding CallToolResult %s: %v", raw, err)
	}
	if res.IsError {
		t.Fatalf("tool error: %s", raw)
	}
	var parts []string
	for _, c := range res.Content {
		parts = append(parts, c.Text)
	}
	return strings.Join(parts, "\n")
}

// waitFor polls cond until it holds or d passes.
func waitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// swapHandler serves through a handler that can be replaced while the
// listener stays up, as when an upstream restarts on the same address.
type swapHandler struct{ h atomic.Pointer[http.Handler] }

func (s *swapHandler) set(h http.Handler) { s.h.Store(&h) }

func (s *swapHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	(*s.h.Load()).ServeHTTP(w, r)
}

func serveSwap(t testing.TB, h http.Handler) (*swapHandler, *httptest.Server) {
	t.Helper()
	sh := &swapHandler{}
	sh.set(h)
	ts := httptest.NewServer(sh)
	t.Cleanup(ts.Close)
	return sh, ts
}

func streamable(s *mcp.Server) http.Handler {
	return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
}

// blockingServer is the mcptest server plus a "block" tool that reports
// when it starts and when its context ends, and returns once released.
type blockingServer struct {
	*mcp.Server
	entered   chan struct{}
	cancelled chan struct{}
	release   chan struct{}
}

func newBlockingServer() *blockingServer {
	b := &blockingServer{
		Server:    mcptest.NewServer("blocking"),
		entered:   make(chan struct{}, 16),
		cancelled: make(chan struct{}, 16),
		release:   make(chan struct{}),
	}
	b.AddTool(&mcp.Tool{Name: "block", InputSchema: map[string]any{"type": "object"}},
		func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			b.entered <- struct{}{}
			select {
			case <-b.release:
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "released"}}}, nil
			case <-ctx.Done():
				b.cancelled <- struct{}{}
				return nil, ctx.Err()
			}
		})
	return b
}

func recv(t testing.TB, ch <-chan struct{}, d time.Duration, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(d):
		t.Fatalf("timed out after %s waiting for %s", d, what)
	}
}

// waitGone waits until pid no longer exists (it was reaped).
func waitGone(t testing.TB, pid int) {
	t.Helper()
	waitFor(t, 10*time.Second, fmt.Sprintf("process %d to exit", pid), func() bool {
		return !mcptest.Exists(pid)
	})
}

// membersOfGroup lists the live processes in process group pgrp.
func membersOfGroup(pgrp int) []int { return mcptest.GroupMembers(pgrp) }

func pidOf(t testing.TB, u *upstream.Upstream, k upstream.Key) int {
	t.Helper()
	s := callText(t, u, k, "pid", "")
	pid, err := strconv.Atoi(s)
	if err != nil {
		t.Fatalf("pid tool returned %q", s)
	}
	return pid
}
