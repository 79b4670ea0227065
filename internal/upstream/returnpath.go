// The return path: what a server sends while it serves a call goes to the
// CallSink passed with that call, never through the call's context.

package upstream

import (
	"context"
	"encoding/json"
	"net/http"
)

// CallSink receives what a server sends while it serves one call.
type CallSink interface {
	// Notify receives notifications/progress (naming the call's own
	// ProgressToken) and notifications/message.
	Notify(method string, params json.RawMessage)
	// Request answers sampling/createMessage, elicitation/create and
	// roots/list; ctx ends when the server cancels or the call ends.
	Request(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error)
}

// Call is one request a caller sends on its session (CallTool, Request).
type Call struct {
	Key    Key
	Params json.RawMessage // raw params, as sent
	// Header, when non-nil, is the complete header set of the caller
	// (Request says how it is used).
	Header http.Header
	// Sink receives what the server sends while serving the call; nil:
	// the Handler gets it, as traffic outside any call.
	Sink CallSink
	// ProgressToken is the token Params carry in _meta, if any: the
	// server's progress naming it, on the session carrying the call, goes
	// to Sink while the call is in flight (progress.go).
	ProgressToken string
}

// callRoute is one call in flight on a session: where what the server sends
// for it goes. A pointer, so that a call ending drops only its own entries.
type callRoute struct {
	sink  CallSink
	token string          // the call's progress token ("" for none)
	call  context.Context // the call's context: only its end is read (until)
}

func newCallRoute(ctx context.Context, call *Call) *callRoute {
	return &callRoute{sink: call.Sink, token: call.ProgressToken, call: ctx}
}

// takes reports whether r is a call with a sink.
func (r *callRoute) takes() bool { return r != nil && r.sink != nil }

// until returns ctx, ended also when the call of r ends (r nil: only
// with ctx). Call stop when done with it.
func (r *callRoute) until(ctx context.Context) (_ context.Context, stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	if r == nil || r.call == nil {
		return ctx, cancel
	}
	unwatch := context.AfterFunc(r.call, cancel) // no goroutine per server request
	return ctx, func() { unwatch(); cancel() }
}

// track registers r (nil: nothing) as a call in flight on c until the
// returned func is called.
func (c *conn) track(r *callRoute) (untrack func()) {
	if r == nil {
		return noUnbind
	}
	c.mu.Lock()
	if c.inflight == nil {
		c.inflight = make(map[uint64]*callRoute)
	}
	c.seq++
	id := c.seq
	c.inflight[id] = r
	c.mu.Unlock()
	return func() {
		c.mu.Lock()
		delete(c.inflight, id)
		c.mu.Unlock()
	}
}

// current returns the newest call in flight on c, if any: the call a
// server-to-client message most likely belongs to.
func (c *conn) current() *callRoute {
	c.mu.Lock()
	defer c.mu.Unlock()
	var best uint64
	var r *callRoute
	for id, x := range c.inflight {
		if id >= best {
			best, r = id, x
		}
	}
	return r
}
