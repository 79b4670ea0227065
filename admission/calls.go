package admission

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// Calls bounds the requests one session runs at once (tools/call,
// prompts/get, resources/read, completion). The zero value is ready to use.
type Calls struct {
	active atomic.Int32
}

// Active returns the number of requests in flight.
func (c *Calls) Active() int { return int(c.active.Load()) }

// Admit starts one request: it returns the request's context, cancelled
// when session ends (nil: never; a 2026-07-28 request's session is the
// request itself), and the function that ends the request. Past limit
// requests in flight it returns a JSON-RPC error.
func (c *Calls) Admit(ctx, session context.Context, limit int) (context.Context, func(), error) {
	most := int32(limit)
	if c.active.Add(1) > most {
		c.active.Add(-1)
		return nil, nil, &jsonrpc.Error{Code: CodeLimit,
			Message: fmt.Sprintf("this session already has %d requests in flight, the most mcp-mux runs at once per session; retry when one finishes", most)}
	}
	ctx, cancel := context.WithCancel(ctx)
	stop := func() bool { return false }
	if session != nil {
		stop = context.AfterFunc(session, cancel)
	}
	return ctx, func() { stop(); cancel(); c.active.Add(-1) }, nil
}
