// Server-to-client traffic: the requests a server sends its client
// (sampling, elicitation, roots) and the notifications it forwards, from the
// SDK, a raw stdio/SSE connection or a call's HTTP stream: to the CallSink
// of the call they belong to (returnpath.go), or else to the Handler.

package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/internal/upstream/rawconn"
	"github.com/mcp-mux/mcp-mux/internal/wire"
	"github.com/mcp-mux/mcp-mux/internal/wire/mcpwire"
)

// serverRequests are the server-to-client requests forwarded to the caller.
var serverRequests = map[string]bool{"sampling/createMessage": true, "elicitation/create": true, "roots/list": true}

// forwardedNotifications are passed to the Handler.
var forwardedNotifications = map[string]bool{"notifications/progress": true, "notifications/message": true, "notifications/resources/updated": true}

// receive is the SDK client's receiving middleware: it delivers
// server-to-client traffic that reached the SDK. On stdio and SSE the forwarded
// requests and notifications are taken off the connection before the SDK sees
// them (rawconn), and on HTTP a call's traffic rides its own stream
// (onStreamMessage); what is left is the traffic of SDK-owned HTTP streams.
func (u *Upstream) receive(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if !serverRequests[method] && !forwardedNotifications[method] {
			return next(ctx, method, req)
		}
		cs, _ := req.GetSession().(*mcp.ClientSession)
		c := u.conns.of(cs)
		if c == nil {
			c = &conn{control: true}
		}
		params, err := sdkParams(req.GetParams())
		if err != nil {
			return nil, err
		}
		if forwardedNotifications[method] {
			u.onNotification(c, method, params)
			return nil, nil
		}
		r := c.current()
		rctx, stop := r.until(ctx)
		raw, err := u.answer(rctx, c, r, method, params)
		stop()
		if err != nil {
			return nil, sdkError(err)
		}
		return &mcpwire.RawResult{Raw: raw}, nil
	}
}

// sdkError is err as the SDK sends it: a *wire.Error as the JSON-RPC
// error it stands for.
func sdkError(err error) error {
	var we *wire.Error
	if errors.As(err, &we) {
		return &jsonrpc.Error{Code: we.Code, Message: we.Message, Data: we.Data}
	}
	return err
}

// sdkParams re-encodes params the SDK decoded, leaving out what was absent
// (the SDK's structs would say null, or "" for a missing elicitation mode).
func sdkParams(p mcp.Params) (json.RawMessage, error) {
	if p == nil || reflect.ValueOf(p).IsNil() {
		return nil, nil
	}
	b, err := json.Marshal(p)
	if err != nil {
		return nil, err
	}
	if ep, ok := p.(*mcp.ElicitParams); ok && ep.Mode == "" {
		var m map[string]json.RawMessage
		if json.Unmarshal(b, &m) == nil {
			delete(m, "mode")
			b, _ = json.Marshal(m)
		}
	}
	return b, nil
}

// answer handles one server-to-client request arriving on c for call r
// (nil: none in flight): its sink answers, or with none the Handler.
// params are the server's bytes; the result is the client's.
func (u *Upstream) answer(ctx context.Context, c *conn, r *callRoute, method string, params json.RawMessage) (json.RawMessage, error) {
	switch {
	case method == "ping":
		return json.RawMessage(`{}`), nil
	case c.control && method == "roots/list":
		// No client stands behind the discovery session: it has no roots.
		return json.RawMessage(`{"roots":[]}`), nil
	case !serverRequests[method] || c.control:
	case r.takes():
		return r.sink.Request(ctx, method, params)
	case u.opts.Handler != nil:
		return u.opts.Handler.ServerRequest(ctx, c.key, method, params)
	}
	return nil, &wire.Error{Code: jsonrpc.CodeMethodNotFound, Message: method + " is not available on this session"}
}

