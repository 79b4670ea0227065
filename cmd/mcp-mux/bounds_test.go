package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/internal/mcptest"
)

// TestSIGTERMCancelsHungCalls: a mux whose upstream never answers, with
// calls in flight on both paths (fast-path calls and a 2025-03-26 batch),
// exits 0 within the drain bound after SIGTERM, and the upstream sees every
// call cancelled.
func TestSIGTERMCancelsHungCalls(t *testing.T) {
	t.Parallel()
	var inflight atomic.Int64
	up := mcptest.RawHTTP(t, func(ctx context.Context, method string, _ json.RawMessage) (json.RawMessage, error) {
		switch method {
		case "tools/list":
			return mcptest.ToolList("", "hang"), nil
		case "tools/call":
			inflight.Add(1)
			defer inflight.Add(-1)
			<-ctx.Done()
			return nil, ctx.Err()
		}
		return json.RawMessage(`{}`), nil
	})
	dir := t.TempDir()
	cfg := writeFile(t, dir, "mux.json", fmt.Sprintf(`{"mcpServers": {"up": {"type": "http", "url": %q}}}`, up.URL+"/mcp"))
	s := startServe(t, dir, nil, "--config", cfg, "--listen", "127.0.0.1:0")
	hc := newHTTPClient(t)
	post := func(sid, body string) (*http.Response, error) {
		req, _ := http.NewRequest(http.MethodPost, s.url("/mcp"), strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if sid != "" {
			req.Header.Set("Mcp-Session-Id", sid)
			req.Header.Set("Mcp-Protocol-Version", "2025-03-26")
		}
		return hc.Do(req)
	}
	resp, err := post("", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	sid := resp.Header.Get("Mcp-Session-Id")
	if resp, err = post(sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()

	// Discovery runs in the background: wait for the tool.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		resp, err := post(sid, `{"jsonrpc":"2.0","id":99,"method":"tools/list"}`)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if strings.Contains(string(b), "up_hang") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("up_hang never listed: %s", b)
		}
	}
	call := func(id int) string {
		return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"up_hang","arguments":{}}}`, id)
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	for _, body := range []string{call(2), call(3), call(4), "[" + call(5) + "," + call(6) + "]"} {
		wg.Go(func() {
			if resp, err := post(sid, body); err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
	}
	deadline := time.Now().Add(30 * time.Second)
	for inflight.Load() != 5 {
		if time.Now().After(deadline) {
			t.Fatalf("%d of 5 calls reached the upstream; stderr:\n%s", inflight.Load(), s.stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	start := time.Now()
	if code := s.stop(drainTimeout + 10*time.Second); code != 0 {
		t.Fatalf("exit code %d after SIGTERM; stderr:\n%s", code, s.stderr.String())
	}
	took := time.Since(start)
	if took > drainTimeout+5*time.Second {
		t.Errorf("exit %s after SIGTERM, drain bound %s", took, drainTimeout)
	}
	t.Logf("exit 0 %s after SIGTERM with 5 hung calls (drain bound %s)", took.Round(time.Millisecond), drainTimeout)
	for deadline := time.Now().Add(10 * time.Second); inflight.Load() != 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d upstream calls still running after the mux exited", inflight.Load())
		}
	}
}

// TestSIGTERMEndsParkedCalls: 2026-07-28 calls parked on a legacy go-sdk
// upstream's elicitation, whose client walked away, do not hold up the
// exit after SIGTERM, and each is cancelled upstream, so the upstream's
// own Close afterwards does not wait on an elicitation nobody answers.
func TestSIGTERMEndsParkedCalls(t *testing.T) {
	t.Parallel()
	var running atomic.Int64
	srv := mcp.NewServer(&mcp.Implementation{Name: "asker", Version: "1"}, nil)
	srv.AddTool(&mcp.Tool{Name: "ask", InputSchema: map[string]any{"type": "object"}},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			running.Add(1)
			defer running.Add(-1)
			if _, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: "name?",
				RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{}}}); err != nil {
				return nil, err
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "answered"}}}, nil
		})
	up := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(func() {
		closed := make(chan struct{})
		go func() { up.Close(); close(closed) }()
		select {
		case <-closed:
		case <-time.After(10 * time.Second):
			t.Error("the upstream's Close hung: a handler still waits for its elicitation")
		}
	})
	dir := t.TempDir()
	cfg := writeFile(t, dir, "mux.json", fmt.Sprintf(`{"mcpServers": {"up": {"type": "http", "url": %q}}}`, up.URL))
	s := startServe(t, dir, nil, "--config", cfg, "--listen", "127.0.0.1:0")
	hc := newHTTPClient(t)
	ask := func(thread string) string {
		body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{` +
			`"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"},` +
			`"io.modelcontextprotocol/clientCapabilities":{"elicitation":{"form":{}}}},"name":"up_ask","arguments":{}}}`
		req, _ := http.NewRequest(http.MethodPost, s.url("/mcp"), strings.NewReader(body))
		for k, v := range map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
			"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "up_ask", "X-Mux-Thread-Id": thread} {
			req.Header.Set(k, v)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		got := ask("first")
		if strings.Contains(got, `"input_required"`) {
			break
		}
		if time.Now().After(deadline) { // discovery runs in the background
			t.Fatalf("no input_required for up_ask: %s", got)
		}
	}
	for i := range 2 {
		if got := ask(fmt.Sprint("walk-away-", i)); !strings.Contains(got, `"input_required"`) {
			t.Fatalf("call %d: %s, want input_required", i, got)
		}
	}
	for deadline := time.Now().Add(10 * time.Second); running.Load() != 3; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d of 3 parked calls run upstream", running.Load())
		}
	}
	start := time.Now()
	if code := s.stop(drainTimeout + 10*time.Second); code != 0 {
		t.Fatalf("exit code %d after SIGTERM; stderr:\n%s", code, s.stderr.String())
	}
	took := time.Since(start)
	if took > 3*time.Second {
		t.Errorf("exit %s after SIGTERM with 3 parked calls, want within 3s", took)
	}
	t.Logf("exit 0 %s after SIGTERM with 3 parked calls", took.Round(time.Millisecond))
	for deadline := time.Now().Add(5 * time.Second); running.Load() != 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d parked calls still run upstream after the mux exited", running.Load())
		}
	}
	for ss := range srv.Sessions() {
		_ = ss.Close()
	}
}
