// Package rawconn lets mcp-mux send its own requests on the SDK's
// connection to a message-level server (stdio, legacy SSE) and receive
// their results as raw bytes.
//
// The SDK client decodes results into its own types, which loses unknown
// content types, unknown fields and big integers. Transport wraps a
// message-level transport so that mcp-mux's requests (Conn.Call) carry
// string ids ("mux-N") that the SDK, which numbers its requests, never
// uses, and their responses are taken off the connection before the SDK
// reads it. The server-to-client requests and notifications mcp-mux
// forwards (sampling, elicitation, roots; progress, logging, resource
// updates) are taken off too and answered with raw bytes (Conn.Respond), so
// their params and results travel exactly as sent. Everything else —
// initialize, ping, list_changed — stays with the SDK session.
package rawconn

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

// Transport wraps Inner and records the one connection it makes (Conn).
type Transport struct {
	Inner mcp.Transport
	// Notify is offered each notification but notifications/cancelled and
	// reports whether it took it off the connection (false leaves it to the
	// SDK). It sees them in order with the responses to Calls: the SDK
	// would dispatch them on a queue that a response can overtake.
	Notify func(method string, params json.RawMessage) bool
	// Request is offered each server request and reports whether it took
	// it; it must answer each it takes with Conn.Respond.
	Request func(c *Conn, id jsonrpc.ID, method string, params json.RawMessage) bool
	// Cancelled is offered each notifications/cancelled (its params) and
	// reports whether it cancelled a request Request took.
	Cancelled func(params json.RawMessage) bool
	// Ended, if set, is called once when the connection ends: its reader
	// failed (the server went away) or it was closed.
	Ended func()

	conn *Conn
}

// Connect connects Inner and wraps its connection.
func (t *Transport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.Inner.Connect(ctx)
	if err != nil {
		return nil, err
	}
	t.conn = &Conn{Connection: c, pending: make(map[jsonrpc.ID]chan *jsonrpc.Response), closed: make(chan struct{}),
		notify: t.Notify, request: t.Request, cancelled: t.Cancelled, ended: t.Ended}
	return t.conn, nil
}

// Conn is the connection Connect made; nil before.
func (t *Transport) Conn() *Conn { return t.conn }

// Conn is a connection that takes mcp-mux's traffic off before the SDK
// reads it. Write is the inner connection's.
type Conn struct {
	mcp.Connection
	notify    func(method string, params json.RawMessage) bool
	request   func(c *Conn, id jsonrpc.ID, method string, params json.RawMessage) bool
	cancelled func(params json.RawMessage) bool
	ended     func()
	seq       atomic.Uint64
	mu        sync.Mutex
	pending   map[jsonrpc.ID]chan *jsonrpc.Response
	closed    chan struct{}
	closeOnce sync.Once
}

// Read returns the next message for the SDK: the ones mcp-mux handles
// itself (takeOff) never reach it.
func (c *Conn) Read(ctx context.Context) (jsonrpc.Message, error) {
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
func (c *Conn) takeOff(msg jsonrpc.Message) bool {
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

// takeRequest offers a server request to request.
func (c *Conn) takeRequest(req *jsonrpc.Request) bool {
	return c.request != nil && c.request(c, req.ID, req.Method, req.Params)
}

// takeNotification offers a notifications/cancelled to cancelled and any
// other notification to notify.
func (c *Conn) takeNotification(req *jsonrpc.Request) bool {
	if req.Method == "notifications/cancelled" {
		return c.cancelled != nil && c.cancelled(req.Params)
	}
	return c.notify != nil && c.notify(req.Method, req.Params)
}

// deliver hands a response to the call waiting for it; false when none
// is (the response is the SDK's).
func (c *Conn) deliver(resp *jsonrpc.Response) bool {
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

// Respond answers a server request taken off the connection by Request.
func (c *Conn) Respond(id jsonrpc.ID, result json.RawMessage, err error) {
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

// Close closes the inner connection; Calls waiting end.
func (c *Conn) Close() error {
	c.markClosed()
	return c.Connection.Close()
}

// markClosed ends the Calls waiting, refuses new ones and reports the end.
func (c *Conn) markClosed() {
	c.closeOnce.Do(func() {
		close(c.closed)
		if c.ended != nil {
			c.ended()
		}
	})
}

// Call sends one request and waits for its raw result. A JSON-RPC error is
// returned as *wire.Error; a request that never left mcp-mux fails with
// ErrNotSent.
func (c *Conn) Call(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
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
// ErrNotSent.
func (c *Conn) send(ctx context.Context, req *jsonrpc.Request) error {
	select {
	case <-c.closed:
		return ErrNotSent
	default:
	}
	if err := c.Connection.Write(ctx, req); err != nil {
		return errors.Join(ErrNotSent, err)
	}
	return nil
}

// forget stops waiting for the response to id.
func (c *Conn) forget(id jsonrpc.ID) {
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

// ErrNotSent marks a request that never left mcp-mux, so retrying it on a
// new session cannot run it twice.
var ErrNotSent = errors.New("request not sent: upstream connection closed")
