package callpath

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestCallStreamPrime: a streamed tools/call starts with a priming event
// whose id names the call, and that id reads back as the call's id.
func TestCallStreamPrime(t *testing.T) {
	w := httptest.NewRecorder()
	f := NewFastSink(&Session{}, w)
	f.Resumable(json.RawMessage(`"call-7"`))
	f.Notify("notifications/progress", json.RawMessage(`{"progressToken":"p","progress":1}`))
	body := w.Body.String()
	first, _, _ := strings.Cut(body, "\n\n")
	id, ok := strings.CutPrefix(first, "id: ")
	id, _, _ = strings.Cut(id, "\n")
	if !ok || !strings.HasPrefix(id, CallStreamPrefix) || !strings.Contains(first, "data: ") {
		t.Fatalf("the stream starts %q, want a priming event", first)
	}
	if got, ok := CallStreamID(id); !ok || string(got) != `"call-7"` {
		t.Fatalf("CallStreamID(%q) = %s, %v", id, got, ok)
	}
}

// FuzzCallStreamID: a Last-Event-ID naming a call is client input: it
// yields a JSON string or number (a JSON-RPC id), or nothing.
func FuzzCallStreamID(f *testing.F) {
	for _, s := range []string{"call.ImEi", "call.MQ", "call.", "call.e30", "call.bnVsbA", "1-2", "call.!!!"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, h string) {
		id, ok := CallStreamID(h)
		if !ok {
			return
		}
		var v any
		if json.Unmarshal(id, &v) != nil {
			t.Fatalf("CallStreamID(%q) = %q, not JSON", h, id)
		}
		switch v.(type) {
		case string, float64:
		default:
			t.Fatalf("CallStreamID(%q) = %s, not a JSON-RPC id", h, id)
		}
	})
}
