// Package panicguard keeps one request from ending the process. Every
// goroutine that serves a request recovers a panic at its top (Guard.Catch,
// Guard.CatchHTTP, or the wrappers Handler and Middleware) and answers that
// request with a JSON-RPC internal error (-32603) carrying its id:
//
//   - the HTTP handler (the 2026-07-28 and legacy fast paths, the routing to
//     the SDK's handlers, every other endpoint: a plain 500 where there is
//     no JSON-RPC call to answer);
//   - go-sdk's method handlers, which the SDK runs on goroutines of its
//     own: the outermost receiving middleware;
//   - goroutines mcp-mux starts for a request or an upstream's message:
//     bridged calls, server-to-client requests and notifications, task
//     event deliveries and the poller's calls.
//
// Each panic is caught once, by the innermost of these, logged once with
// its stack (functions and lines only: never argument values, nor the
// panic's value unless it is a runtime error, whose text is the runtime's
// own) and counted in mcp_mux_panics_total by where it was caught.
package panicguard

import (
	"context"
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
)

// Where a panic was caught: the label values of mcp_mux_panics_total.
const (
	HTTP     = "http"     // an HTTP handler goroutine, fast paths included
	SDK      = "sdk"      // a go-sdk method handler goroutine
	Bridge   = "bridge"   // a bridged call's goroutine
	Upstream = "upstream" // an upstream's request or notification to the client
	Task     = "task"     // task event delivery, the poller's tool calls
)

// wheres are every label value, each a series from the start.
var wheres = []string{HTTP, SDK, Bridge, Upstream, Task}

// ErrPanicked answers a request whose handling panicked.
var ErrPanicked = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "internal error"}

// maxFrames bounds the stack a panic's log line carries.
const maxFrames = 64

// Guard recovers, logs and counts panics.
type Guard struct {
	log   hclog.Logger
	count map[string]prometheus.Counter // by where; every series exists from the start
}

// New returns a Guard that logs to log and registers
// mcp_mux_panics_total with reg.
func New(log hclog.Logger, reg prometheus.Registerer) *Guard {
	vec := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "mcp_mux_panics_total",
		Help: "Panics recovered while serving a request, by where they were caught (http, sdk, bridge, upstream, task); each request was answered with an internal error.",
	}, []string{"where"})
	reg.MustRegister(vec)
	g := &Guard{log: log, count: make(map[string]prometheus.Counter, len(wheres))}
	for _, w := range wheres {
		g.count[w] = vec.WithLabelValues(w)
	}
	return g
}

// Catch, deferred, recovers a panic: it is logged and counted, and *err
// (when err is not nil) becomes ErrPanicked.
func (g *Guard) Catch(where string, err *error) {
	if p := recover(); p != nil {
		g.note(where, p)
		if err != nil {
			*err = ErrPanicked
		}
	}
}

// note logs and counts one recovered panic.
func (g *Guard) note(where string, p any) {
	g.count[where].Inc()
	g.log.Error("panic while serving a request; answered with an internal error",
		"where", where, "panic", text(p), "stack", stack())
}

// text describes a panic's value without its content, unless it is a
// runtime error (a nil dereference, an index out of range, …), whose text
// the runtime writes.
func text(p any) string {
	if re, ok := p.(goruntime.Error); ok {
		return re.Error()
	}
	return fmt.Sprintf("%T", p)
}

// stack is the panicking goroutine's stack from the frame that panicked:
// function, file and line, no argument values.
func stack() string {
	pcs := make([]uintptr, maxFrames+8)
	n := goruntime.Callers(1, pcs)
	frames := goruntime.CallersFrames(pcs[:n])
	var b strings.Builder
	seen, written := false, 0
	for {
		f, more := frames.Next()
		if seen && written < maxFrames {
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

// Middleware is the outermost receiving middleware: a method handler that
// panics answers its request with ErrPanicked.
func (g *Guard) Middleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (_ mcp.Result, err error) {
		defer g.Catch(SDK, &err)
		return next(ctx, method, req)
	}
}

// Handler recovers a panic of next: a 500, or for a POST whose body a
// handler within saw, the JSON-RPC error (CatchHTTP).
func (g *Guard) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer g.CatchHTTP(w, nil)
		next.ServeHTTP(w, r)
	})
}

// CatchHTTP, deferred in an HTTP handler, recovers a panic: a call in body
// is answered with a JSON-RPC -32603 error carrying its id, anything else
// with a 500. http.ErrAbortHandler, net/http's way to abort a response,
// passes on.
func (g *Guard) CatchHTTP(w http.ResponseWriter, body []byte) {
	p := recover()
	if p == nil {
		return
	}
	if p == http.ErrAbortHandler { //nolint:errorlint // a sentinel panic value, compared as net/http does
		panic(p)
	}
	g.note(HTTP, p)
	var m wire.Message
	if len(body) > 0 && wire.Decode(body, &m) == nil && m.IsCall() {
		mcpwire.WriteError(w, http.StatusOK, m.ID, ErrPanicked.Code, ErrPanicked.Message, nil)
		return
	}
	http.Error(w, "internal error", http.StatusInternalServerError)
}
