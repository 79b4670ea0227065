package accounts

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/mcp-mux/mcp-mux/internal/seal"
)

// The callback's query is untrusted: any query parses within its bounds
// or is refused, and the handler answers 400 without panicking.
func FuzzCallbackQuery(f *testing.F) {
	for _, s := range []string{"", "state=x&code=y", "state=x&error=access_denied", "state=%zz", "code=1&code=2&state=s",
		"state=mo1." + strings.Repeat("A", 100) + "&code=c&iss=https://x", "state=x&code=y&iss=" + strings.Repeat("i", 5000)} {
		f.Add(s)
	}
	s, err := OpenBoltStore(BoltOptions{Dir: f.TempDir()})
	if err != nil {
		f.Fatal(err)
	}
	defer s.Close()
	m, err := New(Options{PublicURL: "https://mux.example.com", Sealer: seal.New(sealKey), Store: s, Logger: hclog.NewNullLogger()})
	if err != nil {
		f.Fatal(err)
	}
	defer m.Close()
	h := m.Handler()
	f.Fuzz(func(t *testing.T, raw string) {
		q, err := parseCallback(raw)
		if err == nil && (q.state == "" || len(q.state) > maxStateLen || len(q.code) > maxCodeLen || len(q.iss) > maxStateLen || (q.code == "" && q.errCode == "")) {
			t.Fatalf("parseCallback(%q) accepted %+v", raw, q)
		}
		req := httptest.NewRequest(http.MethodGet, "/oauth/callback", nil)
		req.URL.RawQuery = raw
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusBadRequest || rec.Header().Get("Cache-Control") != "no-store" {
			t.Fatalf("%q: %d", raw, rec.Code)
		}
	})
}

// An upstream's 403 challenge is untrusted: Rejected's step-up never
// panics and asks only for scopes Start accepts.
func FuzzForbidden(f *testing.F) {
	for _, s := range []string{`Bearer error="insufficient_scope", scope="a b"`, `Bearer error="insufficient_scope"`,
		`Bearer error="insufficient_scope", scope="` + strings.Repeat("x ", 100) + `"`, `Basic realm="x", Bearer error=insufficient_scope, scope=c`, `"`} {
		f.Add(s)
	}
	m := &Manager{}
	e := &entry{Scopes: []string{"a"}, Asked: []string{"a"}}
	f.Fuzz(func(t *testing.T, h string) {
		r, err := m.forbidden("srv", e, []string{h})
		if err == nil && checkStart(StartRequest{User: "u", StepUp: r.StepUp}) != nil {
			t.Fatalf("%q: a step-up Start refuses: %q", h, r.StepUp)
		}
		if err == nil && len(r.StepUp) == 0 {
			t.Fatalf("%q: no error and no step-up", h)
		}
	})
}
