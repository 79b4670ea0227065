package callpath

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/mcp-mux/mcp-mux/internal/catalog"
)

// policyStage answers the tools/calls mcp-mux decides itself, before
// anything is forwarded: tool_search, guardrail-denied tools, deferred
// tools the session has not promoted (package catalog decides which),
// unknown names, and mcp-mux's own task tools (list, get and cancel a
// durable task).
func policyStage(s *Router) Stage {
	return Stage{
		Name:    "policy",
		Methods: ToolCall,
		Wrap: func(next CallFunc) CallFunc {
			return func(ctx context.Context, c *Call) (json.RawMessage, error) {
				if res, done := s.policy(ctx, c); done {
					if c.Route != nil {
						c.Record.Deny(denial(c.Route))
					}
					return res, nil
				}
				switch r := c.Route; {
				case r == nil:
					return nil, errUnknownTool(c.Name)
				case r.Builtin && r.Name == ConnectAccountName: // accounts.go
					// Answered before the outcome stage: its refusal
					// (-32042) is unwrapped here.
					res, err := s.connectAccount(ctx, c)
					if rf, ok := errors.AsType[refusal](err); ok {
						return nil, rf.err
					}
					return res, err
				case r.Builtin: // tasks.go
					return s.builtinTask(ctx, c.Session, c.Key, c.Name, c.Args), nil
				}
				return next(ctx, c)
			}
		},
	}
}

// policy answers a call mcp-mux decides itself and reports whether it
// did: tool_search, a guardrail's denial, a deferred tool not promoted.
func (s *Router) policy(ctx context.Context, c *Call) (json.RawMessage, bool) {
	st, cat, r := c.Session, c.View, c.Route
	switch {
	case r == nil:
		if cat.Searching() && c.Name == catalog.ToolSearchName {
			return s.toolSearch(ctx, st, c.Era, c.Sink, cat, c.Args), true
		}
		return nil, false
	case r.Deny != nil:
		s.logFor(ctx).Info("guardrail denied a tool call", "tool", c.Name, "session", st.ID)
		return r.Deny, true
	case cat.Searching() && !cat.AlwaysListed(c.Name) && !c.Era.Promoted(st, cat, c.Name):
		// A deferred tool the caller's era wants promoted first.
		return catalog.DeferredError(c.Name), true
	}
	return nil, false
}

// denial names why policy refused a call of r: "guardrail" or, for a
// deferred tool not yet promoted, "tool_search".
func denial(r *Route) string {
	if r.Deny != nil {
		return "guardrail"
	}
	return "tool_search: not promoted"
}

// errUnknownTool is the JSON-RPC error for a name not in the catalog.
func errUnknownTool(name string) *jsonrpc.Error {
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("unknown tool %q", name)}
}
