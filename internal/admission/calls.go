package admission

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// Calls bounds the requests one session runs at once (tools/call,
// prompts/get, resources/read, completion) and cancels them when the
// session ends. The zero value is ready to use; an idle one holds nothing
// beyond itself (a session is idle most of its life).
type Calls struct {
	active atomic.Int32

	mu    sync.Mutex
	calls []*call // in flight; nil when none
	ended bool
}

type call struct{ cancel context.CancelFunc }

// Active returns the number of requests in flight.
func (c *Calls) Active() int { return int(c.active.Load()) }

// Admit starts one request: it returns the request's context, cancelled
// when the session ends (End), and the function that ends the request.
// Past limit requests in flight it returns a JSON-RPC error.
func (c *Calls) Admit(ctx context.Context, limit int) (context.Context, func(), error) {
	most := int32(limit)
	if c.active.Add(1) > most {
		c.active.Add(-1)
		return nil, nil, &jsonrpc.Error{Code: CodeLimit,
			Message: fmt.Sprintf("this session already has %d requests in flight, the most mcp-mux runs at once per session; retry when one finishes", most)}
	}
	ctx, cancel := context.WithCancel(ctx)
	k := &call{cancel: cancel}
	c.mu.Lock()
	if c.ended {
		cancel()
	} else {
		c.calls = append(c.calls, k)
	}
	c.mu.Unlock()
	return ctx, func() { c.done(k); cancel(); c.active.Add(-1) }, nil
}

// done forgets a request that ended.
func (c *Calls) done(k *call) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, x := range c.calls {
		if x == k {
			c.calls = append(c.calls[:i], c.calls[i+1:]...)
			break
		}
	}
	if len(c.calls) == 0 {
		c.calls = nil
	}
}

// End cancels the requests in flight and every later one: the session ended.
func (c *Calls) End() {
	c.mu.Lock()
	c.ended = true
	calls := c.calls
	c.calls = nil
	c.mu.Unlock()
	for _, k := range calls {
		k.cancel()
	}
}
