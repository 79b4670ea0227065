package via

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/hashicorp/go-hclog"
)

// Guard refuses a looping request with 508 and a JSON-RPC error carrying
// its id, a malformed header with 400, and hands the rest on with their
// chain in the context.
func TestGuard(t *testing.T) {
	m := New()
	var chain []string
	next := http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { chain = From(r.Context()) })
	h := m.Guard(next, GuardOptions{Log: hclog.NewNullLogger(),
		RequestID: func(*http.Request) json.RawMessage { return json.RawMessage(`7`) }})
	tests := []struct {
		name, header string
		status       int
		body         string
	}{
		{"loop", "a," + m.ID(), http.StatusLoopDetected,
			`{"jsonrpc":"2.0","id":7,"error":{"code":-32600,"message":"request loop: this request already passed through this mcp-mux (Mcp-Mux-Via names it); an upstream url points back at it"}}`},
		{"malformed", "a,,b", http.StatusBadRequest,
			`{"jsonrpc":"2.0","id":7,"error":{"code":-32600,"message":"malformed Mcp-Mux-Via header: a comma-separated list of at most 8 mcp-mux ids"}}`},
		{"other muxes", "a,b", http.StatusOK, ""},
	}
	for _, tt := range tests {
		chain = nil
		r := httptest.NewRequest(http.MethodPost, "/mcp", nil)
		r.Header.Set(Header, tt.header)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		if rec.Code != tt.status || rec.Body.String() != tt.body {
			t.Errorf("%s: HTTP %d %s, want %d %s", tt.name, rec.Code, rec.Body, tt.status, tt.body)
		}
		if tt.status == http.StatusOK && len(chain) != 2 {
			t.Errorf("%s: chain in the context %v, want [a b]", tt.name, chain)
		}
	}
}

// WithHeader carries a well-formed chain and ignores anything else.
func TestWithHeader(t *testing.T) {
	m := New()
	h := http.Header{}
	h.Set(Header, "a")
	if c := From(m.WithHeader(context.Background(), h)); len(c) != 1 || c[0] != "a" {
		t.Errorf("chain %v, want [a]", c)
	}
	h.Set(Header, m.ID())
	if c := From(m.WithHeader(context.Background(), h)); c != nil {
		t.Errorf("looping chain carried: %v", c)
	}
}
