package callpath

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/mcp-mux/mcp-mux/internal/audit"
	"github.com/mcp-mux/mcp-mux/internal/headers"
	"github.com/mcp-mux/mcp-mux/internal/interceptor"
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

// CallTool routes one tools/call and returns the raw CallToolResult. Only a
// protocol-level failure (unknown tool, an upstream JSON-RPC error) is an
// error; an upstream that fails to answer is a tool error result naming it.
// Messages the upstream sends while serving the call go to k.
// h is the HTTP request's headers (the secrets carrier).
// Each call is audited (package audit) and, for a server that opts in,
// its arguments and result set on ctx's span (content.go).
func (s *Router) CallTool(ctx context.Context, st *Session, e Era, k Sink, key upstream.Key, h http.Header, name string, args, meta json.RawMessage) (json.RawMessage, error) {
	rec := s.audit.Start(audit.ToolCall)
	rec.Tool, rec.BytesIn = name, len(args)
	raw, err := s.routeCall(ctx, st, e, k, key, h, name, args, meta, &rec)
	s.audit.Finish(ctx, &rec, audit.Caller{User: st.User, Thread: key.Thread, Session: st.ID, Protocol: e.Version()}, raw, err)
	return raw, err
}

// routeCall is CallTool; it notes in rec where the call went and why it
// was denied.
func (s *Router) routeCall(ctx context.Context, st *Session, e Era, k Sink, key upstream.Key, h http.Header, name string, args, meta json.RawMessage, rec *audit.Entry) (json.RawMessage, error) {
	ctx, run, err := s.begin(ctx, st)
	if err != nil {
		return nil, err
	}
	defer run.end()
	rt := run.rt                             // the call finishes on this runtime, whatever Apply does meanwhile
	cat := rt.Catalog.Load().For(st.Profile) // the caller's profile's view
	r := cat.Lookup(name)
	// tool_search, guardrails and deferred tools (policy.go).
	if res, done := s.policy(ctx, st, e, k, cat, r, name, args); done {
		if r != nil {
			noteRoute(rec, r)
			rec.Deny(denial(r))
		}
		return res, nil
	}
	if r == nil {
		return nil, errUnknownTool(name)
	}
	if r.Builtin { // list/get/cancel_background_task (tasks.go)
		return s.builtinTask(ctx, st, key, name, args), nil
	}
	noteRoute(rec, r)
	// Rate and concurrency limits, before anything is forwarded (limits.go).
	lim := s.admitLimits(ctx, st, r.Server.Name, r.Name, "")
	if !lim.Allowed {
		rec.Deny("limit: " + lim.Message)
		return wire.ToolError(lim.Message), nil
	}
	defer lim.Release()
	s.content(ctx, r.Server, rec, h, args)
	// The override's fixed arguments over the caller's (catalog/overrides.go);
	// the audit and span just above keep what the caller sent.
	upArgs, err := r.Arguments(args)
	if err != nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("tool %q: %v", name, err)}
	}
	fwd, progress := forwardMeta(meta, k)
	if progress != nil {
		ctx = withProgress(ctx, progress) // sink.go
	}
	params := e.Retry(wire.AppendCallParams(make([]byte, 0, len(upArgs)+len(r.Raw)+len(fwd)+64), r.Raw, upArgs, fwd))
	send := func(ctx context.Context, params json.RawMessage) (json.RawMessage, error) {
		raw, err := s.forwardCall(ctx, st, k, key, h, r, params)
		var deny *headers.DenyError
		if errors.As(err, &deny) {
			// A credential denial is the caller's tool error; interceptors see it so too.
			rec.Deny("credentials: " + deny.Msg)
			return wire.ToolError(deny.Msg), nil
		}
		return raw, err
	}
	call := func(ctx context.Context) (json.RawMessage, error) {
		raw, err := send(ctx, params)
		if err == nil {
			// A 2026-07-28 server's input_required, per the caller's era (mrtr.go).
			raw, err = e.Fulfil(ctx, k, params, raw, send)
		}
		return raw, err
	}
	if icepts := rt.Interceptors; len(icepts) > 0 {
		forward := call
		call = func(ctx context.Context) (json.RawMessage, error) {
			c := &interceptor.Call{User: st.User, Thread: key.Thread, Server: r.Server.Name, Tool: r.Name, RawTool: r.Raw}
			return interceptor.Chain(ctx, icepts, c, forward)
		}
	}
	var raw json.RawMessage
	if r.Task != nil { // a durable task's submit (tasks.go)
		raw, err = s.submitTask(ctx, st, e, key, r, call)
	} else {
		raw, err = call(ctx)
		if err == nil {
			raw, err = e.PassTask(rt.States, st.User, r, raw) // a server's own task (Era.PassTask)
		}
	}
	if err == nil {
		s.result(ctx, r.Server, h, raw)
		return raw, nil
	}
	var rpcErr *wire.Error
	if errors.As(err, &rpcErr) {
		return nil, &jsonrpc.Error{Code: rpcErr.Code, Message: rpcErr.Message, Data: rpcErr.Data}
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	s.logFor(ctx).Warn("tool call failed", "server", r.Server.Name, "tool", r.Raw, "err", err)
	return wire.ToolError(fmt.Sprintf("Error: MCP server %q failed to run tool %q: %v", r.Server.Name, r.Raw, err)), nil
}

