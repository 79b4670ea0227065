package proxy

import (
	"context"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/admission"
	"github.com/mcp-mux/mcp-mux/internal/reqid"
	"github.com/mcp-mux/mcp-mux/proxy/callpath"
	"github.com/mcp-mux/mcp-mux/proxy/modern"
)

// receive is the receiving middleware: mcp-mux answers tools, prompts,
// resources and completion itself, routing each to the server that owns the
// name or URI, and leaves the rest of the protocol (initialize, ping,
// logging/setLevel bookkeeping) to the SDK.
func (s *Server) receive(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		ctx = reqid.WithHeader(ctx, callpath.HeaderOf(req)) // internal/reqid
		ctx = s.via.WithHeader(ctx, callpath.HeaderOf(req)) // internal/via
		if !strings.HasPrefix(method, "notifications/") {
			// A request ends when the client that sent it goes away (limits.go).
			var stop func()
			ctx, stop = s.requests.scope(ctx, req)
			defer stop()
		}
		ss, _ := req.GetSession().(*mcp.ServerSession)
		if method == "initialize" {
			res, err := next(ctx, method, req)
			if err == nil && ss != nil {
				h := callpath.HeaderOf(req)
				s.openSession(ss, callpath.User(h), h.Get(admission.Header))
				s.setInstructions(res)
				s.setCapabilities(res)
			}
			return res, err
		}
		st := s.sessions.get(ss)
		if st == nil {
			if method == "server/discover" || modern.IsSession(ss) {
				return s.modern.Receive(ctx, ss, method, req, next)
			}
			return next(ctx, method, req)
		}
		st.Touch()
		return s.calls.Dispatch(ctx, st, callpath.LegacyEra{}, method, req, next)
	}
}
