package retryfwd

import (
	"net/http"
	"strings"
	"testing"

	"github.com/mcp-mux/mcp-mux/internal/proxy/callpath"
)

// TestHeaders: a forwarded retry carries MCP's headers, never credentials
// or mcp-mux's internal ones (the serving replica sets the caller itself).
func TestHeaders(t *testing.T) {
	for name, want := range map[string]bool{"Content-Type": true, "Accept": true, "Mcp-Session-Id": true, "Mcp-Method": true,
		"Authorization": false, "Cookie": false, "X-Mux-User": false, "Mcp-Mux-Internal-User": false, "Mcp-Mux-Internal-Profile": false} {
		if got := header(http.CanonicalHeaderKey(name)); got != want {
			t.Errorf("header(%s) = %v, want %v", name, got, want)
		}
	}
}

// TestServeAsCaller: a forwarded retry is served as its caller, under its
// profile, and an answer past the bound is refused, not kept.
func TestServeAsCaller(t *testing.T) {
	var seen http.Header
	var caller callpath.Caller
	f := &Forwarder{Serve: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen, caller = r.Header.Clone(), callpath.CallerFrom(r.Context())
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(strings.Repeat("x", int(r.ContentLength))))
	})}
	a := f.serve(t.Context(), &request{User: "alice", Profile: "ops", Header: http.Header{"Authorization": {"Bearer x"}, "Mcp-Method": {"tools/call"}}, Body: []byte("abc")})
	if a.Status != http.StatusOK || string(a.Body) != "xxx" || a.ContentType != "application/json" {
		t.Fatalf("answer %+v", a)
	}
	if caller.User != "alice" || caller.Profile != "ops" || seen.Get("Authorization") != "" || seen.Get("Mcp-Method") != "tools/call" {
		t.Fatalf("served as %+v with headers %v", caller, seen)
	}
	big := make([]byte, 2*callpath.MaxBody+1)
	if a := f.serve(t.Context(), &request{User: "alice", Body: big}); a.Status != http.StatusBadGateway {
		t.Fatalf("an answer past the bound: %+v", a)
	}
}
