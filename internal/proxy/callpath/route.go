package callpath

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// routeStage looks the call's target up, once, in the caller's view of
// the pinned runtime: a tool's route (nil for a name the catalog does not
// know: the policy stage decides), a prompt's, the server that owns a
// resource or completes a reference, or — for a request that named its
// server — that server as this runtime has it.
func (s *Router) routeStage() Stage {
	return Stage{
		Name:    "route",
		Methods: AllMethods,
		Wrap: func(next CallFunc) CallFunc {
			return func(ctx context.Context, c *Call) (json.RawMessage, error) {
				if err := c.route(); err != nil {
					return nil, err
				}
				c.noteRoute()
				return next(ctx, c)
			}
		},
	}
}

// route sets c.Route and c.Backend from c.View, or returns the error the
// caller gets for a target nobody serves.
func (c *Call) route() error {
	switch c.Method {
	case "tools/call":
		if c.Route == nil {
			c.Route = c.View.Lookup(c.Name)
		}
		if c.Route != nil {
			c.Backend, c.Raw = c.Route.Server, c.Route.Raw
		}
	case "prompts/get":
		p := c.View.Prompt(c.Name)
		if p == nil {
			return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("unknown prompt %q", c.Name)}
		}
		c.Backend, c.Raw = p.Server, p.Raw
	case "resources/read":
		if c.Backend = c.View.ResourceOwner(c.Name); c.Backend == nil {
			return &jsonrpc.Error{Code: -32002, Message: fmt.Sprintf("resource not found: %q", c.Name)}
		}
	case "completion/complete":
		return c.routeCompletion()
	default:
		if c.Backend == nil {
			return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "no MCP server named"}
		}
		cur := c.Runtime.ByName[c.Backend.Name]
		if cur == nil {
			return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("MCP server %q is no longer configured", c.Backend.Name)}
		}
		c.Backend = cur // c.Backend came from an older catalog: use this runtime's
	}
	return nil
}

// routeCompletion sets the server that completes the call's reference,
// turning a prompt's visible name into its own in a copy of the params.
func (c *Call) routeCompletion() error {
	p, _ := c.Params.(*mcp.CompleteParams)
	if p == nil || p.Ref == nil {
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "missing ref"}
	}
	q, ref := *p, *p.Ref
	q.Ref = &ref
	switch ref.Type {
	case "ref/prompt":
		if r := c.View.Prompt(ref.Name); r != nil {
			ref.Name, c.Backend = r.Raw, r.Server
		}
	case "ref/resource":
		c.Backend = c.View.ResourceOwner(ref.URI)
	}
	if c.Backend == nil {
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("no server completes %s %q", ref.Type, ref.Name+ref.URI)}
	}
	c.Params = &q
	return nil
}

// promptArgsLen is the size of a prompts/get's arguments, as recorded.
func promptArgsLen(params any) int {
	p, _ := params.(*mcp.GetPromptParams)
	if p == nil || len(p.Arguments) == 0 {
		return 0
	}
	b, _ := json.Marshal(p.Arguments)
	return len(b)
}
