package callpath

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/mcp-mux/mcp-mux/internal/upstream"
	"github.com/mcp-mux/mcp-mux/internal/wire"
	"github.com/mcp-mux/mcp-mux/internal/wire/mcpwire"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ErrClosing answers a request that arrives while the server shuts down.
var ErrClosing = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "mcp-mux is shutting down"}

// errUnknownTool is the JSON-RPC error for a name not in the catalog.
func errUnknownTool(name string) *jsonrpc.Error {
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("unknown tool %q", name)}
}

// CallTool runs one tools/call through the pipeline and returns the raw
// CallToolResult. Only a protocol-level failure (unknown tool, an
// upstream JSON-RPC error) is an error; an upstream that fails to answer
// is a tool error result naming it. Messages the upstream sends while
// serving the call go to k. h is the HTTP request's headers (token
// exchange's subject token).
func (s *Router) CallTool(ctx context.Context, st *Session, e Era, k Sink, key upstream.Key, h http.Header, name string, args, meta json.RawMessage) (json.RawMessage, error) {
	return s.Run(ctx, &Call{Method: "tools/call", Session: st, Era: e, Sink: k, Key: key, Header: h, Caller: s.callerOf(ctx, st, h),
		Name: name, Args: args, Meta: meta})
}

// forwardMeta prepares a call's _meta for the upstream: the protocol's own
// io.modelcontextprotocol/* keys are dropped, and a progress token is
// replaced by a fresh one whose progress goes to k (the route returned).
func forwardMeta(meta json.RawMessage, k Sink) (json.RawMessage, *progressRoute) {
	if len(meta) == 0 || string(meta) == "{}" || string(meta) == "null" ||
		wire.KeysHavePrefix(meta, "io.modelcontextprotocol/") { // a 2026-07-28 request's own, only
		return nil, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(meta, &m); err != nil || len(m) == 0 {
		return nil, nil
	}
	var progress *progressRoute
	for key, v := range m {
		switch {
		case key == "progressToken":
			progress = newProgressRoute(k, v)
			m[key], _ = json.Marshal(progress.upstream)
		case strings.HasPrefix(key, "io.modelcontextprotocol/"):
			delete(m, key)
		}
	}
	if len(m) == 0 {
		return nil, progress
	}
	b, _ := json.Marshal(m)
	return b, progress
}

// stripProtocolMeta drops the protocol's own io.modelcontextprotocol/* keys
// from params._meta: they describe the downstream request (a 2026-07-28
// client's version and capabilities), not the one mcp-mux sends upstream.
func stripProtocolMeta(params json.RawMessage) json.RawMessage {
	const prefix = "io.modelcontextprotocol/"
	return wire.DropMeta(params, `"`+prefix, func(k string) bool { return strings.HasPrefix(k, prefix) })
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
		Caller: s.callerOf(ctx, st, h), Params: params, Backend: b}
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