// onRawRequest answers a server request rawconn took off a stdio or SSE
// connection, in the background, for the newest call in flight; the server
// may cancel it.
func (u *Upstream) onRawRequest(c *conn, rc *rawconn.Conn, id jsonrpc.ID, method string, params json.RawMessage) {
	call := c.current()
	ctx, stop := call.until(u.ctx)
	key := rawID(id)
	r := c.trackServerRequest(key, stop)
	u.async.Go(func() {
		defer c.finishServerRequest(key, r)
		raw, err := u.answer(ctx, c, call, method, params)
		rc.Respond(id, raw, err)
	})
}

// rawID is the JSON text of a jsonrpc.ID, the key server requests are
// tracked by (as on the HTTP path, where ids arrive as raw JSON).
func rawID(id jsonrpc.ID) string {
	b, _ := json.Marshal(id.Raw())
	return string(b)
}

// onRawCancelled ends the answering of a server request the server cancelled.
func (c *conn) onRawCancelled(id string) bool {
	c.mu.Lock()
	_, ok := c.serverReqs[id]
	c.mu.Unlock()
	if ok {
		c.cancelServerRequest(id)
	}
	return ok
}

// onNotification delivers a forwarded notification read off c: progress
// to the call whose token it names, if this session carries it; a resource
// update, only for a URI subscribed to (the one notification the discovery
// session forwards), to the Handler; a log message to the newest call in
// flight (deliver).
func (u *Upstream) onNotification(c *conn, method string, params json.RawMessage) {
	switch method {
	case "notifications/resources/updated":
		if u.opts.Handler != nil && u.subs.holds(params) { // else a URI mcp-mux did not subscribe to on this server
			u.opts.Handler.ServerNotification(u.ctx, c.key, method, dropSubscriptionID(params))
		}
	case "notifications/progress":
		c.onProgress(params)
	default:
		u.deliver(c, c.current(), method, params)
	}
}

// onProgress delivers progress read off c to the call in flight on c whose
// token it names; other progress is dropped (progress.go).
func (c *conn) onProgress(params json.RawMessage) {
	if r := c.progress.call(params); r.takes() && !c.control {
		r.sink.Notify("notifications/progress", params)
	}
}

// deliver hands a notification read off call session c to the sink of
// call r or, with none (no call in flight, or a caller that takes none),
// to the Handler; nothing for the discovery session, which has no caller.
func (u *Upstream) deliver(c *conn, r *callRoute, method string, params json.RawMessage) {
	switch {
	case c.control:
	case r.takes():
		r.sink.Notify(method, params)
	case u.opts.Handler != nil:
		u.opts.Handler.ServerNotification(u.ctx, c.key, method, params)
	}
}

// onStreamMessage handles a notification or request that arrived on the
// stream of call r on c (HTTP fast path).
func (u *Upstream) onStreamMessage(c *conn, r *callRoute, m *wire.Message) {
	switch {
	case m.IsCall():
		u.onStreamRequest(c, r, m)
	case !m.IsNotification():
	case m.Method == "notifications/progress":
		// Progress may name any call of this session, not just this stream's.
		c.onProgress(m.Params)
	case m.Method == "notifications/cancelled":
		if id, ok := cancelledID(m.Params); ok {
			c.cancelServerRequest(id)
		}
	case m.Method == "notifications/resources/updated":
		u.deliver(c, nil, m.Method, m.Params) // a session's, not the call's
	case forwardedNotifications[m.Method]:
		u.deliver(c, r, m.Method, m.Params)
	}
}

// onStreamRequest answers, in the background, a server request that
// arrived on the stream of call r on c; the server may cancel it.
func (u *Upstream) onStreamRequest(c *conn, r *callRoute, m *wire.Message) {
	ctx, cancel := r.until(u.ctx)
	id := string(m.ID)
	sr := c.trackServerRequest(id, cancel)
	u.async.Go(func() {
		defer c.finishServerRequest(id, sr)
		raw, err := u.answer(ctx, c, r, m.Method, m.Params)
		c.direct.respond(m.ID, raw, err)
	})
}

// cancelledID is the raw id of the request a notifications/cancelled
// names; false when its params do not decode.
func cancelledID(params json.RawMessage) (string, bool) {
	var p struct {
		RequestID json.RawMessage `json:"requestId"`
	}
	if json.Unmarshal(params, &p) != nil {
		return "", false
	}
	return string(p.RequestID), true
}
