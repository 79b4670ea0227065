package via

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/hashicorp/go-hclog"

	"github.com/mcp-mux/mcp-mux/internal/reqid"
	"github.com/mcp-mux/mcp-mux/internal/wire/mcpwire"
)

// GuardOptions configure Marker.Guard.
type GuardOptions struct {
	// Log takes a debug line per refused request.
	Log hclog.Logger
	// RequestID returns the JSON-RPC id of the request refused, or nil:
	// the error answers it.
	RequestID func(*http.Request) json.RawMessage
}

// Guard answers a request that already passed through this mux, or
// through MaxHops muxes, with HTTP 508 (400 for a malformed header) and a
// JSON-RPC error, before anything else reads it; the rest carry their
// chain in the request context (With), so the upstream requests made on
// their behalf extend it (Transport).
func (m *Marker) Guard(next http.Handler, opts GuardOptions) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		chain, err := m.Check(r.Header)
		if err != nil {
			refuse(w, r, err, &opts)
			return
		}
		next.ServeHTTP(w, r.WithContext(With(r.Context(), chain)))
	})
}

// refuse answers r, refused by Check with err, and logs it.
func refuse(w http.ResponseWriter, r *http.Request, err error, opts *GuardOptions) {
	status := http.StatusLoopDetected
	if errors.Is(err, ErrMalformed) {
		status = http.StatusBadRequest
	}
	reqid.Logger(r.Context(), opts.Log).Debug("refused a request", "reason", err)
	var id json.RawMessage
	if opts.RequestID != nil {
		id = opts.RequestID(r)
	}
	mcpwire.WriteError(w, status, id, -32600, err.Error(), nil)
}

// WithHeader returns ctx carrying the chain of the request headers h, when
// they carry a well-formed one (an SDK-path request's: a stateful
// session's handlers run on the context of the request that opened the
// session).
func (m *Marker) WithHeader(ctx context.Context, h http.Header) context.Context {
	if chain, err := m.Check(h); err == nil && chain != nil {
		return With(ctx, chain)
	}
	return ctx
}
