package upstream

import (
	"context"
	"encoding/json"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The SDK client decodes results into its own types, which loses unknown
// content types, unknown fields and big integers. captureTransport wraps a
// message-level transport (stdio, legacy SSE) so that the raw result of a
// request made with a capture slot in its context is kept byte-exact, and the
// SDK decodes a harmless placeholder instead.

type slotKey struct{}

// slot receives the raw result (or error) of one captured request.
type slot struct {
	method string
	id     jsonrpc.ID
	raw    json.RawMessage
	err    *jsonrpc.Error
}

func withSlot(ctx context.Context, s *slot) context.Context {
	return context.WithValue(ctx, slotKey{}, s)
}

// captureTransport records the one connection it makes.
type captureTransport struct {
	inner mcp.Transport
	conn  *captureConn
}

func (t *captureTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.inner.Connect(ctx)
	if err != nil {
		return nil, err
	}
	t.conn = &captureConn{Connection: c, pending: make(map[jsonrpc.ID]*slot)}
	return t.conn, nil
}

type captureConn struct {
	mcp.Connection
	mu      sync.Mutex
	pending map[jsonrpc.ID]*slot
}

func (c *captureConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if req, ok := msg.(*jsonrpc.Request); ok && req.ID.IsValid() {
		if s, _ := ctx.Value(slotKey{}).(*slot); s != nil {
			s.method, s.id = req.Method, req.ID
			c.mu.Lock()
			c.pending[req.ID] = s
			c.mu.Unlock()
		}
	}
	return c.Connection.Write(ctx, msg)
}

func (c *captureConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	msg, err := c.Connection.Read(ctx)
	if resp, ok := msg.(*jsonrpc.Response); ok && err == nil {
		c.mu.Lock()
		s := c.pending[resp.ID]
		delete(c.pending, resp.ID)
		c.mu.Unlock()
		if s != nil {
			if resp.Error != nil {
				if we, ok := resp.Error.(*jsonrpc.Error); ok {
					s.err = we
				}
			} else {
				s.raw = resp.Result
				resp.Result = placeholder(s.method)
			}
		}
	}
	return msg, err
}

// forget drops s if its response never came (a cancelled call).
func (c *captureConn) forget(s *slot) {
	c.mu.Lock()
	if c.pending[s.id] == s {
		delete(c.pending, s.id)
	}
	c.mu.Unlock()
}

var (
	emptyCall = json.RawMessage(`{"content":[]}`)
	emptyList = json.RawMessage(`{"tools":[]}`)
	emptyObj  = json.RawMessage(`{}`)
)

func placeholder(method string) json.RawMessage {
	switch method {
	case "tools/call":
		return emptyCall
	case "tools/list":
		return emptyList
	}
	return emptyObj
}
