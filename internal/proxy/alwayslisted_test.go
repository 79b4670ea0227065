package proxy_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/internal/proxy"
)

// connectEra opens a go-sdk session on url (the mux's /mcp or a profile's
// path) negotiating version ("" for the client's default, 2026-07-28).
func connectEra(t *testing.T, url, version string) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "era-client", Version: "1"}, nil)
	var opts *mcp.ClientSessionOptions
	if version != "" {
		opts = &mcp.ClientSessionOptions{ProtocolVersion: version}
	}
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: testHTTP}, opts)
	if err != nil {
		t.Fatalf("connect %s: %v", version, err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// tool_search.always_listed keeps the tools it names fully listed, and
// callable without a search, in tools/list of both eras, while the rest
// stay deferred; a profile's own always_listed replaces it in its view.
func TestToolSearchAlwaysListed(t *testing.T) {
	m := startMux(t, strings.Replace(searchConfig(t, `, "profiles": {"p": {"servers": ["pg", "slack"], "always_listed": ["slack_search"]}}`),
		`"auto_promote_top_k": 2`, `"auto_promote_top_k": 2, "always_listed": ["pg_*"]`, 1), proxy.Options{})
	for _, era := range []string{"2025-11-25", ""} {
		name := era
		if name == "" {
			name = "2026-07-28"
		}
		t.Run(name, func(t *testing.T) {
			cs := connectEra(t, m.ts.URL+"/mcp", era)
			if got := cs.InitializeResult().ProtocolVersion; got != name {
				t.Fatalf("negotiated %s, want %s", got, name)
			}
			if got, want := toolNames(t, cs), []string{"pg_query", "pg_schema", "tool_search"}; !slices.Equal(got, want) {
				t.Errorf("tools/list = %v, want %v", got, want)
			}
			// The pinned tool is callable without a search; another is not.
			if got, res := callText(t, cs, "pg_query", map[string]any{}); res.IsError || got != "query" {
				t.Errorf("always-listed call = %q isError=%v", got, res.IsError)
			}
			if era != "" { // (2026-07-28 calls deferred tools by name without a promotion, DeerFlow's model)
				if got, _ := callText(t, cs, "slack_search", map[string]any{}); got != deferredText("slack_search") {
					t.Errorf("deferred call = %q", got)
				}
			}
			// The instructions list only the deferred names, and the
			// pinned tool's routing hint does not send the model to
			// tool_search.
			ins := cs.InitializeResult().Instructions
			if era == "" {
				return // a 2026-07-28 client reads them from server/discover
			}
			deferred, _, _ := strings.Cut(ins, "</available-deferred-tools>")
			if strings.Contains(deferred, "pg_query") || !strings.Contains(deferred, "slack_search") {
				t.Errorf("deferred section lists the pinned tool or lacks a deferred one:\n%s", deferred)
			}
			if !strings.Contains(ins, "prefer the `pg_query` tool.") || strings.Contains(ins, "fetch `pg_query`") {
				t.Errorf("pg_query's routing hint has the deferred wording:\n%s", ins)
			}
			// A promotion adds to the pinned tools; it does not replace them.
			search(t, cs, "select:slack_send_message")
			if got, want := toolNames(t, cs), []string{"pg_query", "pg_schema", "slack_send_message", "tool_search"}; !slices.Equal(got, want) {
				t.Errorf("tools/list after a promotion = %v, want %v", got, want)
			}
		})
	}
	// The profile's own list replaces the top-level one in its view.
	for _, era := range []string{"2025-11-25", ""} {
		cs := connectEra(t, m.ts.URL+"/mcp/p", era)
		if got, want := toolNames(t, cs), []string{"slack_search", "tool_search"}; !slices.Equal(got, want) {
			t.Errorf("profile p (%q) tools/list = %v, want %v", era, got, want)
		}
	}
}
