package catalog_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/internal/catalog"
	"github.com/mcp-mux/mcp-mux/internal/config"
	"github.com/mcp-mux/mcp-mux/internal/taskpoll"
	"github.com/mcp-mux/mcp-mux/internal/upstream"
)

// srv is a test backend: its handle is its name.
type srv = catalog.Source[string]

// tool is an upstream tool object named name with a description.
func tool(name, desc string) upstream.Tool {
	raw, _ := json.Marshal(map[string]any{"name": name, "description": desc, "inputSchema": map[string]any{"type": "object"}})
	return upstream.Tool{Name: name, Raw: raw}
}

// source is a backend listing tools named by raw names (description "d").
func source(name string, prefix bool, raws ...string) srv {
	s := srv{Server: name, Name: name, Prefix: prefix, Config: &config.Server{Name: name}}
	for _, r := range raws {
		s.Lists.Tools = append(s.Lists.Tools, tool(r, "d"))
	}
	return s
}

// listed returns the names in a tools/list result.
func listed(t *testing.T, raw json.RawMessage) []string {
	t.Helper()
	var l struct {
		Tools []struct {
			Name string `json:"name"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(raw, &l); err != nil {
		t.Fatalf("tools/list %s: %v", raw, err)
	}
	names := []string{}
	for _, tl := range l.Tools {
		names = append(names, tl.Name)
	}
	return names
}

// build builds a catalog with a null logger.
func build(sources []srv, o catalog.Options) *catalog.Catalog[string] {
	return catalog.Build(sources, catalog.NewPolicy(o), hclog.NewNullLogger())
}

// TestNamesPrefixesAndCollisions: prefixing, the charset rule, reserved
// names and first-wins collisions, in source order then list order.
func TestNamesPrefixesAndCollisions(t *testing.T) {
	long := strings.Repeat("x", 128)
	for _, tc := range []struct {
		name    string
		sources []srv
		opts    catalog.Options
		want    []string          // listed, in order
		owners  map[string]string // visible name → "server/raw"
	}{
		{name: "prefix", sources: []srv{source("gh", true, "search", "issue")},
			want: []string{"gh_search", "gh_issue"}, owners: map[string]string{"gh_search": "gh/search", "gh_issue": "gh/issue"}},
		{name: "no prefix keeps raw names", sources: []srv{source("gh", false, "search")},
			want: []string{"search"}, owners: map[string]string{"search": "gh/search"}},
		{name: "first server wins", sources: []srv{source("a", false, "x", "y"), source("b", false, "y", "z")},
			want: []string{"x", "y", "z"}, owners: map[string]string{"y": "a/y", "z": "b/z"}},
		{name: "first in a list wins", sources: []srv{source("a", false, "x", "x")},
			want: []string{"x"}},
		{name: "prefixed name collides with a raw one", sources: []srv{source("a", true, "x"), source("b", false, "a_x", "b_x")},
			want: []string{"a_x", "b_x"}, owners: map[string]string{"a_x": "a/x", "b_x": "b/b_x"}},
		{name: "prefixes keep same raw names apart", sources: []srv{source("a", true, "x"), source("b", true, "x")},
			want: []string{"a_x", "b_x"}, owners: map[string]string{"a_x": "a/x", "b_x": "b/x"}},
		{name: "charset", sources: []srv{source("a", false, "ok-1_A", "has space", "dot.ted", "", "ünï", long, long+"y")},
			want: []string{"ok-1_A", long}},
		{name: "prefix pushes a name over 128", sources: []srv{source("a", true, long[:126], long[:127])},
			want: []string{"a_" + long[:126]}},
		{name: "tool_search free while search is off", sources: []srv{source("a", false, "tool_search")},
			want: []string{"tool_search"}},
		{name: "tool_search reserved while search is on", sources: []srv{source("a", false, "tool_search", "x")},
			opts: catalog.Options{ToolSearch: config.ToolSearch{Enabled: true}}, want: []string{"tool_search"}, // the search tool itself
			owners: map[string]string{"x": "a/x"}},
		{name: "built-in task tools reserved", sources: []srv{source("a", false, "list_background_tasks", "x")},
			opts: catalog.Options{Tasks: true}, want: []string{"x", "list_background_tasks", "cancel_background_task", "get_background_task"},
			owners: map[string]string{"list_background_tasks": "/list_background_tasks"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := build(tc.sources, tc.opts)
			if got := listed(t, c.ListJSON()); !slices.Equal(got, tc.want) {
				t.Errorf("listed %q, want %q", got, tc.want)
			}
			for name, want := range tc.owners {
				r := c.Lookup(name)
				if r == nil {
					t.Errorf("Lookup(%q) = nil", name)
					continue
				}
				if got := r.Server + "/" + r.Raw; got != want {
					t.Errorf("Lookup(%q) = %s, want %s", name, got, want)
				}
			}
		})
	}
}

// TestLookupNames: the visible name in the tool object, and no route for a
// dropped tool.
func TestLookupNames(t *testing.T) {
	c := build([]srv{source("a", true, "x", "bad name")}, catalog.Options{})
	r := c.Lookup("a_x")
	var obj struct{ Name, Description string }
	if err := json.Unmarshal(r.JSON, &obj); err != nil || obj.Name != "a_x" || obj.Description != "d" {
		t.Errorf("tool object %s", r.JSON)
	}
	for _, n := range []string{"x", "a_bad name", "bad name"} {
		if c.Lookup(n) != nil {
			t.Errorf("Lookup(%q) found a route", n)
		}
	}
	if c.Len() != 1 {
		t.Errorf("Len = %d", c.Len())
	}
}

// TestGuardrailTable: DeerFlow's allowlist then denylist on visible names;
// a denied tool keeps a route with the guardrail text but is not listed,
// searchable or in the instructions.
func TestGuardrailTable(t *testing.T) {
	deny := func(name, reason string) string {
		return fmt.Sprintf(`{"content":[{"type":"text","text":"Guardrail denied: tool '%s' was blocked (oap.tool_not_allowed). Reason: %s. Choose an alternative approach."}],"isError":true}`, name, reason)
	}
	for _, tc := range []struct {
		name   string
		g      config.Guardrails
		listed []string
		denied map[string]string // name → its Deny result
	}{
		{name: "disabled", g: config.Guardrails{Enabled: false, DeniedTools: []string{"a_x"}}, listed: []string{"a_x", "a_y", "b_z"}},
		{name: "nothing configured", g: config.Guardrails{Enabled: true}, listed: []string{"a_x", "a_y", "b_z"}},
		{name: "denylist", g: config.Guardrails{Enabled: true, DeniedTools: []string{"a_y", "not_there"}},
			listed: []string{"a_x", "b_z"}, denied: map[string]string{"a_y": deny("a_y", "tool 'a_y' is denied")}},
		{name: "allowlist", g: config.Guardrails{Enabled: true, AllowedTools: []string{"b_z"}},
			listed: []string{"b_z"}, denied: map[string]string{"a_x": deny("a_x", "tool 'a_x' not in allowlist")}},
		{name: "empty allowlist allows nothing", g: config.Guardrails{Enabled: true, AllowedTools: []string{}},
			listed: []string{}, denied: map[string]string{"b_z": deny("b_z", "tool 'b_z' not in allowlist")}},
		{name: "deny wins over allow", g: config.Guardrails{Enabled: true, AllowedTools: []string{"a_x", "b_z"}, DeniedTools: []string{"a_x"}},
			listed: []string{"b_z"}, denied: map[string]string{"a_x": deny("a_x", "tool 'a_x' is denied")}},
		{name: "raw names do not match", g: config.Guardrails{Enabled: true, DeniedTools: []string{"x"}}, listed: []string{"a_x", "a_y", "b_z"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sources := []srv{source("a", true, "x", "y"), source("b", true, "z")}
			for _, search := range []bool{false, true} {
				c := build(sources, catalog.Options{Guardrails: tc.g, ToolSearch: config.ToolSearch{Enabled: search}})
				if search {
					res, names := c.ToolSearch(json.RawMessage(`{"query":"select:a_x,a_y,b_z"}`))
					if len(tc.listed) == 0 {
						if names != nil || !strings.Contains(string(res), "No tools found") {
							t.Errorf("search found %q in %s", names, res)
						}
					} else if !slices.Equal(names, tc.listed) {
						t.Errorf("select: found %q, want %q", names, tc.listed)
					}
				} else if got := listed(t, c.ListJSON()); !slices.Equal(got, tc.listed) {
					t.Errorf("listed %q, want %q", got, tc.listed)
				}
				for _, n := range []string{"a_x", "a_y", "b_z"} {
					r := c.Lookup(n)
					if r == nil {
						t.Fatalf("Lookup(%q) = nil: a denied tool keeps its route", n)
					}
					if want := tc.denied[n]; want != "" && string(r.Deny) != want {
						t.Errorf("%s denied with\n %s\nwant\n %s", n, r.Deny, want)
					}
					if r.Deny != nil && strings.Contains(c.Instructions(), n) {
						t.Errorf("instructions name denied %s: %s", n, c.Instructions())
					}
				}
			}
		})
	}
}

// searchSources are backends for the tool_search tests: prefer-mode tools
// with keywords and priorities, and plain ones.
func searchSources() []srv {
	prefer := func(prio int, kw ...string) config.ToolOverride {
		mode := config.RoutingPrefer
		return config.ToolOverride{Routing: &config.RoutingOverride{Mode: &mode, Priority: &prio, Keywords: kw, KeywordsSet: true}}
	}
	slack := srv{Server: "slack", Name: "slack", Prefix: true, Config: &config.Server{Name: "slack", Tools: map[string]config.ToolOverride{
		"send_message":  prefer(50, "chat", "Message"),
		"list_channels": prefer(90, "channel"),
	}}}
	slack.Lists.Tools = []upstream.Tool{
		tool("send_message", "Send a message to a Slack channel"),
		tool("list_channels", "List channels"),
		tool("search", "Search messages"),
	}
	pg := srv{Server: "pg", Name: "pg", Prefix: true, Config: &config.Server{Name: "pg", Tools: map[string]config.ToolOverride{
		"query": prefer(50, "sql", " "),
		"admin": prefer(50, "SQL"),
	}}}
	pg.Lists.Tools = []upstream.Tool{tool("query", "Run a SQL query against Postgres"), tool("admin", "Database admin")}
	return []srv{slack, pg}
}

// TestToolSearchForms: the three query forms, auto-promotion by routing
// keywords (priority, then name, at most top-k; not for select:) and the
// error and empty answers.
func TestToolSearchForms(t *testing.T) {
	for _, tc := range []struct {
		query string
		topK  int
		want  []string // names to promote, in result order
		text  string   // a substring of the result when want is empty
	}{
		{query: "select:pg_query, slack_search,pg_query,nope", want: []string{"slack_search", "pg_query"}},
		{query: "select:", text: "No tools found matching: select:"},
		{query: "slack", want: []string{"slack_send_message", "slack_list_channels", "slack_search"}},
		{query: "postgres", want: []string{"pg_query"}},
		{query: "SEND|admin", want: []string{"slack_send_message", "pg_admin"}},
		{query: "+slack message", want: []string{"slack_send_message", "slack_search", "slack_list_channels"}},
		{query: "+  pg", want: []string{"pg_query", "pg_admin"}},
		{query: "+", text: "No tools found matching: +"},
		{query: "nothing matches this", text: "No tools found matching: nothing matches this"},
		// Auto-promotion: keyword substrings, case-insensitive, by
		// (-priority, name), at most top-k (clamped to 1..5).
		{query: "post in the CHANNEL and chat", topK: 3, want: []string{"slack_list_channels", "slack_send_message"}},
		{query: "an sql question", topK: 3, want: []string{"pg_admin", "pg_query"}},
		{query: "an sql question", topK: 1, want: []string{"pg_admin"}},
		{query: "an sql question", topK: 0, want: []string{"pg_admin"}},
		{query: "query|sql", topK: 2, want: []string{"pg_query", "pg_admin"}}, // each once
		{query: "select:slack_search sql", want: nil, text: "No tools found"},
		{query: "select:slack_search,chat", want: []string{"slack_search"}},
	} {
		t.Run(tc.query, func(t *testing.T) {
			c := build(searchSources(), catalog.Options{ToolSearch: config.ToolSearch{Enabled: true, AutoPromoteTopK: tc.topK}})
			args, _ := json.Marshal(map[string]string{"query": tc.query})
			res, names := c.ToolSearch(args)
			if !slices.Equal(names, tc.want) {
				t.Errorf("promote %q, want %q (result %s)", names, tc.want, res)
			}
			if tc.text != "" && !strings.Contains(string(res), tc.text) {
				t.Errorf("result %s, want %q", res, tc.text)
			}
		})
	}
}

// TestToolSearchResultShape: DeerFlow's OpenAI-function items, indented,
// and the argument errors.
func TestToolSearchResultShape(t *testing.T) {
	c := build(searchSources(), catalog.Options{ToolSearch: config.ToolSearch{Enabled: true}})
	res, _ := c.ToolSearch(json.RawMessage(`{"query":"select:pg_query"}`))
	var r mcp.CallToolResult
	if err := json.Unmarshal(res, &r); err != nil || r.IsError {
		t.Fatalf("result %s: %v", res, err)
	}
	const want = "[\n  {\n    \"name\": \"pg_query\",\n    \"description\": \"Run a SQL query against Postgres\",\n    \"parameters\": {\n      \"type\": \"object\"\n    }\n  }\n]"
	if got := r.Content[0].(*mcp.TextContent).Text; got != want {
		t.Errorf("text:\n%s\nwant:\n%s", got, want)
	}
	for _, args := range []string{``, `{}`, `{"query":1}`, `not json`} {
		res, names := c.ToolSearch(json.RawMessage(args))
		if names != nil || !strings.Contains(string(res), `needs a \"query\" string argument`) || !strings.Contains(string(res), `"isError":true`) {
			t.Errorf("args %q: %s, %q", args, res, names)
		}
	}
}

