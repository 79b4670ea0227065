package proxy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/internal/mcptest"
	"github.com/mcp-mux/mcp-mux/internal/proxy"
)

// overrideUpstream serves, in both eras, a "lookup" tool (inputs q and
// account, both required) that answers with the arguments it got as JSON
// text. opens counts the initialize and server/discover requests it gets:
// a reconnect or rediscovery shows there.
func overrideUpstream(t *testing.T) (url string, opens *atomic.Int64) {
	t.Helper()
	opens = new(atomic.Int64)
	s := mcp.NewServer(&mcp.Implementation{Name: "crm", Version: "test"}, nil)
	s.AddTool(&mcp.Tool{Name: "lookup", Description: "Raw lookup.", InputSchema: map[string]any{"type": "object",
		"required":   []string{"q", "account"},
		"properties": map[string]any{"q": map[string]any{"type": "string"}, "account": map[string]any{"type": "string"}}}},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(req.Params.Arguments)}}}, nil
		})
	s.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "initialize" || method == "server/discover" {
				opens.Add(1)
			}
			return next(ctx, method, req)
		}
	})
	return mcptest.ServeHTTPBothEras(t, s).URL + "/mcp", opens
}

// overrideConfig is a config with the crm server, its lookup tool under
// override (a JSON object), and extra top-level members.
func overrideConfig(url, override, extra string) string {
	return fmt.Sprintf(`{"mcpServers": {"crm": {"type": "http", "url": %q, "tools": {"lookup": %s}}}%s}`, url, override, extra)
}

// findOverride renames lookup to find_customer, re-titles, re-describes
// and annotates it, and fixes its account argument.
const findOverride = `{"name": "find_customer", "title": "Find customer", "description": "Finds a customer by name.",
	"annotations": {"readOnlyHint": true, "openWorldHint": false}, "fixed_arguments": {"account": "acme"}}`

// argsOf decodes a tool's echoed arguments.
func argsOf(t *testing.T, text string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(text), &m); err != nil {
		t.Fatalf("echoed arguments %q: %v", text, err)
	}
	return m
}

