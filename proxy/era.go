package proxy

import (
	"context"
	"encoding/json"

	"github.com/mcp-mux/mcp-mux/seal"
	"github.com/mcp-mux/mcp-mux/upstream"
)

// The protocol era of one request, on the shared call path.
//
// A request is served by dispatch, callTool and forward whichever era it
// belongs to; what differs is decided by its era, a value built for each
// request: legacyEra for a request of a stateful session, *modernEra for a
// 2026-07-28 request (modern.go, fastpath_modern.go). The call path asks
// the era and never looks at a flag.

// era is what one request's protocol era decides on the shared call path.
type era interface {
	// Sink returns where what an upstream sends while serving the request
	// (of st, handled with ctx) goes.
	Sink(ctx context.Context, st *session) sink
	// RecordKey notes that st called upstreams as k.
	RecordKey(st *session, k upstream.Key)
	// Retry puts the client's answers to an earlier input_required into
	// the params going upstream.
	Retry(params json.RawMessage) json.RawMessage
	// Fulfil serves an upstream's input_required in raw (the answer to
	// params), sending the retries with send.
	Fulfil(ctx context.Context, k sink, params, raw json.RawMessage, send sendFunc) (json.RawMessage, error)
	// PassTask turns a server's own task in a call's result into the
	// caller's (sealed with states for user).
	PassTask(states *seal.Sealer, user string, r *route, raw json.RawMessage) (json.RawMessage, error)
	// Promoted reports whether st may call the deferred tool name.
	Promoted(st *session, cat *muxCatalog, name string) bool
	// Promote records the tools a tool_search returned to st and reports
	// whether st's tools/list changed.
	Promote(st *session, cat *muxCatalog, names []string) bool
	// TasksExt reports whether the request declared the tasks extension.
	TasksExt() bool
}

// sendFunc sends a request's params upstream and returns its raw result.
type sendFunc = func(context.Context, json.RawMessage) (json.RawMessage, error)

// legacyEra is the era of a request on a stateful (2025-11-25 and earlier)
// session: an upstream's input_required is asked live on the session
// (fulfil), the session records the (user, thread) keys it called with and
// the tools tool_search promoted for it.
type legacyEra struct{}

var _ era = legacyEra{}

// Sink returns an SDK Sink on the handler's context.
func (legacyEra) Sink(ctx context.Context, st *session) sink { return &sdkSink{ctx: ctx, st: st} }

// RecordKey records k on the session, for notifications and task events.
func (legacyEra) RecordKey(st *session, k upstream.Key) { st.useKey(k) }

// Retry leaves params: a legacy client never retries an input_required.
func (legacyEra) Retry(params json.RawMessage) json.RawMessage { return params }

// Fulfil asks the session live for the inputs (mrtr.go).
func (legacyEra) Fulfil(ctx context.Context, k sink, params, raw json.RawMessage, send sendFunc) (json.RawMessage, error) {
	return fulfil(ctx, k, params, raw, send)
}

// PassTask leaves raw: a legacy client never declared the tasks extension.
func (legacyEra) PassTask(_ *seal.Sealer, _ string, _ *route, raw json.RawMessage) (json.RawMessage, error) {
	return raw, nil
}

// Promoted reports whether the session Promoted name with tool_search.
func (legacyEra) Promoted(st *session, cat *muxCatalog, name string) bool {
	return st.Promo.Has(cat, name)
}

// Promote adds names to the session's promotions.
func (legacyEra) Promote(st *session, cat *muxCatalog, names []string) bool {
	return st.Promo.Add(cat, names)
}

// TasksExt is false: the extension is not part of the legacy era.
func (legacyEra) TasksExt() bool { return false }

// modernEra is the era of one 2026-07-28 request: it has no session to
// remember anything in (no keys, no promotions: its lists never depend on
// earlier calls), a retry carries the answers to an upstream's
// input_required, a call to a legacy upstream may run bridged, and a
// server's own task passes through when the request declared the tasks
// extension (modern_tasks.go).
type modernEra struct {
	bridge sink       // the bridged call's sink (mrtr.go), nil otherwise
	again  *mrtrRetry // a retry of an upstream's input_required, or nil
	tasks  bool       // the request declared the tasks extension
}

var _ era = (*modernEra)(nil)

// Sink returns the bridged call's Sink, or an SDK Sink on the handler's context.
func (e *modernEra) Sink(ctx context.Context, st *session) sink {
	if e.bridge != nil {
		return e.bridge
	}
	return &sdkSink{ctx: ctx, st: st}
}

// RecordKey does nothing: the request's session is gone when it is answered.
func (*modernEra) RecordKey(*session, upstream.Key) {}

// Retry applies the Retry's answers and the upstream's own state.
func (e *modernEra) Retry(params json.RawMessage) json.RawMessage { return e.again.apply(params) }

// Fulfil leaves raw: an input_required goes back to the client (mrtr.go).
func (*modernEra) Fulfil(_ context.Context, _ sink, _, raw json.RawMessage, _ sendFunc) (json.RawMessage, error) {
	return raw, nil
}

// PassTask namespaces a server's own task (modern_tasks.go).
func (e *modernEra) PassTask(states *seal.Sealer, user string, r *route, raw json.RawMessage) (json.RawMessage, error) {
	return passTask(states, e.tasks, user, r, raw)
}

// Promoted is true: a deferred tool needs no promotion (README: tool_search).
func (*modernEra) Promoted(*session, *muxCatalog, string) bool { return true }

// Promote records nothing.
func (*modernEra) Promote(*session, *muxCatalog, []string) bool { return false }

// TasksExt reports whether the request declared the tasks extension.
func (e *modernEra) TasksExt() bool { return e.tasks }
