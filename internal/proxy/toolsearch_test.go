package proxy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/internal/config"
	"github.com/mcp-mux/mcp-mux/internal/proxy"
)

// searchConfig is a tool_search setup: three servers, routing on two.
func searchConfig(t *testing.T, extra string) string {
	t.Helper()
	pg := toolServer(t, nil, "query: Run a SQL query against Postgres", "schema: Describe tables [beta")
	slack := toolServer(t, nil, "send_message: Send a message to a Slack channel", "list_channels: List Slack channels", "search: Search messages")
	notes := toolServer(t, nil, "n1: Notebook jupyter cell 1", "n2: Notebook jupyter cell 2", "n3: Notebook jupyter cell 3",
		"n4: Notebook jupyter cell 4", "n5: Notebook jupyter cell 5", "n6: Notebook jupyter cell 6", "n7: Notebook jupyter cell 7")
	return fmt.Sprintf(`{"mcpServers": {
		"pg": {"type": "http", "url": %q, "tools": {"query": {"routing": {"mode": "prefer", "priority": 60, "keywords": ["订单", "SQL"]}}}},
		"slack": {"type": "http", "url": %q, "routing": {"mode": "prefer", "priority": 70, "keywords": ["slack"]}},
		"notes": {"type": "http", "url": %q}
	}, "tool_search": {"enabled": true, "auto_promote_top_k": 2} %s}`, pg, slack, notes, extra)
}

// search calls tool_search and returns the result text and the names in it.
func search(t *testing.T, cs *mcp.ClientSession, query string) (string, []string) {
	t.Helper()
	text, res := callText(t, cs, "tool_search", map[string]any{"query": query})
	if res.IsError {
		t.Fatalf("tool_search(%q) is an error: %s", query, text)
	}
	var fns []struct {
		Name string `json:"name"`
	}
	if json.Unmarshal([]byte(text), &fns) != nil {
		return text, nil
	}
	var names []string
	for _, f := range fns {
		names = append(names, f.Name)
	}
	return text, names
}

func deferredText(name string) string {
	return "Error: Tool '" + name + "' is deferred and has not been promoted yet. Call tool_search first to expose and promote this tool's schema, then retry."
}

func TestToolSearchDefersAndPromotesPerSession(t *testing.T) {
	m := startMux(t, searchConfig(t, ""), proxy.Options{})
	optsA, changedA := listChanged()
	optsB, changedB := listChanged()
	a := connect(t, m.ts.URL, optsA)
	b := connect(t, m.ts.URL, optsB)

	const wantInstructions = "<available-deferred-tools>\n" +
		"notes_n1\nnotes_n2\nnotes_n3\nnotes_n4\nnotes_n5\nnotes_n6\nnotes_n7\n" +
		"pg_query\npg_schema\nslack_list_channels\nslack_search\nslack_send_message\n" +
		"</available-deferred-tools>\n\n" +
		"<mcp_routing_hints>\n" +
		"When the user's request involves slack:\n" +
		"  use `tool_search` to fetch `slack_list_channels`, then prefer that MCP tool.\n" +
		"When the user's request involves slack:\n" +
		"  use `tool_search` to fetch `slack_search`, then prefer that MCP tool.\n" +
		"When the user's request involves slack:\n" +
		"  use `tool_search` to fetch `slack_send_message`, then prefer that MCP tool.\n" +
		"When the user's request involves 订单, or SQL:\n" +
		"  use `tool_search` to fetch `pg_query`, then prefer that MCP tool.\n" +
		"</mcp_routing_hints>"
	if got := a.InitializeResult().Instructions; got != wantInstructions {
		t.Errorf("instructions:\n%s\nwant:\n%s", got, wantInstructions)
	}

	// Only tool_search is listed, with a proper schema.
	res, err := a.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Tools) != 1 || res.Tools[0].Name != "tool_search" {
		t.Fatalf("tools/list = %v", toolNames(t, a))
	}
	schema, _ := json.Marshal(res.Tools[0].InputSchema)
	if !strings.Contains(string(schema), `"properties":{"query":{`) || !strings.Contains(string(schema), `"required":["query"]`) {
		t.Errorf("tool_search inputSchema = %s", schema)
	}
	if !strings.Contains(res.Tools[0].Description, `"select:Read,Edit"`) {
		t.Errorf("tool_search description lacks the query forms: %q", res.Tools[0].Description)
	}

	// An unpromoted deferred tool is not called.
	if got, res := callText(t, a, "pg_query", map[string]any{}); !res.IsError || got != deferredText("pg_query") {
		t.Fatalf("unpromoted call = %q", got)
	}

	// select: returns DeerFlow's shape in catalog order and promotes for A only.
	text, _ := search(t, a, "select:slack_search, pg_query")
	const wantText = `[
  {
    "name": "pg_query",
    "description": "Run a SQL query against Postgres",
    "parameters": {
      "type": "object"
    }
  },
  {
    "name": "slack_search",
    "description": "Search messages",
    "parameters": {
      "type": "object"
    }
  }
]`
	if text != wantText {
		t.Errorf("tool_search result:\n%s\nwant:\n%s", text, wantText)
	}
	waitSignal(t, changedA, "tools/list_changed for the promoting session")
	noSignal(t, changedB, "tools/list_changed for the other session")
	if got, want := toolNames(t, a), []string{"pg_query", "slack_search", "tool_search"}; !slices.Equal(got, want) {
		t.Errorf("A's tools/list = %v, want %v", got, want)
	}
	if got := toolNames(t, b); !slices.Equal(got, []string{"tool_search"}) {
		t.Errorf("B's tools/list = %v: A's promotion leaked", got)
	}
	if got, res := callText(t, a, "pg_query", map[string]any{}); res.IsError || got != "query" {
		t.Errorf("promoted call = %q isError=%v", got, res.IsError)
	}
	if got, _ := callText(t, b, "pg_query", map[string]any{}); got != deferredText("pg_query") {
		t.Errorf("B's call = %q", got)
	}
	// Promoting again changes nothing and notifies nobody.
	search(t, a, "select:pg_query")
	noSignal(t, changedA, "tools/list_changed for a promotion that changed nothing")
}

