package proxy

import (
	"context"
	"errors"
	"net/http"

	"github.com/hashicorp/go-hclog"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/internal/reqid"
	"github.com/mcp-mux/mcp-mux/internal/via"
)

// refuseLoops answers a request that already passed through this mux, or
// through via.MaxHops muxes, with HTTP 508 (400 for a malformed header) and
// a JSON-RPC error, before anything else reads it; the rest carry their
// chain in the request context, so the upstream requests made on their
// behalf extend it (upstream.Options.Via).
func refuseLoops(m *via.Marker, log hclog.Logger, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		chain, err := m.Check(r.Header)
		if err != nil {
			status := http.StatusLoopDetected
			if errors.Is(err, via.ErrMalformed) {
				status = http.StatusBadRequest
			}
			reqid.Logger(r.Context(), log).Debug("refused a request", "reason", err)
			writeRPCError(w, status, requestID(r), -32600, err.Error())
			return
		}
		next.ServeHTTP(w, r.WithContext(via.With(r.Context(), chain)))
	})
}

// withVia returns ctx carrying the chain of the HTTP request that req, an
// SDK-path request, arrived in (a stateful session's handlers run on the
// context of the request that opened the session).
func withVia(ctx context.Context, m *via.Marker, req mcp.Request) context.Context {
	if chain, err := m.Check(headerOf(req)); err == nil && chain != nil {
		return via.With(ctx, chain)
	}
	return ctx
}
