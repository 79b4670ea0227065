package proxy

import (
	"context"
	"net/http"

	"github.com/hashicorp/go-hclog"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/internal/reqid"
)

// Request ids: every /mcp request gets one (a well-formed inbound
// X-Request-Id, else a new one), echoed in the response's X-Request-Id and
// carried in the request's context, so that every log line of the call —
// here, in upstream and in the interceptors — names it as request_id.

// tagRequest is the one place a request id is set: in the context, for the
// fast path, whose handlers run on the request's context; in the request's
// headers, which go-sdk hands the SDK path's handlers (see withRequestID);
// and in the response.
func (s *Server) tagRequest(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := reqid.FromHeader(r.Header.Get(reqid.Header))
		r.Header.Set(reqid.Header, id)
		w.Header().Set(reqid.Header, id)
		next.ServeHTTP(w, r.WithContext(reqid.With(r.Context(), id)))
	})
}

// withRequestID returns ctx carrying the request id of the HTTP request
// that req, an SDK-path request, arrived in. The header tagRequest set
// decides: a stateful session's handlers run on a context derived from the
// request that opened the session, which carries that request's id.
func withRequestID(ctx context.Context, req mcp.Request) context.Context {
	if id := headerOf(req).Get(reqid.Header); reqid.Valid(id) {
		return reqid.With(ctx, id)
	}
	return ctx
}

// logFor is the logger for a line about the request ctx belongs to.
func (s *Server) logFor(ctx context.Context) hclog.Logger { return reqid.Logger(ctx, s.log) }
