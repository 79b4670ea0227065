package catalog_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/mcp-mux/mcp-mux/internal/catalog"
	"github.com/mcp-mux/mcp-mux/internal/config"
	"github.com/mcp-mux/mcp-mux/internal/upstream"
)

// annotated is a backend "fs" whose one tool "write" has the server's
// annotations own and the override annotations ov (nil: no override).
func annotated(own map[string]any, ov *config.ToolAnnotations) srv {
	s := source("fs", true)
	raw, _ := json.Marshal(map[string]any{"name": "write", "description": "upstream secret-ish words", "annotations": own,
		"inputSchema": map[string]any{"type": "object"}})
	s.Lists.Tools = []upstream.Tool{{Name: "write", Raw: raw}}
	if ov != nil {
		title := "Overridden title words"
		s.Config.Tools = map[string]config.ToolOverride{"write": {Presentation: config.Presentation{Annotations: ov, Description: &title}}}
	}
	return s
}

// TestAnnotationConflicts: a tool whose override makes readOnlyHint and
// destructiveHint both true is noted, naming server, tool and who set each
// hint, never a title or description; an override that sets neither hint,
// or leaves them consistent, is not.
func TestAnnotationConflicts(t *testing.T) {
	yes, no := true, false
	for _, tc := range []struct {
		name string
		own  map[string]any
		ov   *config.ToolAnnotations
		want string // "" for no warning
	}{
		{"override read-only beside server destructive", map[string]any{"destructiveHint": true}, &config.ToolAnnotations{ReadOnlyHint: &yes},
			`server "fs", tool "write": annotations contradict each other: readOnlyHint (override) and destructiveHint (server) are both true`},
		{"override destructive beside server read-only", map[string]any{"readOnlyHint": true}, &config.ToolAnnotations{DestructiveHint: &yes},
			`readOnlyHint (server) and destructiveHint (override) are both true`},
		{"override sets both", nil, &config.ToolAnnotations{ReadOnlyHint: &yes, DestructiveHint: &yes},
			`readOnlyHint (override) and destructiveHint (override) are both true`},
		{"override resolves the server's", map[string]any{"readOnlyHint": true, "destructiveHint": true}, &config.ToolAnnotations{DestructiveHint: &no}, ""},
		{"server says nothing destructive", nil, &config.ToolAnnotations{ReadOnlyHint: &yes}, ""},
		{"server says not destructive", map[string]any{"destructiveHint": false}, &config.ToolAnnotations{ReadOnlyHint: &yes}, ""},
		{"override sets no hint", map[string]any{"readOnlyHint": true, "destructiveHint": true}, &config.ToolAnnotations{}, ""},
		{"no override", map[string]any{"readOnlyHint": true, "destructiveHint": true}, nil, ""},
		{"server hint not a boolean", map[string]any{"destructiveHint": "yes"}, &config.ToolAnnotations{ReadOnlyHint: &yes}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			profiles := map[string]*config.Profile{"p": {Servers: []string{"fs"}}}
			c := build([]srv{annotated(tc.own, tc.ov)}, catalog.Options{Profiles: profiles})
			got := c.Warnings()
			if tc.want == "" {
				if len(got) != 0 {
					t.Fatalf("warnings %q, want none", got)
				}
				return
			}
			if len(got) != 1 || !strings.Contains(got[0], tc.want) {
				t.Fatalf("warnings %q, want one with %q", got, tc.want)
			}
			if strings.Contains(got[0], "words") {
				t.Errorf("the warning shows a title or description: %s", got[0])
			}
			if v := c.For("p"); v == nil || len(v.Warnings()) != 0 {
				t.Errorf("a profile's view repeats the warning")
			}
		})
	}
}

// TestLogWarningsOnce: a catalog rebuilt with the same conflict does not
// log it again; a new one is logged once.
func TestLogWarningsOnce(t *testing.T) {
	yes := true
	var buf bytes.Buffer
	log := hclog.New(&hclog.LoggerOptions{Output: &buf, JSONFormat: true})
	s := annotated(map[string]any{"destructiveHint": true}, &config.ToolAnnotations{ReadOnlyHint: &yes})
	first := build([]srv{s}, catalog.Options{})
	catalog.LogWarnings(nil, first, log)
	catalog.LogWarnings(first, build([]srv{s}, catalog.Options{}), log)
	if n := strings.Count(buf.String(), "annotations contradict"); n != 1 {
		t.Fatalf("logged %d times, want once:\n%s", n, buf.String())
	}
	for _, want := range []string{`"server":"fs"`, `"tool":"write"`, `"readOnlyHint_from":"override"`, `"destructiveHint_from":"server"`} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("log lacks %s:\n%s", want, buf.String())
		}
	}
}