// noteRoute records in rec the server and raw name a call goes to (none
// for mcp-mux's own tools).
func noteRoute(rec *audit.Entry, r *Route) {
	if r.Server != nil {
		rec.Server, rec.RawTool = r.Server.Name, r.Raw
	}
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

// Forward sends a request to the server that owns it, on the caller's
// session, and returns its raw result.
func (s *Router) Forward(ctx context.Context, st *Session, e Era, h http.Header, b *Backend, method string, params any) (mcp.Result, error) {
	ctx, run, err := s.begin(ctx, st)
	if err != nil {
		return nil, err
	}
	defer run.end()
	rt := run.rt
	if cur := rt.ByName[b.Name]; cur != nil {
		b = cur // b came from an older catalog: use the runtime this request runs on
	} else {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("MCP server %q is no longer configured", b.Name)}
	}
	// Every request forwarded here is limited, as a tools/call is (limits.go).
	lim := s.admitLimits(ctx, st, b.Name, "", method)
	if !lim.Allowed {
		return nil, limitError(&lim)
	}
	defer lim.Release()
	raw, err := json.Marshal(params)
	if err != nil {
		return nil, err
	}
	raw = e.Retry(stripProtocolMeta(raw))
	key := s.CallerKey(st, e, h)
	hdr, cred, err := s.callHeaders(ctx, b, st.User, h)
	if err != nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: err.Error()}
	}
	key.Cred = cred
	k := e.Sink(ctx, st)
	ctx = WithSink(ctx, k)
	send := func(ctx context.Context, params json.RawMessage) (json.RawMessage, error) {
		return b.Up.Request(ctx, key, method, params, hdr)
	}
	res, err := send(ctx, raw)
	if err == nil {
		res, err = e.Fulfil(ctx, k, raw, res, send)
	}
	if err != nil {
		return nil, s.rpcError(ctx, b, method, err)
	}
	return &mcpwire.RawResult{Raw: res}, nil
}

// rpcError passes an upstream JSON-RPC error through and turns anything else
// into an internal error that names the server.
func (s *Router) rpcError(ctx context.Context, b *Backend, what string, err error) error {
	var rpcErr *wire.Error
	if errors.As(err, &rpcErr) {
		return &jsonrpc.Error{Code: rpcErr.Code, Message: rpcErr.Message, Data: rpcErr.Data}
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	s.logFor(ctx).Warn("upstream request failed", "server", b.Name, "method", what, "err", err)
	return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("MCP server %q failed: %v", b.Name, err)}
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

// running is what a request holds while it runs on the call path: its
// place in the count Close drains, its admission on the session, and the
// runtime it started on.
type running struct {
	life *Life
	done func()
	rt   *Runtime
}

// begin admits a request of st: refused while closing (ErrClosing) or when
// the session has too many in flight. end releases what it took.
func (s *Router) begin(ctx context.Context, st *Session) (context.Context, running, error) {
	if !s.life.Begin() {
		return ctx, running{}, ErrClosing
	}
	ctx, done, err := s.Admit(ctx, st)
	if err != nil {
		s.life.Done()
		return ctx, running{}, err
	}
	return ctx, running{life: s.life, done: done, rt: s.enter()}, nil
}

// end releases the runtime, the admission and the drain count, in that order.
func (r running) end() {
	r.rt.leave()
	r.done()
	r.life.Done()
}

// Admit starts one request of the session st (admission.Calls.Admit).
func (s *Router) Admit(ctx context.Context, st *Session) (context.Context, func(), error) {
	return st.inflight.Admit(ctx, s.maxCalls)
}