func TestToolSearchQueryForms(t *testing.T) {
	m := startMux(t, searchConfig(t, ""), proxy.Options{})
	for _, tc := range []struct {
		query string
		want  []string
		text  string // exact text, when the result is not a list
	}{
		// Name contains "slack"; ranked by matches of "send" in name and description.
		// "slack" is also a routing keyword: the top 2 by (-priority, name) are already in.
		{query: "+slack send", want: []string{"slack_send_message", "slack_list_channels", "slack_search"}},
		{query: "+SLACK", want: []string{"slack_list_channels", "slack_search", "slack_send_message"}},
		{query: "+", text: "No tools found matching: +"},
		// Regex over "name description": name matches (2) before description-only (1).
		{query: "channel", want: []string{"slack_list_channels", "slack_send_message"}},
		{query: "notebook|JUPYTER", want: []string{"notes_n1", "notes_n2", "notes_n3", "notes_n4", "notes_n5"}},
		// Invalid regex falls back to a literal.
		{query: "[beta", want: []string{"pg_schema"}},
		// select: is not capped, ignores unknown names, keeps catalog order and auto-promotes nothing.
		{query: "select:slack_search", want: []string{"slack_search"}},
		{query: "select:notes_n7,notes_n6,notes_n5,notes_n4,notes_n3,notes_n2,notes_n1,nope", want: []string{"notes_n1", "notes_n2", "notes_n3", "notes_n4", "notes_n5", "notes_n6", "notes_n7"}},
		// Keywords auto-promote (case-insensitive substring), top 2 by (-priority, name).
		{query: "show 订单 via SLACK please", want: []string{"slack_list_channels", "slack_search"}},
		{query: "which 订单 are open", want: []string{"pg_query"}},
		{query: "zzz", text: "No tools found matching: zzz"},
		{query: "   ", text: "No tools found matching:    "},
	} {
		cs := connect(t, m.ts.URL, nil)
		text, names := search(t, cs, tc.query)
		if tc.text != "" {
			if text != tc.text {
				t.Errorf("tool_search(%q) = %q, want %q", tc.query, text, tc.text)
			}
			continue
		}
		if !slices.Equal(names, tc.want) {
			t.Errorf("tool_search(%q) = %v, want %v", tc.query, names, tc.want)
		}
		// Whatever was returned is now listed for this session.
		if got := toolNames(t, cs); !slices.Equal(got[:len(got)-1], sortedByCatalog(tc.want)) {
			t.Errorf("after tool_search(%q) tools/list = %v", tc.query, got)
		}
	}
	cs := connect(t, m.ts.URL, nil)
	if text, res := callText(t, cs, "tool_search", map[string]any{}); !res.IsError || !strings.Contains(text, `"query"`) {
		t.Errorf("tool_search without query = %q isError=%v", text, res.IsError)
	}
}

// catalogOrder is config order, then each server's list order (the go-sdk sorts by name).
var catalogOrder = []string{"pg_query", "pg_schema", "slack_list_channels", "slack_search", "slack_send_message",
	"notes_n1", "notes_n2", "notes_n3", "notes_n4", "notes_n5", "notes_n6", "notes_n7"}

func sortedByCatalog(names []string) []string {
	var out []string
	for _, n := range catalogOrder {
		if slices.Contains(names, n) {
			out = append(out, n)
		}
	}
	return out
}