// TestPromotions: a session's tools/list under tool_search, its cache, and
// promotions surviving a rebuild only for tools still listed.
func TestPromotions(t *testing.T) {
	opts := catalog.Options{ToolSearch: config.ToolSearch{Enabled: true}}
	c1 := build(searchSources(), opts)
	var p catalog.Promotions[string]
	if got := listed(t, p.ToolsList(c1)); !slices.Equal(got, []string{"tool_search"}) {
		t.Errorf("nothing promoted lists %q", got)
	}
	if !p.Add(c1, []string{"pg_admin", "slack_search"}) || p.Add(c1, []string{"pg_admin"}) {
		t.Error("Add reports new promotions wrongly")
	}
	want := []string{"slack_search", "pg_admin", "tool_search"} // catalog order, then tool_search
	if got := listed(t, p.ToolsList(c1)); !slices.Equal(got, want) {
		t.Errorf("promoted lists %q, want %q", got, want)
	}
	if a, b := p.ToolsList(c1), p.ToolsList(c1); &a[0] != &b[0] {
		t.Error("ToolsList is not cached")
	}
	if !p.Has(c1, "pg_admin") || p.Has(c1, "pg_query") {
		t.Error("Has")
	}
	// pg_admin is now denied: the promotion is dropped, the other stays.
	opts.Guardrails = config.Guardrails{Enabled: true, DeniedTools: []string{"pg_admin"}}
	c2 := build(searchSources(), opts)
	if got := listed(t, p.ListFor(c2)); !slices.Equal(got, []string{"slack_search", "tool_search"}) {
		t.Errorf("ListFor(next) = %q", got)
	}
	if got := listed(t, p.ListFor(c1)); !slices.Equal(got, want) {
		t.Errorf("ListFor(before) = %q, want %q", got, want)
	}
	if p.Has(c2, "pg_admin") || !p.Has(c2, "slack_search") {
		t.Error("promotions after the rebuild")
	}
	if p.Has(c1, "pg_admin") {
		t.Error("a dropped promotion came back")
	}
	// Without tool_search every session sees the whole list.
	c3 := build(searchSources(), catalog.Options{})
	if got := string(p.ToolsList(c3)); got != string(c3.ListJSON()) || c3.Searching() {
		t.Errorf("without tool_search: %s", got)
	}
}

