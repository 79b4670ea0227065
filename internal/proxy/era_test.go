package proxy_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/internal/mcptest"
	"github.com/mcp-mux/mcp-mux/internal/proxy"
)

// resultTextOf is the text content of a raw tools/call result.
func resultTextOf(t *testing.T, r rpcReply) string {
	t.Helper()
	if r.Error != nil {
		t.Fatalf("call failed: %+v", r.Error)
	}
	var res mcp.CallToolResult
	if err := res.UnmarshalJSON(r.Result); err != nil {
		t.Fatalf("result %s: %v", r.Result, err)
	}
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// One dual-era stdio server (go-sdk's default), the default config
// (protocol_version auto): a 2025-11-25 client's call session runs on
// 2025-11-25, where the server's live sampling request reaches the client,
// while a 2026-07-28 client's call, made while the first client's sampling
// request is still open, runs on 2026-07-28. The server reports the
// protocol version of each request it serves.
func TestDualEraStdioServerFollowsClientEra(t *testing.T) {
	m := startMux(t, `{"mcpServers": {`+stdioServerJSON(t, "dual", mcptest.StdioOptions{}, "")+`}}`, proxy.Options{})
	checkFollowsClientEra(t, m)
}

// The same over HTTP, with a server that serves both eras properly: its
// 2026-07-28 requests go to a stateless handler, the rest to a stateful
// one (as go-sdk documents serving both eras).
func TestDualEraHTTPServerFollowsClientEra(t *testing.T) {
	s := mcptest.NewServer("dual")
	stateful := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
	stateless := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{Stateless: true})
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Mcp-Protocol-Version") >= "2026-07-28" {
			stateless.ServeHTTP(w, r)
			return
		}
		stateful.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		ts.Close()
		for ss := range s.Sessions() {
			_ = ss.Close()
		}
	})
	m := startMux(t, fmt.Sprintf(`{"mcpServers": {"dual": {"type": "http", "url": %q}}}`, ts.URL+"/mcp"), proxy.Options{})
	checkFollowsClientEra(t, m)
}

// checkFollowsClientEra runs a 2025-11-25 and a 2026-07-28 client against
// m's server "dual" at once and checks that each call reached it on the
// client's own era.
func checkFollowsClientEra(t *testing.T, m *mux) {
	t.Helper()
	asked := make(chan string, 1)
	modernDone := make(chan struct{})
	cs := connect(t, m.ts.URL, &mcp.ClientOptions{
		CreateMessageHandler: func(ctx context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			asked <- req.Params.Messages[0].Content.(*mcp.TextContent).Text
			select {
			case <-modernDone:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			return &mcp.CreateMessageResult{Model: "m", Role: "assistant", Content: &mcp.TextContent{Text: "yes"}}, nil
		}})
	if got, _ := callText(t, cs, "dual_version", nil); got != "2025-11-25" {
		t.Errorf("the 2025-11-25 client's call reached the server on %q", got)
	}
	type outcome struct {
		text string
		err  error
	}
	sampled := make(chan outcome, 1)
	go func() {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "dual_sample", Arguments: map[string]any{"tag": "legacy"}})
		if err != nil {
			sampled <- outcome{err: err}
			return
		}
		tc, _ := res.Content[0].(*mcp.TextContent)
		if res.IsError || tc == nil {
			sampled <- outcome{err: fmt.Errorf("tool error: %+v", res.Content)}
			return
		}
		sampled <- outcome{text: tc.Text}
	}()
	select {
	case msg := <-asked:
		if msg != "sample legacy" {
			t.Fatalf("the client was asked %q", msg)
		}
	case o := <-sampled:
		t.Fatalf("the sample call ended before asking the client: %q %v", o.text, o.err)
	case <-time.After(30 * time.Second):
		t.Fatal("the server's sampling request never reached the 2025-11-25 client")
	}
	// The first client's sampling request is open: a 2026-07-28 client's
	// call meanwhile runs on 2026-07-28.
	_, r := modernCall(t, m.ts.URL+"/mcp", nil, `{}`, "tools/call", "dual_version", `"name":"dual_version","arguments":{}`)
	if got := resultTextOf(t, r); got != "2026-07-28" {
		t.Errorf("the 2026-07-28 client's call reached the server on %q", got)
	}
	close(modernDone)
	select {
	case o := <-sampled:
		if o.err != nil || o.text != "sampled yes" {
			t.Fatalf("sample: %q %v", o.text, o.err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the sample call did not finish")
	}
}
