package callpath

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/internal/panicguard"
	"github.com/mcp-mux/mcp-mux/internal/upstream"
	"github.com/mcp-mux/mcp-mux/internal/wire"
	"github.com/mcp-mux/mcp-mux/internal/wire/mcpwire"
)

// GuardedRun is Run on an HTTP handler's goroutine (the fast paths): a
// panic becomes the call's error, so its response is written as any
// error's is, on whatever the response has become (JSON or event stream).
func (s *Router) GuardedRun(ctx context.Context, c *Call) (_ json.RawMessage, err error) {
	defer s.panics.Catch(panicguard.HTTP, &err)
	return s.Run(ctx, c)
}

// ToolCall is the Call of a tools/call of st with params p, its
// upstream's messages going to k; h is the HTTP request's headers (the
// thread, token exchange's subject token). Run it: only a protocol-level
// failure (unknown tool, an upstream JSON-RPC error) is an error; an
// upstream that fails to answer is a tool error result naming it.
func (s *Router) ToolCall(ctx context.Context, st *Session, e Era, k Sink, h http.Header, p *wire.CallParams) *Call {
	return &Call{Method: "tools/call", Session: st, Era: e, Sink: k, Key: s.CallerKey(st, e, h), Header: h, Caller: callerOf(ctx, st),
		Name: p.Name, Args: p.Arguments, Meta: p.Meta}
}

// Forward runs a request of method with params, other than tools/call,
// through the pipeline to the server that owns it (b, when the request
// named it), on the caller's session, and returns its raw result.
func (s *Router) Forward(ctx context.Context, st *Session, e Era, h http.Header, b *Backend, method string, params any) (mcp.Result, error) {
	raw, err := s.Run(ctx, s.forwardCall(ctx, st, e, h, method, params, b))
	if err != nil {
		return nil, err
	}
	return &mcpwire.RawResult{Raw: raw}, nil
}

// forwardCall is the Call of a request of method other than tools/call.
func (s *Router) forwardCall(ctx context.Context, st *Session, e Era, h http.Header, method string, params any, b *Backend) *Call {
	c := &Call{Method: method, Session: st, Era: e, Sink: e.Sink(ctx, st), Key: s.CallerKey(st, e, h), Header: h,
		Caller: callerOf(ctx, st), Params: params, Backend: b}
	switch p := params.(type) {
	case *mcp.GetPromptParams:
		c.Name = p.Name
	case *mcp.ReadResourceParams:
		c.Name = p.URI
	}
	return c
}

// CallerKey is the (user, thread) an upstream session is scoped by.
func (s *Router) CallerKey(st *Session, e Era, h http.Header) upstream.Key {
	k := upstream.Key{User: st.User, Caps: st.Caps, Era: e.Version()}
	if h != nil {
		if name := s.rt.Load().Config.Inbound.ThreadHeader; name != "" {
			k.Thread = h.Get(name)
		}
	}
	if k.Thread == "" {
		k.Thread = st.ID
	}
	e.RecordKey(st, k)
	return k
}
