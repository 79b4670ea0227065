// Package reqid provides the request id that ties together every log line
// of one /mcp request: taken from a well-formed inbound X-Request-Id header
// or generated, carried in the request's context, and added to a logger by
// Logger. Tag sets it on each request; the id is an opaque correlation
// token, never a secret.
package reqid

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/http"

	"github.com/hashicorp/go-hclog"
)

// Header is the HTTP header a request id arrives in and is echoed back in.
const Header = "X-Request-Id"

// MaxLen bounds an inbound request id; a longer one is replaced.
const MaxLen = 64

// LogKey is the log field that carries the id.
const LogKey = "request_id"

// Valid reports whether s is acceptable as a request id: 1 to MaxLen
// characters of ASCII letters, digits, '-', '_', '.' and ':' (a UUID, a
// ULID, a hex trace id), nothing a log or header could be confused by.
func Valid(s string) bool {
	if s == "" || len(s) > MaxLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '_', c == '.', c == ':':
		default:
			return false
		}
	}
	return true
}

// New returns a fresh id: 16 random hex characters.
func New() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return hex.EncodeToString(b[:])
}

// FromHeader returns the inbound id v if it is Valid, else a new one.
func FromHeader(v string) string {
	if Valid(v) {
		return v
	}
	return New()
}

type key struct{}

// With returns ctx carrying the request id id.
func With(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, key{}, id)
}

// From returns the request id ctx carries, or "".
func From(ctx context.Context) string {
	id, _ := ctx.Value(key{}).(string)
	return id
}

// Logger returns log with the request id of ctx as a field, or log itself
// when ctx carries none. Call it where a line is logged, not per request:
// the happy path pays nothing.
func Logger(ctx context.Context, log hclog.Logger) hclog.Logger {
	if id := From(ctx); id != "" {
		return log.With(LogKey, id)
	}
	return log
}

// Tag is the one place a request id is set: in the context, for handlers
// that run on the request's context; in the request's headers, which
// go-sdk hands its handlers (see WithHeader); and in the response.
func Tag(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := FromHeader(r.Header.Get(Header))
		r.Header.Set(Header, id)
		w.Header().Set(Header, id)
		next.ServeHTTP(w, r.WithContext(With(r.Context(), id)))
	})
}

// WithHeader returns ctx carrying the request id of the headers h, as Tag
// set them, if valid. The header decides, not the context: a stateful
// go-sdk session's handlers run on a context derived from the request that
// opened the session, which carries that request's id.
func WithHeader(ctx context.Context, h http.Header) context.Context {
	if id := h.Get(Header); Valid(id) {
		return With(ctx, id)
	}
	return ctx
}
