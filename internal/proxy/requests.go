package proxy

import (
	"context"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/internal/proxy/callpath"
)

// Bounds on what one client can make mcp-mux hold.
//
// Package admission holds them: every request body has a read deadline
// and a /mcp POST body is read once, bounded and scanned (admission.Bodies,
// from GuardHosts and mcpHandler); a POST that would open a session past
// inbound.max_sessions, or past its caller's share of it, is refused
// (admission.Sessions); every request a session runs (tools/call,
// prompts/get, resources/read, completion) is admitted by
// admission.Calls: at most MaxSessionCalls at once, each cancelled when the
// session ends (DELETE, idle timeout, shutdown) and, on the SDK path, when
// the HTTP request it came in ends (the client went away, requestTable), as
// the fast path does with the request's own context. Here are the
// Server's delegations to it.

const (
	defaultBodyTimeout     = 30 * time.Second
	defaultIdleConnTimeout = 2 * time.Minute
	defaultMaxSessionCalls = 64
)

// requestHeader carries, from mcpHandler to the receiving middleware, the
// handle of the HTTP request a message arrived in: in stateful mode go-sdk
// hands handlers each request's headers but a context of the session's.
// mcpHandler removes any copy a client sent.
const requestHeader = "Mcp-Mux-Internal-Request"

// requestTable maps the handles mcpHandler gives SDK-path HTTP requests to
// their contexts (which carry their callers, callpath.WithCaller).
type requestTable struct {
	seq atomic.Uint64
	mu  sync.Mutex
	m   map[string]context.Context
}

// bind records r under a new handle in its headers; call the returned
// function when the request has been served.
func (t *requestTable) bind(r *http.Request) func() {
	id := strconv.FormatUint(t.seq.Add(1), 10)
	t.mu.Lock()
	if t.m == nil {
		t.m = make(map[string]context.Context)
	}
	t.m[id] = r.Context()
	t.mu.Unlock()
	r.Header.Set(requestHeader, id)
	return func() {
		t.mu.Lock()
		delete(t.m, id)
		t.mu.Unlock()
	}
}

// scope returns ctx carrying the caller of the HTTP request the SDK
// request req arrived in, and cancelled when that request ends. A handle
// whose request is already over yields a cancelled context: nobody is
// left to read the answer.
func (t *requestTable) scope(ctx context.Context, req mcp.Request) (context.Context, func()) {
	h := callpath.HeaderOf(req)
	id := h.Get(requestHeader)
	if id == "" {
		return ctx, func() {}
	}
	t.mu.Lock()
	rctx, ok := t.m[id]
	t.mu.Unlock()
	ctx, cancel := context.WithCancel(ctx)
	if !ok {
		cancel()
		return ctx, cancel
	}
	if c, ok := callpath.CallerOf(rctx); ok {
		ctx = callpath.WithCaller(ctx, c)
	}
	stop := context.AfterFunc(rctx, cancel)
	return ctx, func() { stop(); cancel() }
}

// HTTPServer returns an http.Server for Handler with mcp-mux's connection
// bounds: request headers within 10 seconds and 64 KiB, keep-alive
// connections closed after IdleConnTimeout without a request. Bodies have
// their own deadline (BodyTimeout, set per request by admission.Bodies.Read) and there is
// no write timeout: a response stream lasts as long as its call.
func (s *Server) HTTPServer() *http.Server {
	return &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       s.opts.IdleConnTimeout,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          s.log.StandardLogger(&hclog.StandardLoggerOptions{InferLevels: true}),
	}
}
