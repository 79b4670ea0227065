package callpath

import (
	"context"
	"encoding/json"

	"github.com/mcp-mux/mcp-mux/internal/catalog"
)

// policy answers the calls mcp-mux decides itself, before anything is
// forwarded: tool_search, guardrail-denied tools and deferred tools the
// session has not promoted (package catalog decides which). It reports
// whether it handled the call; r is the catalog route for name, or nil.
func (s *Router) policy(ctx context.Context, st *Session, e Era, k Sink, cat *Catalog, r *Route, name string, args json.RawMessage) (json.RawMessage, bool) {
	switch {
	case r == nil:
		if cat.Searching() && name == catalog.ToolSearchName {
			return s.toolSearch(ctx, st, e, k, cat, args), true
		}
		return nil, false
	case r.Deny != nil:
		s.logFor(ctx).Info("guardrail denied a tool call", "tool", name, "session", st.ID)
		return r.Deny, true
	case cat.Searching() && !e.Promoted(st, cat, name):
		// A deferred tool the caller's era wants promoted first.
		return catalog.DeferredError(name), true
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
