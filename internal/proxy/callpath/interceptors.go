package callpath

import (
	"context"
	"encoding/json"

	"github.com/mcp-mux/mcp-mux/internal/interceptor"
)

// interceptorsStage runs a tools/call through the runtime's compiled-in
// interceptors (mcpInterceptors, outermost first). They see the call as
// the caller made it, and its answer as the caller gets it, a credentials
// denial included. Left out when none is configured.
func interceptorsStage(s *Router) Stage {
	return Stage{
		Name:    "interceptors",
		Methods: ToolCall,
		Needed:  func(rt *Runtime) bool { return len(rt.Interceptors) > 0 },
		Wrap: func(next CallFunc) CallFunc {
			return func(ctx context.Context, c *Call) (json.RawMessage, error) {
				ic := &interceptor.Call{User: c.Session.User, Thread: c.Key.Thread, Server: c.Backend.Name, Tool: c.Route.Name, RawTool: c.Route.Raw}
				return interceptor.Chain(ctx, c.Runtime.Interceptors, ic, func(ctx context.Context) (json.RawMessage, error) {
					return next(ctx, c)
				})
			}
		},
	}
}
