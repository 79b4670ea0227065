package config

import (
	"encoding/json"
	"reflect"
	"slices"
	"testing"
)

// TestToolOverridePresentation: name, title, description, annotations and
// fixed_arguments (strings $VAR-expanded) are read; other keys stay in
// Extra; ExposedName falls back to the raw name.
func TestToolOverridePresentation(t *testing.T) {
	s, problems, _ := problemsOf(t, `{"command": "x", "tools": {"search": {
	    "name": "find", "title": "Find", "description": "Finds", "note": 1,
	    "annotations": {"readOnlyHint": true, "openWorldHint": false, "title": "T", "destructiveHint": null},
	    "fixed_arguments": {"account": "$ACCT", "limit": 5, "opts": {"deep": [true, null, "$ACCT"]}}}}}`,
		map[string]string{"ACCT": "acme"})
	if s == nil {
		t.Fatalf("problems: %q", problems)
	}
	p := s.Tools["search"].Presentation
	if p.Name != "find" || *p.Title != "Find" || *p.Description != "Finds" {
		t.Errorf("presentation %+v", p)
	}
	a := p.Annotations
	if a == nil || !*a.ReadOnlyHint || *a.OpenWorldHint || *a.Title != "T" || a.DestructiveHint != nil || a.IdempotentHint != nil {
		t.Errorf("annotations %+v", a)
	}
	want := map[string]json.RawMessage{"account": json.RawMessage(`"acme"`), "limit": json.RawMessage(`5`),
		"opts": json.RawMessage(`{"deep":[true,null,"acme"]}`)}
	if !reflect.DeepEqual(p.FixedArguments, want) {
		t.Errorf("fixed arguments %s", p.FixedArguments)
	}
	if string(s.Tools["search"].Extra["note"]) != `1` {
		t.Errorf("extra %s", s.Tools["search"].Extra)
	}
	if s.ExposedName("search") != "find" || s.ExposedName("other") != "other" {
		t.Error("ExposedName")
	}
}

// TestToolOverrideProblems: every bad override key is a problem naming its
// field, and the server is not started.
func TestToolOverrideProblems(t *testing.T) {
	for entry, want := range map[string][]string{
		`{"name": "has space"}`:                  {"tools.t.name: MCP tool name must match ^[A-Za-z0-9_-]{1,128}$"},
		`{"name": ""}`:                           {"tools.t.name: MCP tool name must match ^[A-Za-z0-9_-]{1,128}$"},
		`{"name": 7}`:                            {"tools.t.name: must be a string, not a number"},
		`{"title": false}`:                       {"tools.t.title: must be a string, not a boolean"},
		`{"description": ["d"]}`:                 {"tools.t.description: must be a string, not a list"},
		`{"annotations": "readOnly"}`:            {"tools.t.annotations: must be an object"},
		`{"annotations": {"readOnlyHint": "y"}}`: {"tools.t.annotations.readOnlyHint: must be a boolean, not a string"},
		`{"annotations": {"openWorldHint": 1, "title": 2}}`: {"tools.t.annotations.title: must be a string, not a number",
			"tools.t.annotations.openWorldHint: must be a boolean, not a number"},
		`{"annotations": {"readonlyhint": true}}`:       {`tools.t.annotations.readonlyhint: unknown key; did you mean "readOnlyHint"?`},
		`{"fixed_arguments": ["a"]}`:                    {"tools.t.fixed_arguments: must be an object of argument name to value, not a list"},
		`{"fixed_arguments": "a=1"}`:                    {"tools.t.fixed_arguments: must be an object of argument name to value, not a string"},
		`{"fixed_arguments": {" ": 1}}`:                 {"tools.t.fixed_arguments: must not contain a blank argument name"},
		`{"fixed_arguments": {"scope": 1, "ſcope": 2}}`: {"tools.t.fixed_arguments.ſcope: names the same argument as 'scope' to an upstream that matches names case-insensitively"},
	} {
		s, got, _ := problemsOf(t, `{"command": "x", "tools": {"t": `+entry+`}}`, nil)
		slices.Sort(got)
		slices.Sort(want)
		if s != nil || !slices.Equal(got, want) {
			t.Errorf("%s: problems %q, want %q", entry, got, want)
		}
	}
	// Two entries exposed under one name: the renamed one is named.
	for tools, want := range map[string]string{
		`{"a": {"name": "c"}, "b": {"name": "c"}}`: `tools.b.name: MCP tool name 'c' is also the exposed name of tools.'a'`,
		`{"a": {"name": "b"}, "b": {}}`:            `tools.a.name: MCP tool name 'b' is also the exposed name of tools.'b'`,
		`{"b": {}, "a": {"name": "b"}}`:            `tools.a.name: MCP tool name 'b' is also the exposed name of tools.'b'`,
	} {
		_, got, _ := problemsOf(t, `{"command": "x", "tools": `+tools+`}`, nil)
		if len(got) != 1 || got[0] != want {
			t.Errorf("%s: problems %q, want %q", tools, got, want)
		}
	}
}

// FuzzToolOverride: whatever a tools entry holds, loading never panics,
// and a server that loads has only exposed names of the catalog's charset
// and fixed arguments that are valid JSON.
func FuzzToolOverride(f *testing.F) {
	for _, s := range []string{
		`{"name": "find", "title": "T", "description": "D", "annotations": {"readOnlyHint": true}, "fixed_arguments": {"a": [1, {"b": "$V"}]}}`,
		`{"name": "a b"}`, `{"annotations": {"title": 1}}`, `{"fixed_arguments": 3}`, `{"fixed_arguments": {"": null}}`,
		`{"routing": {"mode": "prefer"}, "name": "` + "\u00e9" + `"}`, `[]`, `null`,
	} {
		f.Add(s)
	}
	env := envOf(map[string]string{"V": "v\n\"x"})
	f.Fuzz(func(t *testing.T, entry string) {
		cfg, err := Parse([]byte(servers(`"s": {"command": "x", "tools": {"t": `+entry+`}}`)), LoadOptions{Filename: "c.json", LookupEnv: env})
		if err != nil || cfg == nil {
			return
		}
		s := cfg.Server("s")
		if s == nil {
			return
		}
		for raw, ov := range s.Tools {
			if ov.Name != "" && !exposedNameRE.MatchString(ov.Name) {
				t.Fatalf("tools.%s exposed as %q", raw, ov.Name)
			}
			for k, v := range ov.FixedArguments {
				if !json.Valid(v) {
					t.Fatalf("fixed argument %q is not JSON: %s", k, v)
				}
			}
		}
	})
}
