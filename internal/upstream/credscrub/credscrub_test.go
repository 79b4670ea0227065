package credscrub

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/mcp-mux/mcp-mux/internal/wire"
)

func TestScrubber(t *testing.T) {
	s := New("http://user:url-secret@h/mcp?api_key=query-secret", http.Header{"X-Static": {"static-secret"}}, map[string]string{"TOKEN": "env-secret"})
	call := http.Header{"Authorization": {"Bearer call-secret"}}
	secrets := []string{"url-secret", "query-secret", "static-secret", "env-secret", "call-secret"}
	err := s.Error(errors.New("failed: "+strings.Join(secrets, " ")), call)
	var we *wire.Error
	rpc := s.Error(&wire.Error{Code: -32000, Message: "bad call-secret", Data: json.RawMessage(`{"echo":"static-secret"}`)}, call)
	if !errors.As(rpc, &we) || we.Code != -32000 {
		t.Fatalf("a JSON-RPC error lost its type: %#v", rpc)
	}
	tool := s.ToolError(json.RawMessage(`{"content":[{"type":"text","text":"env-secret call-secret"}],"isError":true}`), call)
	ok := s.ToolError(json.RawMessage(`{"content":[{"type":"text","text":"env-secret"}]}`), call)
	for _, text := range []string{err.Error(), we.Message, string(we.Data), string(tool)} {
		for _, sec := range secrets {
			if strings.Contains(text, sec) {
				t.Errorf("%q kept %q", text, sec)
			}
		}
	}
	if !json.Valid(we.Data) || !json.Valid(tool) {
		t.Errorf("scrubbing broke JSON: %s %s", we.Data, tool)
	}
	if !strings.Contains(string(ok), "env-secret") {
		t.Errorf("a result that is not a tool error was changed: %s", ok)
	}
	if s.Error(nil, call) != nil {
		t.Error("nil error is not nil")
	}
}
