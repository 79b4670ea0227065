package proxy

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	goruntime "runtime"
	"strings"

	"github.com/hashicorp/go-hclog"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcp-mux/mcp-mux/internal/wire"
	"github.com/mcp-mux/mcp-mux/internal/wire/mcpwire"
	"github.com/mcp-mux/mcp-mux/upstream"
)

// Panics.
//
// One request must never end the process. Every goroutine that serves a
// request recovers a panic at its top and answers that request with a
// JSON-RPC internal error (-32603) carrying its id:
//
//   - the HTTP handler (the 2026-07-28 and legacy fast paths, the routing to
//     the SDK's handlers, every other endpoint: a plain 500 where there is
//     no JSON-RPC call to answer);
//   - go-sdk's method handlers, which the SDK runs on goroutines of its
//     own: the outermost receiving middleware;
//   - goroutines mcp-mux starts for a request or an upstream's message:
//     bridged calls (mrtr.go), server-to-client requests and notifications
//     (the upstream.Handler), task event deliveries and the poller's calls.
//
// Each panic is caught once, by the innermost of these, logged once with
// its stack (functions and lines only: never argument values, nor the
// panic's value unless it is a runtime error, whose text is the runtime's
// own) and counted in mcp_mux_panics_total by where it was caught.

// Where a panic was caught: the label values of mcp_mux_panics_total.
const (
	whereHTTP     = "http"     // an HTTP handler goroutine, fast paths included
	whereSDK      = "sdk"      // a go-sdk method handler goroutine
	whereBridge   = "bridge"   // a bridged call's goroutine (mrtr.go)
	whereUpstream = "upstream" // an upstream's request or notification to the client
	whereTask     = "task"     // task event delivery, the poller's tool calls
)

var panicWheres = []string{whereHTTP, whereSDK, whereBridge, whereUpstream, whereTask}

// errPanicked answers a request whose handling panicked.
var errPanicked = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "internal error"}

// maxPanicFrames bounds the stack a panic's log line carries.
const maxPanicFrames = 64

// panicGuard recovers, logs and counts panics.
type panicGuard struct {
	log   hclog.Logger
	count map[string]prometheus.Counter // by where; every series exists from the start
}

func newPanicGuard(log hclog.Logger, reg prometheus.Registerer) *panicGuard {
	vec := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "mcp_mux_panics_total",
		Help: "Panics recovered while serving a request, by where they were caught (http, sdk, bridge, upstream, task); each request was answered with an internal error.",
	}, []string{"where"})
	reg.MustRegister(vec)
	g := &panicGuard{log: log, count: make(map[string]prometheus.Counter, len(panicWheres))}
	for _, w := range panicWheres {
		g.count[w] = vec.WithLabelValues(w)
	}
	return g
}

// catch, deferred, recovers a panic: it is logged and counted, and *err
// (when err is not nil) becomes errPanicked.
func (g *panicGuard) catch(where string, err *error) {
	if p := recover(); p != nil {
		g.note(where, p)
		if err != nil {
			*err = errPanicked
		}
	}
}

// note logs and counts one recovered panic.
func (g *panicGuard) note(where string, p any) {
	g.count[where].Inc()
	g.log.Error("panic while serving a request; answered with an internal error",
		"where", where, "panic", panicText(p), "stack", panicStack())
}

// panicText describes a panic's value without its content, unless it is
// a runtime error (a nil dereference, an index out of range, …), whose
// text the runtime writes.
func panicText(p any) string {
	if re, ok := p.(goruntime.Error); ok {
		return re.Error()
	}
	return fmt.Sprintf("%T", p)
}

// panicStack is the panicking goroutine's stack from the frame that
// panicked: function, file and line, no argument values.
func panicStack() string {
	pcs := make([]uintptr, maxPanicFrames+8)
	n := goruntime.Callers(1, pcs)
	frames := goruntime.CallersFrames(pcs[:n])
	var b strings.Builder
	seen, written := false, 0
	for {
		f, more := frames.Next()
		if seen && written < maxPanicFrames {
			fmt.Fprintf(&b, "%s\n\t%s:%d\n", f.Function, f.File, f.Line)
			written++
		}
		if f.Function == "runtime.gopanic" {
			seen = true
		}
		if !more {
			break
		}
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// middleware is the outermost receiving middleware: a method handler that
// panics answers its request with errPanicked.
func (g *panicGuard) middleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (_ mcp.Result, err error) {
		defer g.catch(whereSDK, &err)
		return next(ctx, method, req)
	}
}

// handler recovers a panic of next: a 500, or for a POST whose body
// serveBody saw, the JSON-RPC error (serveBody).
func (g *panicGuard) handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer g.catchHTTP(w, nil)
		next.ServeHTTP(w, r)
	})
}

// catchHTTP, deferred in an HTTP handler, recovers a panic: a call in body
// is answered with a JSON-RPC -32603 error carrying its id, anything else
// with a 500. http.ErrAbortHandler, net/http's way to abort a response,
// passes on.
func (g *panicGuard) catchHTTP(w http.ResponseWriter, body []byte) {
	p := recover()
	if p == nil {
		return
	}
	if p == http.ErrAbortHandler { //nolint:errorlint // a sentinel panic value, compared as net/http does
		panic(p)
	}
	g.note(whereHTTP, p)
	var m wire.Message
	if len(body) > 0 && wire.Decode(body, &m) == nil && m.IsCall() {
		mcpwire.WriteError(w, http.StatusOK, m.ID, errPanicked.Code, errPanicked.Message, nil)
		return
	}
	http.Error(w, "internal error", http.StatusInternalServerError)
}

// guardedHandler is an upstream.Handler whose panics are caught: a
// server-to-client request the mux fails to forward is the upstream's
// internal error, a notification is dropped.
type guardedHandler struct {
	g    *panicGuard
	next upstream.Handler
}

var _ upstream.Handler = guardedHandler{}

func (h guardedHandler) ServerRequest(ctx context.Context, key upstream.Key, method string, params json.RawMessage) (_ json.RawMessage, err error) {
	defer h.g.catch(whereUpstream, &err)
	return h.next.ServerRequest(ctx, key, method, params)
}

func (h guardedHandler) ServerNotification(ctx context.Context, key upstream.Key, method string, params json.RawMessage) {
	defer h.g.catch(whereUpstream, nil)
	h.next.ServerNotification(ctx, key, method, params)
}

// guardedCall is callTool on an HTTP handler's goroutine (the fast paths):
// a panic becomes the call's error, so its response is written as any
// error's is, on whatever the response has become (JSON or event stream).
func (s *Server) guardedCall(ctx context.Context, st *session, k sink, key upstream.Key, h http.Header, name string, args, meta json.RawMessage) (_ json.RawMessage, err error) {
	defer s.panics.catch(whereHTTP, &err)
	return s.callTool(ctx, st, k, key, h, name, args, meta)
}