// TestToolOverridesEverywhere: an override renames, re-titles, re-describes
// and annotates a tool and hides its fixed argument in tools/list of both
// eras; calls by the new name reach the raw tool with the fixed argument
// set over the caller's, in both eras; the old name is unknown; a reload
// that changes the override shows at once (list_changed) without
// reconnecting or rediscovering the upstream.
func TestToolOverridesEverywhere(t *testing.T) {
	up, opens := overrideUpstream(t)
	m := startMux(t, overrideConfig(up, findOverride, ""), proxy.Options{})
	opts, changed := listChanged()
	cs := connect(t, m.ts.URL, opts)

	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Tools) != 1 {
		t.Fatalf("tools %v", toolNames(t, cs))
	}
	tl := res.Tools[0]
	if tl.Name != "crm_find_customer" || tl.Title != "Find customer" || tl.Description != "Finds a customer by name." {
		t.Errorf("tool %+v", tl)
	}
	if a := tl.Annotations; a == nil || !a.ReadOnlyHint || a.OpenWorldHint == nil || *a.OpenWorldHint {
		t.Errorf("annotations %+v", a)
	}
	schema, _ := json.Marshal(tl.InputSchema)
	if strings.Contains(string(schema), "account") || !strings.Contains(string(schema), `"q"`) {
		t.Errorf("inputSchema %s", schema)
	}

	text, r := callText(t, cs, "crm_find_customer", map[string]any{"q": "bob", "account": "evil"})
	if want := map[string]any{"q": "bob", "account": "acme"}; r.IsError || !reflect.DeepEqual(argsOf(t, text), want) {
		t.Errorf("the upstream got %s, want %v", text, want)
	}
	if _, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "crm_lookup", Arguments: map[string]any{}}); err == nil || !strings.Contains(err.Error(), "unknown tool") {
		t.Errorf("the old name: %v", err)
	}

	// 2026-07-28: the same list, and a call by the new name.
	status, _, body := postModern(t, m.ts.URL+"/mcp", modernHeaders("tools/list", ""), modernBody("tools/list", ""))
	list := reply(t, body)
	if status != http.StatusOK || !strings.Contains(string(list.Result), `"name":"crm_find_customer"`) ||
		!strings.Contains(string(list.Result), `"readOnlyHint":true`) || strings.Contains(string(list.Result), "account") ||
		strings.Contains(string(list.Result), "Raw lookup") {
		t.Errorf("2026-07-28 tools/list %d %s", status, body)
	}
	_, _, body = postModern(t, m.ts.URL+"/mcp", modernHeaders("tools/call", "crm_find_customer"), modernCallBody("{}", "crm_find_customer", `{"q":"amy"}`))
	var call mcp.CallToolResult
	if err := json.Unmarshal(reply(t, body).Result, &call); err != nil || len(call.Content) != 1 {
		t.Fatalf("2026-07-28 call %s: %v", body, err)
	}
	if got := argsOf(t, call.Content[0].(*mcp.TextContent).Text); !reflect.DeepEqual(got, map[string]any{"q": "amy", "account": "acme"}) {
		t.Errorf("2026-07-28 call: the upstream got %v", got)
	}

	// A reload that changes only the override: shown at once, upstream kept.
	before := opens.Load()
	if before == 0 {
		t.Fatal("the upstream counted no initialize or server/discover")
	}
	next := `{"name": "customer_search", "description": "Searches customers.", "fixed_arguments": {"account": "globex"}}`
	if ev := m.srv.Reload("test", parseCfg(t, overrideConfig(up, next, "")), nil); ev.Outcome != proxy.ReloadApplied {
		t.Fatalf("reload %+v", ev)
	}
	waitSignal(t, changed, "tools/list_changed after the override changed")
	res, err = cs.ListTools(context.Background(), nil)
	if err != nil || len(res.Tools) != 1 || res.Tools[0].Name != "crm_customer_search" || res.Tools[0].Description != "Searches customers." ||
		res.Tools[0].Title != "" || res.Tools[0].Annotations != nil {
		t.Fatalf("tools after the reload %+v, %v", res, err)
	}
	text, _ = callText(t, cs, "crm_customer_search", map[string]any{"q": "cy"})
	if got := argsOf(t, text); got["account"] != "globex" {
		t.Errorf("after the reload the upstream got %v", got)
	}
	if _, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "crm_find_customer", Arguments: map[string]any{}}); err == nil {
		t.Error("the previous override's name still answers")
	}
	if n := opens.Load(); n != before {
		t.Errorf("an override change reconnected or rediscovered the upstream: %d → %d opens", before, n)
	}
}

// TestToolOverridesSearch: tool_search finds an overridden tool by its new
// name and description, returns its new schema, and the promoted tool is
// called by its new name.
func TestToolOverridesSearch(t *testing.T) {
	up, _ := overrideUpstream(t)
	m := startMux(t, overrideConfig(up, findOverride, `, "tool_search": {"enabled": true}`), proxy.Options{})
	cs := connect(t, m.ts.URL, nil)
	for _, q := range []string{"customer by name", "+find_customer", "select:crm_find_customer"} {
		text, names := search(t, cs, q)
		if len(names) != 1 || names[0] != "crm_find_customer" || strings.Contains(text, "account") || !strings.Contains(text, "Finds a customer by name.") {
			t.Errorf("tool_search(%q) = %q: %s", q, names, text)
		}
	}
	if text, names := search(t, cs, "Raw lookup"); len(names) != 0 {
		t.Errorf("the upstream's own description still matches: %s", text)
	}
	text, _ := callText(t, cs, "crm_find_customer", map[string]any{"q": "dee"})
	if got := argsOf(t, text); got["account"] != "acme" || got["q"] != "dee" {
		t.Errorf("the upstream got %v", got)
	}
}
