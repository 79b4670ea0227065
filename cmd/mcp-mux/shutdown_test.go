package main

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/internal/mcptest"
)

// holdServer is an MCP server whose "hold" tool signals entered and returns
// only once release is closed.
func holdServer(entered chan<- struct{}, release <-chan struct{}) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "hold", Version: "test"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "hold", Description: "Block until the test releases it."},
		func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			entered <- struct{}{}
			select {
			case <-release:
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "released"}}}, nil, nil
			case <-ctx.Done():
				return nil, nil, ctx.Err()
			}
		})
	return s
}

// TestGracefulShutdown: SIGTERM during a long call turns readiness false on
// both listeners first (the listener still serving during the shutdown
// delay), then closes the listener, lets the call finish with its result,
// and exits 0.
func TestGracefulShutdown(t *testing.T) {
	entered, release := make(chan struct{}, 1), make(chan struct{})
	up := mcptest.ServeHTTP(t, holdServer(entered, release))
	var releaseOnce sync.Once
	releaseCall := func() { releaseOnce.Do(func() { close(release) }) }
	t.Cleanup(releaseCall) // runs before the upstream closes, even when the test fails
	dir := t.TempDir()
	cfg := writeFile(t, dir, "extensions_config.json", mustJSON(t, map[string]any{
		"mcpServers": map[string]any{"slow": map[string]any{"type": "http", "url": up.URL + "/mcp"}},
	}))
	s := startServe(t, dir, []string{"MCP_MUX_OPS_LISTEN=127.0.0.1:0", "MCP_MUX_SHUTDOWN_DELAY=1500ms"},
		"--config", cfg, "--listen", "127.0.0.1:0")
	var opsAddr string
	if !s.stderr.WaitFor(10*time.Second, s.done, func(out string) bool {
		l := findLog(out, "serving health and metrics")
		if l != nil {
			opsAddr, _ = l["addr"].(string)
		}
		return opsAddr != ""
	}) {
		t.Fatalf("no ops listener logged:\n%s", s.stderr.String())
	}
	hc := newHTTPClient(t)
	// serve listens before discovery ends (and is ready once it ended):
	// wait for the server to be up.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		code, body := httpGet(t, hc, s.url("/api/status"))
		if code == http.StatusOK && strings.Contains(body, `"name":"slow","transport":"http","state":"up"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET /api/status: %d %s", code, body)
		}
	}
	for _, u := range []string{s.url("/readyz"), "http://" + opsAddr + "/readyz", "http://" + opsAddr + "/healthz"} {
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			code, body := httpGet(t, hc, u)
			if code == http.StatusOK {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("GET %s before SIGTERM: %d %s", u, code, body)
			}
		}
	}
	if code, _ := httpGet(t, hc, "http://"+opsAddr+"/mcp"); code != http.StatusNotFound {
		t.Errorf("the ops listener serves /mcp (%d)", code)
	}

	cs := connect(t, s.url("/mcp"))
	waitTools(t, cs, "slow_hold")
	type outcome struct {
		res *mcp.CallToolResult
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "slow_hold", Arguments: map[string]any{}})
		done <- outcome{res, err}
	}()
	select {
	case <-entered:
	case <-time.After(20 * time.Second):
		t.Fatal("the call never reached the upstream")
	}

	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// Readiness false while the listener still serves (the shutdown delay).
	deadline := time.Now().Add(10 * time.Second)
	for {
		code, _ := httpGet(t, hc, s.url("/readyz"))
		opsCode, _ := httpGet(t, hc, "http://"+opsAddr+"/readyz")
		if code == http.StatusServiceUnavailable && opsCode == http.StatusServiceUnavailable {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz still %d / %d after SIGTERM", code, opsCode)
		}
		time.Sleep(20 * time.Millisecond) // poll interval
	}
	select {
	case o := <-done:
		t.Fatalf("the call ended before it was released: %+v %v", o.res, o.err)
	default:
	}
	// Then the listener closes while the call is still running …
	if !s.stderr.WaitFor(10*time.Second, s.done, func(out string) bool {
		return findLog(out, "closed the listener; draining in-flight calls") != nil
	}) {
		t.Fatalf("the listener did not close after the delay:\n%s", s.stderr.String())
	}
	hc.CloseIdleConnections()
	if _, err := hc.Get(s.url("/readyz")); err == nil {
		t.Error("the listener still accepts new connections after the delay")
	}
	// … and the call still finishes with its result.
	releaseCall()
	select {
	case o := <-done:
		if o.err != nil || o.res.IsError || len(o.res.Content) != 1 || o.res.Content[0].(*mcp.TextContent).Text != "released" {
			t.Fatalf("the in-flight call did not finish: %+v %v", o.res, o.err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the in-flight call never returned")
	}
	_ = cs.Close()
	select {
	case <-s.done:
	case <-time.After(stopTimeout):
		t.Fatalf("mcp-mux did not exit:\n%s", s.stderr.String())
	}
	if s.code != 0 {
		t.Fatalf("exit code %d:\n%s", s.code, s.stderr.String())
	}
	out := s.stderr.String()
	iReady := strings.Index(out, "shutting down: readiness is false")
	iClose := strings.Index(out, "closed the listener")
	iStop := strings.Index(out, `"stopped"`)
	if iReady < 0 || iClose < iReady || iStop < iClose {
		t.Errorf("shutdown steps out of order (readiness %d, close %d, stopped %d):\n%s", iReady, iClose, iStop, out)
	}
}
