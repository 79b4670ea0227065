package callpath

import (
	"context"
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// tool_search as the MCP surface serves it: package catalog matches the
// query and renders the result; the caller's era promotes what was
// returned (era.promote: a session does, a sessionless request does not)
// and the caller is sent notifications/tools/list_changed when that
// changed its tools/list.

// toolSearch answers a tool_search call for st.
func (s *Router) toolSearch(ctx context.Context, st *Session, e Era, k Sink, cat *Catalog, args json.RawMessage) json.RawMessage {
	res, names := cat.ToolSearch(args)
	if len(names) > 0 && e.Promote(st, cat, names) {
		notifyToolsChanged(ctx, s, st, k)
	}
	return res
}

// notifyToolsChanged tells only the calling session that its tools/list
// changed, on the call's own stream, before the result.
func notifyToolsChanged(ctx context.Context, s *Router, st *Session, k Sink) {
	if f, ok := k.(*FastSink); ok {
		f.Notify("notifications/tools/list_changed", json.RawMessage(`{}`))
		return
	}
	if st.Send == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, notifyTimeout)
	defer cancel()
	const method = "notifications/tools/list_changed"
	req := &mcp.ServerRequest[*mcp.ToolListChangedParams]{Session: st.SS, Params: &mcp.ToolListChangedParams{}}
	if _, err := st.Send(ctx, method, req); err != nil {
		s.log.Debug("notification not delivered", "method", method, "session", st.SS.ID(), "err", err)
	}
}
