package proxy

import (
	"context"
	"strings"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/internal/proxy/callpath"
	"github.com/mcp-mux/mcp-mux/internal/proxy/modern"
	"github.com/mcp-mux/mcp-mux/internal/proxy/sessions"
	"github.com/mcp-mux/mcp-mux/internal/reqid"
	"github.com/mcp-mux/mcp-mux/internal/sessionstore"
	"github.com/mcp-mux/mcp-mux/internal/telemetry"
	"github.com/mcp-mux/mcp-mux/internal/via"
)

// receiver is the SDK's receiving middleware, the era router of the SDK
// path: a request of a legacy session goes down the shared call path with
// callpath.LegacyEra, a 2026-07-28 request (and server/discover) to package
// modern, and the rest of the protocol (initialize, ping, logging/setLevel
// bookkeeping) to the SDK.
type receiver struct {
	rt       *atomic.Pointer[callpath.Runtime]
	via      *via.Marker
	requests *requestTable
	sessions *sessions.Table
	calls    *callpath.Router
	modern   *modern.Handler
	tel      *telemetry.Telemetry // SERVER spans (nil: off)
}

// middleware is the mcp.Middleware.
func (m *receiver) middleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		ctx, stop := m.scope(ctx, method, req)
		defer stop()
		if !m.tel.Enabled() {
			return m.route(ctx, method, req, next)
		}
		h := callpath.HeaderOf(req)
		op := telemetry.OfRequest(method, req, h)
		// Names callers invent are one label (catalog.Label), in the caller's view.
		caller := callpath.CallerFrom(ctx)
		cat := m.rt.Load().View(caller.Profile)
		if op.Tool != "" {
			op.Tool = cat.Label("tools/call", op.Tool)
		}
		if op.Prompt != "" {
			op.Prompt = cat.Label("prompts/get", op.Prompt)
		}
		op.RequestID, op.User = h.Get(callpath.RequestIDHeader), caller.User
		var meta map[string]any
		if m.tel.Tracing() {
			meta = telemetry.MetaOf(req)
		}
		ctx, span := m.tel.ServerMeta(ctx, op, meta, h)
		res, err := m.route(ctx, method, req, next)
		span.End(err, telemetry.ToolError(res))
		return res, err
	}
}

// scope tags ctx with the request's id (internal/reqid) and loop marker
// (internal/via), and ends a request (not a notification) when the client
// that sent it goes away (requests.go).
func (m *receiver) scope(ctx context.Context, method string, req mcp.Request) (context.Context, func()) {
	h := callpath.HeaderOf(req)
	ctx = reqid.WithHeader(ctx, h)
	ctx = m.via.WithHeader(ctx, h)
	if strings.HasPrefix(method, "notifications/") {
		return ctx, func() {}
	}
	return m.requests.scope(ctx, req)
}

// route sends one request to the SDK, the session it belongs to or the
// 2026-07-28 era.
func (m *receiver) route(ctx context.Context, method string, req mcp.Request, next mcp.MethodHandler) (mcp.Result, error) {
	ss, _ := req.GetSession().(*mcp.ServerSession)
	if method == "initialize" {
		return m.initialize(ctx, ss, req, next)
	}
	var st *callpath.Session
	if ss != nil && ss.ID() != "" {
		st = m.sessions.Get(ss.ID())
	}
	if st == nil {
		if method == "server/discover" || modern.IsSession(ss) {
			return m.modern.Receive(ctx, ss, method, req, next)
		}
		return next(ctx, method, req)
	}
	st.Touch()
	switch method {
	case "resources/subscribe", "resources/unsubscribe":
		// Recorded, and held by the session's holder (package sessions).
		if uri := subscribedURI(req); uri != "" {
			return m.sessions.Subscribe(ctx, st, uri, method == "resources/subscribe")
		}
	case "logging/setLevel":
		// Recorded before the answer: the next request may reach any replica.
		if p, ok := req.GetParams().(*mcp.SetLoggingLevelParams); ok {
			if err := m.sessions.Record(ctx, st, sessionstore.SetLevel(string(p.Level))); err != nil {
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "recording the logging level failed (the session store is unreachable); retry"}
			}
		}
	}
	return m.calls.Dispatch(ctx, st, callpath.LegacyEra{}, method, req, next)
}

// subscribedURI returns the URI of a resources/subscribe or unsubscribe.
func subscribedURI(req mcp.Request) string {
	switch p := req.GetParams().(type) {
	case *mcp.SubscribeParams:
		return p.URI
	case *mcp.UnsubscribeParams:
		return p.URI
	}
	return ""
}

// initialize lets the SDK answer the initialize of a session opened for
// it (host.go), and puts the catalog's instructions and capabilities into
// the result.
func (m *receiver) initialize(ctx context.Context, ss *mcp.ServerSession, req mcp.Request, next mcp.MethodHandler) (mcp.Result, error) {
	res, err := next(ctx, "initialize", req)
	if err != nil || ss == nil {
		return res, err
	}
	if st := m.sessions.Get(ss.ID()); st != nil {
		m.sessions.Negotiated(st, res)
	}
	cat := m.rt.Load().View(callpath.CallerFrom(ctx).Profile)
	setInstructions(cat, res)
	callpath.SetCapabilities(cat, res)
	return res, err
}

// setInstructions puts the catalog's instructions (routing hints and, with
// tool_search, the deferred tool names) into an initialize result.
func setInstructions(cat *callpath.Catalog, res mcp.Result) {
	ir, ok := res.(*mcp.InitializeResult)
	if !ok {
		return
	}
	if text := cat.Instructions(); text != "" {
		ir.Instructions = text
	}
}
