package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/internal/wire"
)

// The SDK client decodes results into its own types, which loses unknown
// content types, unknown fields and big integers. rawTransport wraps a
// message-level transport (stdio, legacy SSE) so that mcp-mux can send its
// own requests on the SDK's connection and receive their results as raw
// bytes: requests carry string ids ("mux-N") that the SDK, which numbers its
// requests, never uses, and their responses are taken off the connection
// before the SDK reads it. The server-to-client requests mcp-mux forwards
// (sampling, elicitation, roots) are taken off too and answered with raw
// bytes, so their params and results travel exactly as sent. Everything
// else — initialize, ping, list_changed — stays with the SDK session.

// rawTransport records the one connection it makes.
type rawTransport struct {
	inner mcp.Transport
	conn  *rawConn
	// notify takes the notifications forwardedNotifications names off the
	// connection, in order with the responses to mcp-mux's own requests: the
	// SDK would dispatch them on a queue that a response can overtake.
	notify func(method string, params json.RawMessage)
	// request takes the server requests serverRequests names; it must
	// answer each with conn.respond.
	request func(rc *rawConn, id jsonrpc.ID, method string, params json.RawMessage)
	// cancelled takes notifications/cancelled for a request handed to
	// request (by the raw id) and reports whether it was one.
	cancelled func(id string) bool
}

func (t *rawTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.inner.Connect(ctx)
	if err != nil {
		return nil, err
	}
	t.conn = &rawConn{Connection: c, pending: make(map[jsonrpc.ID]chan *jsonrpc.Response), closed: make(chan struct{}),
		notify: t.notify, request: t.request, cancelled: t.cancelled}
	return t.conn, nil
}

type rawConn struct {
	mcp.Connection
	notify    func(method string, params json.RawMessage)
	request   func(rc *rawConn, id jsonrpc.ID, method string, params json.RawMessage)
	cancelled func(id string) bool
	seq       atomic.Uint64
	mu        sync.Mutex
	pending   map[jsonrpc.ID]chan *jsonrpc.Response
	closed    chan struct{}
	closeOnce sync.Once
}

// Read returns the next message for the SDK: the ones mcp-mux handles
// itself (takeOff) never reach it.
func (c *rawConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	for {
		msg, err := c.Connection.Read(ctx)
		if err != nil {
			c.markClosed()
			return msg, err
		}
		if !c.takeOff(msg) {
			return msg, nil
		}
	}
}

// takeOff handles msg if it is mcp-mux's: a response to one of its own
// requests, or a server request or notification it forwards. It reports
// whether it did.
func (c *rawConn) takeOff(msg jsonrpc.Message) bool {
	switch m := msg.(type) {
	case *jsonrpc.Request:
		if m.ID.IsValid() {
			return c.takeRequest(m)
		}
		return c.takeNotification(m)
	case *jsonrpc.Response:
		return c.deliver(m)
	}
	return false
}

// takeRequest hands a server request that mcp-mux forwards to request.
func (c *rawConn) takeRequest(req *jsonrpc.Request) bool {
	if !serverRequests[req.Method] || c.request == nil {
		return false
	}
	c.request(c, req.ID, req.Method, req.Params)
	return true
}

// takeNotification hands a notification that mcp-mux forwards to notify,
// and one cancelling a request handed to request to cancelled.
func (c *rawConn) takeNotification(req *jsonrpc.Request) bool {
	switch {
	case forwardedNotifications[req.Method] && c.notify != nil:
		c.notify(req.Method, req.Params)
		return true
	case req.Method == "notifications/cancelled" && c.cancelled != nil:
		id, ok := cancelledID(req.Params)
		return ok && c.cancelled(id)
	}
	return false
}

// deliver hands a response to the call waiting for it; false when none
// is (the response is the SDK's).
func (c *rawConn) deliver(resp *jsonrpc.Response) bool {
	c.mu.Lock()
	ch := c.pending[resp.ID]
	delete(c.pending, resp.ID)
	c.mu.Unlock()
	if ch == nil {
		return false
	}
	ch <- resp
	return true
}

// respond answers a server request taken off the connection by request.
func (c *rawConn) respond(id jsonrpc.ID, result json.RawMessage, err error) {
	resp := &jsonrpc.Response{ID: id, Result: result}
	if err != nil {
		var we *wire.Error
		if errors.As(err, &we) {
			resp.Error = &jsonrpc.Error{Code: we.Code, Message: we.Message, Data: we.Data}
		} else {
			resp.Error = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: err.Error()}
		}
		resp.Result = nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = c.Connection.Write(ctx, resp)
}

// rawID is the JSON text of a jsonrpc.ID, the key server requests are
// tracked by (as on the HTTP path, where ids arrive as raw JSON).
func rawID(id jsonrpc.ID) string {
	b, _ := json.Marshal(id.Raw())
	return string(b)
}

func (c *rawConn) Close() error {
	c.markClosed()
	return c.Connection.Close()
}

func (c *rawConn) markClosed() { c.closeOnce.Do(func() { close(c.closed) }) }

// call sends one request and waits for its raw result. A JSON-RPC error is
// returned as *wire.Error.
func (c *rawConn) call(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
	idText := "mux-" + strconv.FormatUint(c.seq.Add(1), 10)
	id, err := jsonrpc.MakeID(idText)
	if err != nil {
		return nil, err
	}
	ch := make(chan *jsonrpc.Response, 1)
	c.mu.Lock()
	c.pending[id] = ch
	c.mu.Unlock()
	if err := c.send(ctx, &jsonrpc.Request{ID: id, Method: method, Params: params}); err != nil {
		c.forget(id)
		return nil, err
	}
	select {
	case resp := <-ch:
		return responseResult(resp)
	case <-ctx.Done():
		c.forget(id)
		params, _ := json.Marshal(map[string]any{"requestId": idText, "reason": "cancelled by the caller"})
		_ = c.Connection.Write(context.Background(), &jsonrpc.Request{Method: "notifications/cancelled", Params: params})
		return nil, ctx.Err()
	case <-c.closed:
		c.forget(id)
		return nil, mcp.ErrConnectionClosed
	}
}

// send writes req unless the connection is closed; either failure is
// errNotSent.
func (c *rawConn) send(ctx context.Context, req *jsonrpc.Request) error {
	select {
	case <-c.closed:
		return errNotSent
	default:
	}
	if err := c.Connection.Write(ctx, req); err != nil {
		return errors.Join(errNotSent, err)
	}
	return nil
}

// forget stops waiting for the response to id.
func (c *rawConn) forget(id jsonrpc.ID) {
	c.mu.Lock()
	delete(c.pending, id)
	c.mu.Unlock()
}

// responseResult is the raw result of resp, or its JSON-RPC error as *wire.Error.
func responseResult(resp *jsonrpc.Response) (json.RawMessage, error) {
	if resp.Error == nil {
		return resp.Result, nil
	}
	var we *jsonrpc.Error
	if errors.As(resp.Error, &we) {
		return nil, &wire.Error{Code: we.Code, Message: we.Message, Data: we.Data}
	}
	return nil, resp.Error
}

// errNotSent marks a request that never left mcp-mux, so retrying it on a
// new session cannot run it twice.
var errNotSent = errors.New("request not sent: upstream connection closed")
