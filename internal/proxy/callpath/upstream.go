package callpath

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/mcp-mux/mcp-mux/internal/upstream"
	"github.com/mcp-mux/mcp-mux/internal/wire"
)

// send is the end of the pipeline: it sends c.Upward to c.Backend on the
// caller's upstream session (package upstream), with what the upstream
// sends meanwhile going back on c's return path (c.back, made by the
// arguments stage), and serves an upstream's input_required as the
// caller's era does (Era.Fulfil), each retry sent the same way.
func (s *Router) send(ctx context.Context, c *Call) (json.RawMessage, error) {
	raw, err := c.request(ctx, c.Upward)
	if err == nil {
		raw, err = c.Era.Fulfil(ctx, c.Sink, c.Upward, raw, c.request)
	}
	return raw, err
}

// request sends params as c's request once, again after an upstream's 401
// when the credentials stage can renew the headers. A tools/call's
// duration and outcome go to its server's call metrics.
func (c *Call) request(ctx context.Context, params json.RawMessage) (raw json.RawMessage, err error) {
	b := c.Backend
	if c.Method == "tools/call" {
		start := time.Now()
		defer func() { b.Metrics.record(ctx, start, err) }()
	}
	for attempt := 0; ; attempt++ {
		call := upstream.Call{Key: c.Key, Params: params, Header: c.upHeader}
		if c.back.sink != nil {
			call.Sink, call.ProgressToken = &c.back, c.back.progress.upstream
		}
		if c.Method == "tools/call" {
			raw, err = b.Up.CallTool(ctx, call)
		} else {
			raw, err = b.Up.Request(ctx, c.Method, call)
		}
		var se *upstream.StatusError
		if attempt == 0 && c.renew != nil && errors.As(err, &se) && se.Code == http.StatusUnauthorized {
			if err := c.renew(ctx); err != nil {
				return nil, err
			}
			continue
		}
		return raw, err
	}
}

// outcomeStage turns an upstream's failure into what the caller gets: an
// upstream's JSON-RPC error passes through; a call whose context ended
// returns that; any other failure of a tools/call is a tool error result
// naming the server and tool (so the model sees it), of any other request
// an internal error naming the server.
func outcomeStage(s *Router) Stage {
	return Stage{
		Name:    "outcome",
		Methods: AllMethods,
		Wrap: func(next CallFunc) CallFunc {
			return func(ctx context.Context, c *Call) (json.RawMessage, error) {
				raw, err := next(ctx, c)
				if err == nil {
					return raw, nil
				}
				return s.failed(ctx, c, err)
			}
		},
	}
}

// failed is the caller's answer to c failing with err.
func (s *Router) failed(ctx context.Context, c *Call, err error) (json.RawMessage, error) {
	if r, ok := errors.AsType[refusal](err); ok {
		return nil, r.err
	}
	var rpcErr *wire.Error
	if errors.As(err, &rpcErr) {
		return nil, &jsonrpc.Error{Code: rpcErr.Code, Message: rpcErr.Message, Data: rpcErr.Data}
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	b := c.Backend
	if c.Method == "tools/call" {
		s.logFor(ctx).Warn("tool call failed", "server", b.Name, "tool", c.Route.Raw, "err", err)
		return wire.ToolError(fmt.Sprintf("Error: MCP server %q failed to run tool %q: %v", b.Name, c.Route.Raw, err)), nil
	}
	s.logFor(ctx).Warn("upstream request failed", "server", b.Name, "method", c.Method, "err", err)
	return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("MCP server %q failed: %v", b.Name, err)}
}

// rpcError passes an upstream JSON-RPC error through and turns anything else
// into an internal error that names the server.
func (s *Router) rpcError(ctx context.Context, b *Backend, what string, err error) error {
	_, err = s.failed(ctx, &Call{Method: what, Backend: b}, err)
	return err
}

// refusal is a JSON-RPC error mcp-mux answers with itself on the way
// upstream (arguments a fixed argument refuses, credentials that cannot
// be resolved for a request other than tools/call): passed through as is.
type refusal struct{ err *jsonrpc.Error }

func (r refusal) Error() string { return r.err.Error() }