// TestDeferredInstructions: the deferred-tools section lists every listed
// name, then the routing hints use the tool_search wording.
func TestDeferredInstructions(t *testing.T) {
	c := build(searchSources(), catalog.Options{ToolSearch: config.ToolSearch{Enabled: true}})
	const want = "<available-deferred-tools>\npg_admin\npg_query\nslack_list_channels\nslack_search\nslack_send_message\n</available-deferred-tools>\n\n" +
		"<mcp_routing_hints>\n" +
		"When the user's request involves channel:\n  use `tool_search` to fetch `slack_list_channels`, then prefer that MCP tool.\n" +
		"When the user's request involves SQL:\n  use `tool_search` to fetch `pg_admin`, then prefer that MCP tool.\n" +
		"When the user's request involves sql, or  :\n  use `tool_search` to fetch `pg_query`, then prefer that MCP tool.\n" +
		"When the user's request involves chat, or Message:\n  use `tool_search` to fetch `slack_send_message`, then prefer that MCP tool.\n" +
		"</mcp_routing_hints>"
	if got := c.Instructions(); got != want {
		t.Errorf("instructions:\n%s\nwant:\n%s", got, want)
	}
}

// TestResourcesAndPrompts: prompts named like tools, resources first wins,
// templates, and the single-server fallback.
func TestResourcesAndPrompts(t *testing.T) {
	item := func(key string) upstream.Item {
		raw, _ := json.Marshal(map[string]string{"name": key, "uri": key})
		return upstream.Item{Key: key, Raw: raw}
	}
	a := source("a", true)
	a.Lists.Prompts = []upstream.Item{item("greet"), item("bad name")}
	a.Lists.Resources = []upstream.Item{item("file:///one")}
	b := source("b", false)
	b.Lists.Prompts = []upstream.Item{item("a_greet"), item("hello")}
	b.Lists.Resources = []upstream.Item{item("file:///one"), item("file:///two")}
	b.Lists.Templates = []upstream.Item{item("db://{table}"), item("{bad")}
	c := build([]srv{a, b}, catalog.Options{})
	if p := c.Prompt("a_greet"); p == nil || p.Server != "a" || p.Raw != "greet" {
		t.Errorf("a_greet = %+v", p)
	}
	if p := c.Prompt("hello"); p == nil || p.Server != "b" {
		t.Errorf("hello = %+v", p)
	}
	if n := len(c.Prompts()); n != 2 {
		t.Errorf("%d prompts listed", n)
	}
	if n, m := len(c.Resources()), len(c.Templates()); n != 2 || m != 1 {
		t.Errorf("%d resources, %d templates listed", n, m)
	}
	for uri, want := range map[string]string{
		"file:///one": "a", "file:///two": "b", "db://users": "b", "other://x": "",
		"db://" + strings.Repeat("x", catalog.MaxResourceURI): "",
	} {
		if got := c.ResourceOwner(uri); got != want {
			t.Errorf("ResourceOwner(%.40q) = %q, want %q", uri, got, want)
		}
	}
	// One server with resources owns every URI nothing else matches.
	only := build([]srv{b, source("c", false, "t")}, catalog.Options{})
	if got := only.ResourceOwner("other://x"); got != "b" {
		t.Errorf("single-server fallback = %q", got)
	}
	if !catalog.SamePrompts(c, build([]srv{a, b}, catalog.Options{})) || catalog.SameResources(c, build([]srv{a}, catalog.Options{})) {
		t.Error("SamePrompts/SameResources")
	}
}

