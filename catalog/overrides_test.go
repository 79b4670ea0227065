package catalog_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/mcp-mux/mcp-mux/catalog"
	"github.com/mcp-mux/mcp-mux/config"
	"github.com/mcp-mux/mcp-mux/upstream"
)

// overrideSource is a prefixed backend "gh" whose "search" tool (inputs q
// and account, both required) is renamed "find", re-titled, re-described,
// annotated, routed and has account fixed; "other" has no override.
func overrideSource() srv {
	str := func(s string) *string { return &s }
	yes, mode, prio := true, config.RoutingPrefer, 60
	s := source("gh", true, "other")
	raw, _ := json.Marshal(map[string]any{"name": "search", "description": "upstream words",
		"annotations": map[string]any{"destructiveHint": true, "openWorldHint": false},
		"inputSchema": map[string]any{"type": "object", "required": []string{"q", "account"},
			"properties": map[string]any{"q": map[string]any{"type": "string"}, "account": map[string]any{"type": "string"}}}})
	s.Lists.Tools = append([]upstream.Tool{{Name: "search", Raw: raw}}, s.Lists.Tools...)
	s.Config.Tools = map[string]config.ToolOverride{"search": {
		Routing: &config.RoutingOverride{Mode: &mode, Priority: &prio, Keywords: []string{"orders"}, KeywordsSet: true},
		Presentation: config.Presentation{Name: "find", Title: str("Find"), Description: str("Finds tickets by text"),
			Annotations:    &config.ToolAnnotations{ReadOnlyHint: &yes, Title: str("Ticket finder")},
			FixedArguments: map[string]json.RawMessage{"account": json.RawMessage(`"acme"`)}},
	}}
	return s
}

// listedTool is one tool object of a tools/list, decoded.
type listedTool struct {
	Name        string         `json:"name"`
	Title       string         `json:"title"`
	Description string         `json:"description"`
	Annotations map[string]any `json:"annotations"`
	InputSchema struct {
		Properties map[string]any `json:"properties"`
		Required   []string       `json:"required"`
	} `json:"inputSchema"`
}

// TestToolOverrides: an override renames, re-titles, re-describes and
// annotates a tool and hides its fixed arguments in tools/list; the old
// name is unknown; the route still leads to the raw name and sets the
// fixed arguments over the caller's.
func TestToolOverrides(t *testing.T) {
	c := build([]srv{overrideSource()}, catalog.Options{})
	if got := listed(t, c.ListJSON()); !slices.Equal(got, []string{"gh_find", "gh_other"}) {
		t.Fatalf("listed %q", got)
	}
	if c.Lookup("gh_search") != nil {
		t.Error("the raw visible name gh_search is still routed")
	}
	r := c.Lookup("gh_find")
	if r == nil || r.Raw != "search" || r.Server != "gh" {
		t.Fatalf("route %+v", r)
	}
	var tl listedTool
	if err := json.Unmarshal(r.JSON, &tl); err != nil {
		t.Fatal(err)
	}
	if tl.Name != "gh_find" || tl.Title != "Find" || tl.Description != "Finds tickets by text" {
		t.Errorf("tool %s", r.JSON)
	}
	wantAnn := map[string]any{"readOnlyHint": true, "title": "Ticket finder", "destructiveHint": true, "openWorldHint": false}
	if len(tl.Annotations) != len(wantAnn) {
		t.Errorf("annotations %v, want %v", tl.Annotations, wantAnn)
	}
	for k, v := range wantAnn {
		if tl.Annotations[k] != v {
			t.Errorf("annotations[%s] = %v, want %v", k, tl.Annotations[k], v)
		}
	}
	if _, shown := tl.InputSchema.Properties["account"]; shown || tl.InputSchema.Properties["q"] == nil || !slices.Equal(tl.InputSchema.Required, []string{"q"}) {
		t.Errorf("inputSchema still shows the fixed argument: %s", r.JSON)
	}
	for args, want := range map[string]string{
		`{"q":"x","account":"evil"}`: `{"account":"acme","q":"x"}`,
		``:                           `{"account":"acme"}`,
		`null`:                       `{"account":"acme"}`,
	} {
		got, err := r.Arguments(json.RawMessage(args))
		if err != nil || string(got) != want {
			t.Errorf("Arguments(%s) = %s, %v; want %s", args, got, err, want)
		}
	}
	if _, err := r.Arguments(json.RawMessage(`["q"]`)); err == nil {
		t.Error("Arguments of a list: no error")
	}
	if got, err := c.Lookup("gh_other").Arguments(json.RawMessage(`[1]`)); err != nil || string(got) != `[1]` {
		t.Errorf("a tool without fixed arguments changed its arguments: %s, %v", got, err)
	}
	// The routing hint names the exposed tool.
	if in := c.Instructions(); !strings.Contains(in, "`gh_find`") || strings.Contains(in, "gh_search") {
		t.Errorf("instructions %q", in)
	}
}

// TestToolOverridesSearch: tool_search indexes and returns the exposed
// name, description and schema; the deferred list names it.
func TestToolOverridesSearch(t *testing.T) {
	c := build([]srv{overrideSource()}, catalog.Options{ToolSearch: config.ToolSearch{Enabled: true}})
	for _, q := range []string{"tickets", "select:gh_find", "+find"} {
		args, _ := json.Marshal(map[string]string{"query": q})
		res, names := c.ToolSearch(args)
		if !slices.Equal(names, []string{"gh_find"}) {
			t.Errorf("%q promotes %q (%s)", q, names, res)
		}
		if strings.Contains(string(res), "account") || !strings.Contains(string(res), "Finds tickets by text") {
			t.Errorf("%q result %s", q, res)
		}
	}
	if _, names := c.ToolSearch(json.RawMessage(`{"query":"upstream words"}`)); len(names) != 0 {
		t.Errorf("the upstream's description still matches: %q", names)
	}
	if in := c.Instructions(); !strings.Contains(in, "gh_find\n") || strings.Contains(in, "gh_search") {
		t.Errorf("instructions %q", in)
	}
}

// TestToolOverridesTaskSubmit: a renamed submit tool keeps its toolset
// (task_toolsets name raw tools) and gets the contract after its new
// description.
func TestToolOverridesTaskSubmit(t *testing.T) {
	s := overrideSource()
	s.Config.TaskToolsets = []config.TaskToolset{{Name: "job", SubmitTool: "search", StatusTool: "status", CancelTool: "cancel"}}
	r := build([]srv{s}, catalog.Options{Tasks: true}).Lookup("gh_find")
	if r == nil || r.Task == nil || r.Task.SubmitTool != "search" || r.Raw != "search" {
		t.Fatalf("submit route %+v", r)
	}
	var tl listedTool
	_ = json.Unmarshal(r.JSON, &tl)
	if !strings.HasPrefix(tl.Description, "Finds tickets by text") || !strings.Contains(tl.Description, "durable background task 'job'") {
		t.Errorf("submit description %q", tl.Description)
	}
}

// TestToolOverrideCollision: an exposed name another tool already has is
// the existing first-wins collision.
func TestToolOverrideCollision(t *testing.T) {
	s := source("a", false, "x", "y")
	s.Config.Tools = map[string]config.ToolOverride{"y": {Presentation: config.Presentation{Name: "x"}}}
	c := build([]srv{s}, catalog.Options{})
	if got := listed(t, c.ListJSON()); !slices.Equal(got, []string{"x"}) || c.Lookup("x").Raw != "x" {
		t.Errorf("listed %q", got)
	}
}
