package catalog_test

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/mcp-mux/mcp-mux/internal/catalog"
	"github.com/mcp-mux/mcp-mux/internal/config"
	"github.com/mcp-mux/mcp-mux/internal/upstream"
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
		`{"q":"x","account":"evil"}`: `{"q":"x","account":"acme"}`,
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

// TestFixedArgumentsFolded: every member a lenient decoder would take for
// a fixed argument is dropped, however it is spelled; the others are kept
// as written, in order; a repeated name is refused, named and clipped; a
// property that folds to a fixed one is not listed.
func TestFixedArgumentsFolded(t *testing.T) {
	r := build([]srv{overrideSource()}, catalog.Options{}).Lookup("gh_find")
	for args, want := range map[string]string{
		`{"q":"x","ACCOUNT":2,"\u0061ccount":3}`:      `{"q":"x","account":"acme"}`,
		`{"acc_ount":1, "q" : [1, 2] ,"Acc-Ount":{}}`: `{"q" : [1, 2],"account":"acme"}`,
		`{}`:      `{"account":"acme"}`,
		` null `:  `{"account":"acme"}`,
		`{"a":1}`: `{"a":1,"account":"acme"}`,
	} {
		got, err := r.Arguments(json.RawMessage(args))
		if err != nil || string(got) != want {
			t.Errorf("Arguments(%s) = %s, %v; want %s", args, got, err, want)
		}
	}
	long := strings.Repeat("é", 4096)
	for args, want := range map[string]string{
		`{"q":1,"q":2}`:                         `arguments repeat the member name "q"`,
		`{"q":{"a":1,"\u0061":2}}`:              `arguments repeat the member name "a"`,
		`{"` + long + `":1,"` + long + `":2}`:   `arguments repeat the member name "` + strings.Repeat("é", 64) + `…(8192 bytes)"`,
		`{"q":1,`:                               `arguments must be valid JSON`,
		`"text"`:                                `tool arguments must be a JSON object`,
		`[{"x":[{"y":0,"y":0}]}]`:               `arguments repeat the member name "y"`,
		"{\"a\xff\":1,\"a\xfe\":2}":             "arguments repeat the member name \"a\ufffd\"",
		`{"account":1,"account":2,"ACCOUNT":3}`: `arguments repeat the member name "account"`,
	} {
		if _, err := r.Arguments(json.RawMessage(args)); err == nil || err.Error() != want {
			t.Errorf("Arguments(%.60s) = %v; want %s", args, err, want)
		}
	}
	// A tool without fixed arguments keeps its arguments but not a repeated name.
	other := build([]srv{overrideSource()}, catalog.Options{}).Lookup("gh_other")
	if _, err := other.Arguments(json.RawMessage(`{"a":{"b":1,"b":2}}`)); err == nil || !strings.Contains(err.Error(), `"b"`) {
		t.Errorf("a repeated name in a tool without fixed arguments: %v", err)
	}
	if got, err := other.Arguments(json.RawMessage(`{"Q":1, "q":2}`)); err != nil || string(got) != `{"Q":1, "q":2}` {
		t.Errorf("arguments that only fold alike: %s, %v", got, err)
	}

	// The listed schema hides what folds to a fixed argument.
	s := overrideSource()
	raw, _ := json.Marshal(map[string]any{"name": "search", "inputSchema": map[string]any{"type": "object",
		"required":   []string{"q", "Account"},
		"properties": map[string]any{"q": map[string]any{}, "Account": map[string]any{}, "acc_ount": map[string]any{}}}})
	s.Lists.Tools[0].Raw = raw
	var tl listedTool
	if err := json.Unmarshal(build([]srv{s}, catalog.Options{}).Lookup("gh_find").JSON, &tl); err != nil {
		t.Fatal(err)
	}
	if len(tl.InputSchema.Properties) != 1 || tl.InputSchema.Properties["q"] == nil || !slices.Equal(tl.InputSchema.Required, []string{"q"}) {
		t.Errorf("listed schema %+v", tl.InputSchema)
	}
}

// FuzzArguments: whatever the caller sends, arguments that pass hold the
// fixed value for every name Go's encoding/json would match (to a struct
// field or as the last of repeated members), repeat no name, and keep
// every other member of the caller's.
func FuzzArguments(f *testing.F) {
	r := build([]srv{overrideSource()}, catalog.Options{}).Lookup("gh_find")
	for _, seed := range []string{`{"q":"x","ſccount":"evil"}`, `{"account":1,"account":2}`, `{"\u212a":{"k":[1,{"K":2}]}}`,
		`null`, `[]`, `{"a_c-c":1,"Q":2,"q":3}`, `{"x":"\ud800"}`} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, args []byte) {
		out, err := r.Arguments(args)
		if err != nil {
			if len(err.Error()) > 1024 {
				t.Fatalf("error of %d bytes", len(err.Error()))
			}
			return
		}
		var fixed struct {
			Account string `json:"account"`
		}
		if err := json.Unmarshal(out, &fixed); err != nil || fixed.Account != "acme" {
			t.Fatalf("Arguments(%q) = %s: encoding/json reads account %q (%v)", args, out, fixed.Account, err)
		}
		var in, got map[string]json.RawMessage
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("Arguments(%q) = %s: %v", args, out, err)
		}
		_ = json.Unmarshal(args, &in)
		kept := 0
		for k, v := range in {
			if foldsToAccount(k) != strings.EqualFold(k, "account") {
				t.Fatalf("encoding/json and strings.EqualFold disagree on %q", k)
			}
			if strings.EqualFold(strings.NewReplacer("_", "", "-", "").Replace(k), "account") {
				continue // a fixed argument's, to a lenient decoder
			}
			if kept++; !sameJSON(got[k], v) {
				t.Fatalf("Arguments(%q) = %s lost %q", args, out, k)
			}
		}
		if names := topNames(t, out); len(names) != kept+1 || names[len(names)-1] != "account" {
			t.Fatalf("Arguments(%q) = %s: members %q, want the %d kept and account last", args, out, names, kept)
		}
	})
}

// topNames are the member names of the object out, in order, repeats
// included.
func topNames(t *testing.T, out []byte) []string {
	dec := json.NewDecoder(bytes.NewReader(out))
	var names []string
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("%s is not an object", out)
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			t.Fatalf("%s: %v", out, err)
		}
		names = append(names, tok.(string))
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			t.Fatalf("%s: %v", out, err)
		}
	}
	return names
}

// foldsToAccount reports whether encoding/json takes the member name k
// for a field named account.
func foldsToAccount(k string) bool {
	var v struct {
		Account *json.RawMessage `json:"account"`
	}
	b, _ := json.Marshal(map[string]int{k: 1})
	return json.Unmarshal(b, &v) == nil && v.Account != nil
}

// sameJSON reports whether two JSON texts encode the same value.
func sameJSON(a, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	ja, _ := json.Marshal(x)
	jb, _ := json.Marshal(y)
	return string(ja) == string(jb)
}
