package proxy_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/internal/mcptest"
	"github.com/mcp-mux/mcp-mux/internal/proxy"
)

// TestDisconnectCancelsOnBothPaths: one rule for every request, whichever
// path serves it — a client that closes its POST cancels the upstream
// request. tools/call is served by the fast path, prompts/get by the SDK's
// handler.
func TestDisconnectCancelsOnBothPaths(t *testing.T) {
	p := newProbeServer()
	p.srv.AddPrompt(&mcp.Prompt{Name: "slow"}, func(ctx context.Context, _ *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		select {
		case <-ctx.Done():
			p.cancelled <- "prompt"
			return nil, ctx.Err()
		case <-time.After(30 * time.Second):
			return nil, fmt.Errorf("never cancelled")
		}
	})
	arrived := make(chan string, 4)
	p.srv.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "tools/call" || method == "prompts/get" {
				arrived <- method
			}
			return next(ctx, method, req)
		}
	})
	up := mcptest.ServeHTTP(t, p.srv)
	m := startMux(t, fmt.Sprintf(`{"mcpServers": {"probe": {"type": "http", "url": %q}}}`, up.URL+"/mcp"), proxy.Options{})
	sid := sessionID(t, m.ts.URL)
	for _, c := range []struct{ path, body, tag string }{
		{"fast path", `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"probe_block","arguments":{"tag":"tool"}}}`, "tool"},
		{"SDK path", `{"jsonrpc":"2.0","id":8,"method":"prompts/get","params":{"name":"probe_slow"}}`, "prompt"},
	} {
		ctx, cancel := context.WithCancel(context.Background())
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, m.ts.URL+"/mcp", strings.NewReader(c.body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Session-Id", sid)
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		done := make(chan struct{})
		go func() {
			defer close(done)
			if resp, err := testHTTP.Do(req); err == nil {
				resp.Body.Close()
			}
		}()
		select { // the request reached the upstream
		case <-arrived:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: the request never reached the upstream", c.path)
		}
		cancel()
		<-done
		select {
		case tag := <-p.cancelled:
			if tag != c.tag {
				t.Errorf("%s: cancelled %q, want %q", c.path, tag, c.tag)
			}
		case <-time.After(10 * time.Second):
			t.Errorf("%s: the upstream request was not cancelled after the client disconnected", c.path)
		}
	}
}
