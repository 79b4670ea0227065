package proxy

import (
	"context"
	"errors"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/mcp-mux/mcp-mux/internal/proxy/callpath"
	"github.com/mcp-mux/mcp-mux/internal/wire"
)

// serveSkill answers, through calls, a request of the skills extension (skills/list,
// skills/get, resources/directory/read) of a 2025-11-25 session, as one
// event on the POST's stream like the fast path's answers, and reports
// whether it did. A 2026-07-28 request reaches the same handlers through
// the SDK path (callpath/skills.go).
func serveSkill(calls *callpath.Router, w http.ResponseWriter, r *http.Request, st *callpath.Session, m *wire.Message) bool {
	if !m.IsCall() || !callpath.IsSkillMethod(m.Method) {
		return false
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	idKey := string(m.ID)
	st.Track(idKey, cancel)
	defer st.Untrack(idKey)
	k := callpath.NewFastSink(st, w)
	k.Resumable(m.ID)
	raw, err := callpath.ServeSkill(ctx, calls, st, r.Header, m.Method, m.Params)
	var b []byte
	var je *jsonrpc.Error
	switch {
	case err == nil:
		b = wire.AppendResult(nil, m.ID, raw)
	case errors.As(err, &je):
		b = wire.AppendError(nil, m.ID, je.Code, je.Message, je.Data)
	case errors.Is(err, context.Canceled):
		b = wire.AppendError(nil, m.ID, jsonrpc.CodeInternalError, "request cancelled", nil)
	default:
		b = wire.AppendError(nil, m.ID, jsonrpc.CodeInternalError, "internal error", nil)
	}
	k.Finish(b)
	return true
}
