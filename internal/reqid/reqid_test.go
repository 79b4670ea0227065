package reqid

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
)

func TestFromHeader(t *testing.T) {
	for _, ok := range []string{"abc", "0123456789abcdef", "6f1c1a4e-2b7d-4c39-9a51-0e2f3b4c5d6e", "01J9Z:x.y_z", strings.Repeat("a", MaxLen)} {
		if got := FromHeader(ok); got != ok {
			t.Errorf("FromHeader(%q) = %q, want it kept", ok, got)
		}
	}
	for _, bad := range []string{"", " ", "a b", "a\nrequest_id=forged", "a\"b", "é", "a=b", strings.Repeat("a", MaxLen+1)} {
		got := FromHeader(bad)
		if got == bad || !Valid(got) || len(got) != 16 {
			t.Errorf("FromHeader(%q) = %q, want a new 16-character id", bad, got)
		}
	}
	if a, b := New(), New(); a == b {
		t.Errorf("New returned %q twice", a)
	}
}

func TestLogger(t *testing.T) {
	var buf bytes.Buffer
	log := hclog.New(&hclog.LoggerOptions{Output: &buf, JSONFormat: true})
	Logger(context.Background(), log).Info("without")
	Logger(With(context.Background(), "rid-1"), log).Info("with")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 || strings.Contains(lines[0], LogKey) || !strings.Contains(lines[1], `"request_id":"rid-1"`) {
		t.Fatalf("log lines:\n%s", buf.String())
	}
}

// FuzzFromHeader: whatever arrives, the id used is valid, and a valid one is kept.
func FuzzFromHeader(f *testing.F) {
	for _, s := range []string{"", "abc", "a\r\nb", strings.Repeat("z", 100)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := FromHeader(s)
		if !Valid(got) {
			t.Fatalf("FromHeader(%q) = %q, not valid", s, got)
		}
		if Valid(s) != (got == s) {
			t.Fatalf("FromHeader(%q) = %q", s, got)
		}
	})
}

// Tag sets a valid inbound id, or a new one, in the request's headers and
// context and in the response; WithHeader takes it from the headers.
func TestTag(t *testing.T) {
	var got, inCtx string
	h := Tag(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		got, inCtx = r.Header.Get(Header), From(r.Context())
	}))
	for _, in := range []string{"abc-1", "bad id", ""} {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		if in != "" {
			r.Header.Set(Header, in)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		if !Valid(got) || got != inCtx || rec.Header().Get(Header) != got || (Valid(in) && got != in) {
			t.Errorf("inbound %q: header %q, context %q, response %q", in, got, inCtx, rec.Header().Get(Header))
		}
		if id := From(WithHeader(context.Background(), r.Header)); id != got {
			t.Errorf("WithHeader: %q, want %q", id, got)
		}
	}
	if id := From(WithHeader(context.Background(), http.Header{Header: {"bad id"}})); id != "" {
		t.Errorf("WithHeader took an invalid id: %q", id)
	}
}
