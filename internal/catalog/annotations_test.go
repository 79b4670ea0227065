package catalog

import (
	"encoding/json"
	"testing"

	"github.com/mcp-mux/mcp-mux/internal/config"
)

// TestAnnotations: a route's effective annotations are its listed tool's,
// after the override, with MCP's defaults for what it leaves out.
func TestAnnotations(t *testing.T) {
	tests := map[string]Annotations{
		`{"name":"t"}`: {DestructiveHint: true, OpenWorldHint: true},
		`{"name":"t","annotations":{"title":"T","readOnlyHint":true,"destructiveHint":false,"idempotentHint":true,"openWorldHint":false}}`: {
			Title: "T", ReadOnlyHint: true, IdempotentHint: true},
		`{"name":"t","annotations":{"readOnlyHint":"yes","destructiveHint":null,"idempotentHint":true,"title":7}}`: {
			DestructiveHint: true, IdempotentHint: true, OpenWorldHint: true},
		`not json`: {DestructiveHint: true, OpenWorldHint: true},
	}
	for tool, want := range tests {
		r := &Route[int]{JSON: json.RawMessage(tool)}
		if got := r.Annotations(); got != want {
			t.Errorf("%s: %+v, want %+v", tool, got, want)
		}
	}
	// An override's annotations are what the route lists.
	f := false
	r := &Route[int]{JSON: overridden(json.RawMessage(`{"name":"t","annotations":{"destructiveHint":true}}`),
		config.Presentation{Annotations: &config.ToolAnnotations{DestructiveHint: &f}})}
	if r.Annotations().DestructiveHint {
		t.Fatal("the override's destructiveHint: false is not in effect")
	}
}
