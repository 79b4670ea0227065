package callpath

import (
	"context"
	"encoding/json"

	"github.com/hashicorp/go-hclog"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// tool_search as the MCP surface serves it: package catalog matches the
// query and renders the result; the caller's era promotes what was
// returned (Era.Promote: a session does, a sessionless request does not)
// and the caller is sent notifications/tools/list_changed when that
// changed its tools/list.

// toolSearch answers a tool_search call for st.
func (s *Router) toolSearch(ctx context.Context, st *Session, e Era, k Sink, cat *Catalog, args json.RawMessage) json.RawMessage {
	res, names := cat.ToolSearch(args)
	if len(names) > 0 && e.Promote(st, cat, names) {
		if st.OnPromote != nil {
			if err := st.OnPromote(ctx, names); err != nil {
				s.logFor(ctx).Warn("recording tool_search promotions failed: other replicas do not see them", "err", err)
			}
		}
		notifyToolsChanged(ctx, s, st, k)
	}
	return res
}

// notifyToolsChanged tells only the calling session that its tools/list
// changed, on the call's own stream, before the result.
func notifyToolsChanged(ctx context.Context, s *Router, st *Session, k Sink) {
	const method = "notifications/tools/list_changed"
	if f, ok := k.(*FastSink); ok {
		f.Notify(method, json.RawMessage(`{}`))
		return
	}
	if w, ok := ctx.Value(writerKey{}).(ClientWriter); ok { // a session's SDK-path request
		_ = w.Write(ctx, &jsonrpc.Request{Method: method, Params: json.RawMessage(`{}`)})
		return
	}
	Notify(ctx, st.Send, st.Server(), method, nil, s.log)
}

// Notify sends one notification to one SDK session through send (the SDK's
// sending handler): on the stream of the request whose handler context ctx
// is, else on the standalone stream; within NotifyTimeout. Methods other
// than the list_changed ones and resources/updated are not sent.
func Notify(ctx context.Context, send mcp.MethodHandler, ss *mcp.ServerSession, method string, params mcp.Params, log hclog.Logger) {
	if send == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, NotifyTimeout)
	defer cancel()
	var req mcp.Request
	switch method {
	case "notifications/tools/list_changed":
		req = &mcp.ServerRequest[*mcp.ToolListChangedParams]{Session: ss, Params: &mcp.ToolListChangedParams{}}
	case "notifications/prompts/list_changed":
		req = &mcp.ServerRequest[*mcp.PromptListChangedParams]{Session: ss, Params: &mcp.PromptListChangedParams{}}
	case "notifications/resources/list_changed":
		req = &mcp.ServerRequest[*mcp.ResourceListChangedParams]{Session: ss, Params: &mcp.ResourceListChangedParams{}}
	case "notifications/resources/updated":
		p, _ := params.(*mcp.ResourceUpdatedNotificationParams)
		req = &mcp.ServerRequest[*mcp.ResourceUpdatedNotificationParams]{Session: ss, Params: p}
	default:
		return
	}
	if _, err := send(ctx, method, req); err != nil {
		log.Debug("notification not delivered", "method", method, "session", ss.ID(), "err", err)
	}
}
