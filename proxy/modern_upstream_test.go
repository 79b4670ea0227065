package proxy_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/proxy"
)

// paramServer is a 2026-07-28 (stateless) go-sdk server whose "route" tool
// annotates arguments with x-mcp-header; the SDK server rejects a call whose
// Mcp-Param-* headers do not match its arguments, and the tool reports the
// headers it got.
func paramServer(t *testing.T) string {
	t.Helper()
	s := mcp.NewServer(&mcp.Implementation{Name: "params", Version: "1"}, nil)
	schema := map[string]any{"type": "object", "properties": map[string]any{
		"region": map[string]any{"type": "string", "x-mcp-header": "Region"},
		"count":  map[string]any{"type": "integer", "x-mcp-header": "Count"},
		"dry":    map[string]any{"type": "boolean", "x-mcp-header": "Dry-Run"},
		"scope": map[string]any{"type": "object", "properties": map[string]any{
			"tenant": map[string]any{"type": "string", "x-mcp-header": "Tenant"},
		}},
		"note": map[string]any{"type": "string"},
	}}
	s.AddTool(&mcp.Tool{Name: "route", InputSchema: schema},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var parts []string
			for _, h := range []string{"Region", "Count", "Dry-Run", "Tenant", "Note"} {
				parts = append(parts, h+"="+req.Extra.Header.Get("Mcp-Param-"+h))
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.Join(parts, ";")}}}, nil
		})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{Stateless: true})
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	return ts.URL + "/mcp"
}

// A legacy client sends no Mcp-Param-* headers: mcp-mux writes them from the
// arguments for a 2026-07-28 upstream, encoding values that are not plain
// printable ASCII, and the upstream (which checks them) runs the call.
func TestLegacyClientGetsParamHeaders(t *testing.T) {
	m := startMux(t, fmt.Sprintf(`{"mcpServers": {"p": {"type": "http", "url": %q}}}`, paramServer(t)), proxy.Options{})
	cs := connect(t, m.ts.URL, nil)
	got, res := callText(t, cs, "p_route", map[string]any{
		"region": "München", "count": 42, "dry": true, "scope": map[string]any{"tenant": " acme"}, "note": "x"})
	if res.IsError {
		t.Fatalf("call failed: %s", got)
	}
	want := "Region==?base64?TcO8bmNoZW4=?=;Count=42;Dry-Run=true;Tenant==?base64?IGFjbWU=?=;Note="
	if got != want {
		t.Fatalf("upstream saw %q, want %q", got, want)
	}
	// Absent arguments get no header (the upstream rejects one that is sent).
	got, res = callText(t, cs, "p_route", map[string]any{"region": "eu-west-1"})
	if res.IsError || got != "Region=eu-west-1;Count=;Dry-Run=;Tenant=;Note=" {
		t.Fatalf("call with one argument: %q (error %v)", got, res.IsError)
	}
}

// A 2026-07-28 client's own Mcp-Param-* headers are forwarded, not replaced.
func TestModernClientParamHeadersForwarded(t *testing.T) {
	m := startMux(t, fmt.Sprintf(`{"mcpServers": {"p": {"type": "http", "url": %q}}}`, paramServer(t)), proxy.Options{})
	url := m.ts.URL + "/mcp"
	_, r := modernCall(t, url, map[string]string{"Mcp-Param-Region": "eu"}, `{}`, "tools/call", "p_route", `"name":"p_route","arguments":{"region":"eu","count":7}`)
	if r.Error != nil || !strings.Contains(string(r.Result), "Region=eu;Count=7;") {
		t.Fatalf("modern call: %s %+v", r.Result, r.Error)
	}
	// A mismatching header of the client's reaches the upstream, which refuses it.
	_, r = modernCall(t, url, map[string]string{"Mcp-Param-Region": "us"}, `{}`, "tools/call", "p_route", `"name":"p_route","arguments":{"region":"eu"}`)
	if r.Error == nil && !strings.Contains(string(r.Result), `"isError":true`) {
		t.Fatalf("a mismatching client header was not refused: %s", r.Result)
	}
}
