package proxy

import (
	"context"
	"encoding/json"
)

// tool_search as the MCP surface serves it: package catalog matches the
// query and renders the result; the caller's era promotes what was
// returned (era.promote: a session does, a sessionless request does not)
// and the caller is sent notifications/tools/list_changed when that
// changed its tools/list.

// toolSearch answers a tool_search call for st.
func (s *Server) toolSearch(ctx context.Context, st *session, e era, k sink, cat *muxCatalog, args json.RawMessage) json.RawMessage {
	res, names := cat.ToolSearch(args)
	if len(names) > 0 && e.Promote(st, cat, names) {
		notifyToolsChanged(ctx, s, st, k)
	}
	return res
}

// notifyToolsChanged tells only the calling session that its tools/list
// changed, on the call's own stream, before the result.
func notifyToolsChanged(ctx context.Context, s *Server, st *session, k sink) {
	if f, ok := k.(*fastSink); ok {
		f.Notify("notifications/tools/list_changed", json.RawMessage(`{}`))
		return
	}
	s.notify(ctx, st.SS, "notifications/tools/list_changed", nil)
}