// TestCapabilitiesTable: what is advertised follows the sources and tasks.
func TestCapabilitiesTable(t *testing.T) {
	withCaps := func(c *mcp.ServerCapabilities) srv {
		s := source("a", false, "t")
		s.Lists.Capabilities = c
		return s
	}
	for _, tc := range []struct {
		name    string
		sources []srv
		tasks   bool
		want    string
	}{
		{name: "tools only", sources: []srv{source("a", false, "t")}, want: `{"tools":{"listChanged":true}}`},
		{name: "durable tasks", tasks: true, want: `{"logging":{},"resources":{"listChanged":true,"subscribe":true},"tools":{"listChanged":true}}`},
		{name: "declared", sources: []srv{withCaps(&mcp.ServerCapabilities{
			Prompts: &mcp.PromptCapabilities{}, Resources: &mcp.ResourceCapabilities{Subscribe: true},
			Completions: &mcp.CompletionCapabilities{}, Logging: &mcp.LoggingCapabilities{}})},
			want: `{"completions":{},"logging":{},"prompts":{"listChanged":true},"resources":{"listChanged":true,"subscribe":true},"tools":{"listChanged":true}}`},
		{name: "listed without declaring", sources: []srv{func() srv {
			s := source("a", false)
			s.Lists.Prompts = []upstream.Item{{Key: "p", Raw: json.RawMessage(`{"name":"p"}`)}}
			s.Lists.Templates = []upstream.Item{{Key: "x://{y}", Raw: json.RawMessage(`{}`)}}
			return s
		}()}, want: `{"prompts":{"listChanged":true},"resources":{"listChanged":true},"tools":{"listChanged":true}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			caps := build(tc.sources, catalog.Options{Tasks: tc.tasks}).Capabilities()
			got, _ := json.Marshal(&caps)
			if string(got) != tc.want {
				t.Errorf("capabilities %s\nwant %s", got, tc.want)
			}
		})
	}
}

// TestTaskToolsets: a task server's status and cancel tools are hidden; its
// submit tool is wrapped with tasks on and hidden with tasks off.
func TestTaskToolsets(t *testing.T) {
	s := source("a", false, "submit", "status", "cancel", "other")
	s.Config.TaskToolsets = []config.TaskToolset{{Name: "job", SubmitTool: "submit", StatusTool: "status", CancelTool: "cancel"}}
	off := build([]srv{s}, catalog.Options{})
	if got := listed(t, off.ListJSON()); !slices.Equal(got, []string{"other"}) {
		t.Errorf("tasks off lists %q", got)
	}
	on := build([]srv{s}, catalog.Options{Tasks: true})
	r := on.Lookup("submit")
	if r == nil || r.Task == nil || r.Task.Name != "job" || r.Task.StatusTool != "status" {
		t.Fatalf("submit route %+v", r)
	}
	if !strings.Contains(string(r.JSON), "durable background task 'job'") {
		t.Errorf("submit tool without the contract: %s", r.JSON)
	}
	// It answers with the task's handle: its outputSchema says so, whatever
	// the server's own was (the TypeScript client checks results against it).
	var tool struct {
		OutputSchema json.RawMessage `json:"outputSchema"`
	}
	if json.Unmarshal(r.JSON, &tool) != nil || string(tool.OutputSchema) != string(taskpoll.SubmitOutputSchema) {
		t.Errorf("submit tool's outputSchema %s, want the task handle's", tool.OutputSchema)
	}
	if b := on.Lookup("get_background_task"); b == nil || !b.Builtin || b.Server != "" {
		t.Errorf("built-in route %+v", b)
	}
	if got := len(on.Templates()); got != 1 {
		t.Errorf("%d templates with tasks on", got)
	}
}

// TestSameTools: catalogs compare by what they list.
func TestSameTools(t *testing.T) {
	a := build([]srv{source("a", false, "x")}, catalog.Options{})
	if !catalog.SameTools(a, build([]srv{source("a", false, "x")}, catalog.Options{})) {
		t.Error("equal catalogs differ")
	}
	if catalog.SameTools(a, build([]srv{source("a", false, "y")}, catalog.Options{})) || catalog.SameTools(a, nil) {
		t.Error("different catalogs are the same")
	}
	if !catalog.SameTools[string](nil, nil) {
		t.Error("nil catalogs differ")
	}
}

// TestHotPathAllocations: a call's lookup and a tools/list from the caches
// allocate nothing.
func TestHotPathAllocations(t *testing.T) {
	c := build(searchSources(), catalog.Options{})
	s := build(searchSources(), catalog.Options{ToolSearch: config.ToolSearch{Enabled: true}})
	var p catalog.Promotions[string]
	p.Add(s, []string{"pg_query"})
	p.ToolsList(s)
	if n := testing.AllocsPerRun(100, func() {
		_ = c.Lookup("pg_query")
		_ = c.ListJSON()
		_ = p.ToolsList(c)
		_ = p.ToolsList(s)
		_ = s.Lookup("pg_query").ParamHeaders()
	}); n != 0 {
		t.Errorf("%v allocations per lookup and list", n)
	}
}

// TestConnectAccountBuiltin: with connected-account servers the built-in
// connect_account is listed after the servers' tools, its server argument
// one of them, and a server's own tool of that name loses to it; without,
// it is not there.
func TestConnectAccountBuiltin(t *testing.T) {
	own := source("gh", false, "connect_account", "search")
	own.Accounts = true
	jira := source("jira", false)
	jira.Accounts = true
	on := build([]srv{own, jira}, catalog.Options{})
	r := on.Lookup(catalog.ConnectAccountName)
	if r == nil || !r.Builtin || r.Server != "" {
		t.Fatalf("connect_account route %+v", r)
	}
	var tool struct {
		InputSchema struct {
			Properties struct {
				Server struct {
					Enum []string `json:"enum"`
				} `json:"server"`
			} `json:"properties"`
		} `json:"inputSchema"`
	}
	if err := json.Unmarshal(r.JSON, &tool); err != nil || strings.Join(tool.InputSchema.Properties.Server.Enum, ",") != "gh,jira" {
		t.Fatalf("connect_account tool %s: %v", r.JSON, err)
	}
	if got := listed(t, on.ListJSON()); got[len(got)-1] != catalog.ConnectAccountName || len(got) != 2 {
		t.Fatalf("listed %q: connect_account is not last", got)
	}
	off := build([]srv{source("gh", false, "search")}, catalog.Options{})
	if off.Lookup(catalog.ConnectAccountName) != nil {
		t.Fatal("connect_account without connected-account servers")
	}
}
