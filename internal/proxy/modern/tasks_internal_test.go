package modern

import (
	"encoding/json"
	"strings"
	"testing"
)

// A passed-through task's nested task ids (related-task _meta in its result
// or its input requests) are replaced; other ids and other members are not.
func TestWithTaskIDNested(t *testing.T) {
	raw := `{"taskId":"r1","status":"input_required","inputRequests":{"q":{"method":"elicitation/create","params":{"_meta":{"io.modelcontextprotocol/related-task":{"taskId":"r1"}}}}},` +
		`"result":{"content":[{"type":"text","text":"r1"}],"_meta":{"x":[{"taskId":"r1"},{"taskId":"other"}]}}}`
	got := string(withTaskID([]byte(raw), "r1", "mux-task-X"))
	if strings.Contains(got, `"taskId":"r1"`) || strings.Count(got, `"taskId":"mux-task-X"`) != 3 ||
		!strings.Contains(got, `"taskId":"other"`) || !strings.Contains(got, `"text":"r1"`) {
		t.Fatalf("rewritten: %s", got)
	}
	deep := `{"taskId":"r1","a":` + strings.Repeat(`{"a":`, maxTaskIDRewriteDepth) + `{"taskId":"r1"}` + strings.Repeat("}", maxTaskIDRewriteDepth) + `}`
	if got := string(withTaskID([]byte(deep), "r1", "mux-task-X")); strings.Count(got, `"taskId":"r1"`) != 1 {
		t.Fatalf("past the depth bound: %s", got)
	}
}

// FuzzWithTaskID: an upstream's task reply never crashes the rewrite, and
// a rewritten object carries the caller's id.
func FuzzWithTaskID(f *testing.F) {
	f.Add([]byte(`{"taskId":"r1","result":{"_meta":{"io.modelcontextprotocol/related-task":{"taskId":"r1"}}}}`))
	f.Add([]byte(`{"taskId":"r1","a":[[[{"taskId":"r1"}]]]}`))
	f.Add([]byte(`[{"taskId":"r1"}]`))
	f.Add([]byte(`{"taskId":1}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		out := withTaskID(raw, "r1", "mux-task-X")
		var m map[string]json.RawMessage
		if json.Unmarshal(raw, &m) == nil && m != nil {
			if json.Unmarshal(out, &m) != nil || string(m["taskId"]) != `"mux-task-X"` {
				t.Fatalf("%s rewritten to %s", raw, out)
			}
		}
	})
}