// TestToolSearchSDKPath runs tool_search on a session the fast path does
// not serve: the notification goes through the SDK on the call's stream.
func TestToolSearchSDKPath(t *testing.T) {
	m := startMux(t, searchConfig(t, ""), proxy.Options{})
	opts, changed := listChanged()
	cs := connectVersion(t, m.ts.URL, "2024-11-05", opts)
	if _, names := search(t, cs, "+pg"); !slices.Equal(names, []string{"pg_query", "pg_schema"}) {
		t.Fatalf("names = %v", names)
	}
	waitSignal(t, changed, "tools/list_changed on the SDK path")
	if got := toolNames(t, cs); !slices.Equal(got, []string{"pg_query", "pg_schema", "tool_search"}) {
		t.Errorf("tools/list = %v", got)
	}
	if got, _ := callText(t, cs, "pg_schema", map[string]any{}); got != "schema" {
		t.Errorf("pg_schema = %q", got)
	}
}

// TestToolSearchPromotionsAcrossReload: a reload keeps the promotions that
// still exist and drops those it removed or denied, for good.
func TestToolSearchPromotionsAcrossReload(t *testing.T) {
	doc := searchConfig(t, "")
	m := startMux(t, doc, proxy.Options{})
	opts, changed := listChanged()
	cs := connect(t, m.ts.URL, opts)
	search(t, cs, "select:pg_query,slack_search")
	waitSignal(t, changed, "tools/list_changed after promoting")

	apply := func(extra string) {
		t.Helper()
		cfg, err := config.Parse([]byte(strings.Replace(doc, `"auto_promote_top_k": 2}`, `"auto_promote_top_k": 2}`+extra, 1)), config.LoadOptions{Filename: "t.json"})
		if err != nil {
			t.Fatal(err)
		}
		if err := m.srv.Apply(cfg); err != nil {
			t.Fatal(err)
		}
	}
	apply(`, "guardrails": {"denied_tools": ["slack_search"]}`)
	waitSignal(t, changed, "tools/list_changed after denying a promoted tool")
	if got := toolNames(t, cs); !slices.Equal(got, []string{"pg_query", "tool_search"}) {
		t.Errorf("after deny: %v", got)
	}
	if _, names := search(t, cs, "select:slack_search"); names != nil {
		t.Errorf("a denied tool was found: %v", names)
	}
	apply(``)
	// The session's list is unchanged (the dropped promotion stays dropped),
	// so it gets no tools/list_changed for this reload.
	if got := toolNames(t, cs); !slices.Equal(got, []string{"pg_query", "tool_search"}) {
		t.Errorf("after lifting the deny: %v", got)
	}
	if got, _ := callText(t, cs, "slack_search", map[string]any{}); got != deferredText("slack_search") {
		t.Errorf("slack_search = %q, want it deferred again", got)
	}
	if got, _ := callText(t, cs, "pg_query", map[string]any{}); got != "query" {
		t.Errorf("pg_query = %q", got)
	}
	// Turning tool_search off lists everything again.
	cfg, err := config.Parse([]byte(strings.Replace(doc, `"enabled": true`, `"enabled": false`, 1)), config.LoadOptions{Filename: "t.json"})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.srv.Apply(cfg); err != nil {
		t.Fatal(err)
	}
	waitSignal(t, changed, "tools/list_changed after disabling tool_search")
	if got := toolNames(t, cs); !slices.Equal(got, catalogOrder) {
		t.Errorf("tool_search off: %v", got)
	}
}

func TestToolSearchConfigAndReservedName(t *testing.T) {
	cfg, err := config.Parse([]byte(`{"tool_search": {"enabled": true, "auto_promote_top_k": 9}}`), config.LoadOptions{Filename: "t.json"})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.ToolSearch.AutoPromoteTopK != 5 || len(cfg.Warnings) != 1 || !strings.Contains(cfg.Warnings[0].Error(), "clamping to 5") {
		t.Errorf("top_k = %d, warnings %v", cfg.ToolSearch.AutoPromoteTopK, cfg.Warnings)
	}
	if def, _ := config.Parse([]byte(`{}`), config.LoadOptions{Filename: "t.json"}); def.ToolSearch.Enabled || def.ToolSearch.AutoPromoteTopK != 3 {
		t.Errorf("defaults = %+v", def.ToolSearch)
	}

	// An upstream tool visibly named tool_search gives way to mcp-mux's.
	url := toolServer(t, nil, "tool_search: Upstream search", "other")
	m := startMux(t, fmt.Sprintf(`{"mcpServers": {"raw": {"type": "http", "url": %q, "tool_name_prefix": false}}, "tool_search": {"enabled": true}}`, url), proxy.Options{})
	cs := connect(t, m.ts.URL, nil)
	if _, names := search(t, cs, "select:other,tool_search"); !slices.Equal(names, []string{"other"}) {
		t.Errorf("names = %v", names)
	}
	if !strings.Contains(m.logs.String(), "dropping tool named like mcp-mux's tool_search") {
		t.Error("no warning for the shadowed upstream tool")
	}
}
