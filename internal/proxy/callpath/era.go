package callpath

import (
	"context"
	"encoding/json"

	"github.com/mcp-mux/mcp-mux/internal/seal"
	"github.com/mcp-mux/mcp-mux/internal/upstream"
)

// The protocol era of one request, on the call path.
//
// Each request carries an Era down the call path (Dispatch, ToolCall,
// Forward, CallerKey, the policy and tool_search): LegacyEra for a request
// of a stateful session, package modern's *Era for a 2026-07-28 request.
// The call path asks the era what differs and never looks at a flag.

// Era is what one request's protocol era decides on the shared call path.
type Era interface {
	// Sink returns where what an upstream sends while serving the request
	// (of st, handled with ctx) goes.
	Sink(ctx context.Context, st *Session) Sink
	// RecordKey notes that st called upstreams as k.
	RecordKey(st *Session, k upstream.Key)
	// Retry puts the client's answers to an earlier input_required into
	// the params going upstream.
	Retry(params json.RawMessage) json.RawMessage
	// Fulfil serves an upstream's input_required in raw (the answer to
	// params), sending the retries with send.
	Fulfil(ctx context.Context, k Sink, params, raw json.RawMessage, send SendFunc) (json.RawMessage, error)
	// PassTask turns a server's own task in a call's result into the
	// caller's (sealed with states for user).
	PassTask(states *seal.Sealer, user string, r *Route, raw json.RawMessage) (json.RawMessage, error)
	// Promoted reports whether st may call the deferred tool name.
	Promoted(st *Session, cat *Catalog, name string) bool
	// Promote records the tools a tool_search returned to st and reports
	// whether st's tools/list changed.
	Promote(st *Session, cat *Catalog, names []string) bool
	// TasksExt reports whether the request declared the tasks extension.
	TasksExt() bool
	// Version is the request's era as an upstream call session is keyed
	// by it (upstream.Key.Era): a server that speaks both eras serves the
	// request on its own.
	Version() string
}

// SendFunc sends a request's params upstream and returns its raw result.
type SendFunc = func(context.Context, json.RawMessage) (json.RawMessage, error)

// LegacyEra is the era of a request on a stateful (2025-11-25 and earlier)
// session: an upstream's input_required is asked live on the session
// (fulfil), the session records the (user, thread) keys it called with and
// the tools tool_search promoted for it.
type LegacyEra struct{}

var _ Era = LegacyEra{}

// Sink returns an SDK sink on the handler's context.
func (LegacyEra) Sink(ctx context.Context, st *Session) Sink { return &SDKSink{ctx: ctx, st: st} }

// RecordKey records k on the session, for notifications and task events.
func (LegacyEra) RecordKey(st *Session, k upstream.Key) { st.useKey(k) }

// Retry leaves params: a legacy client never retries an input_required.
func (LegacyEra) Retry(params json.RawMessage) json.RawMessage { return params }

// Fulfil asks the session live for the inputs (mrtr.go).
func (LegacyEra) Fulfil(ctx context.Context, k Sink, params, raw json.RawMessage, send SendFunc) (json.RawMessage, error) {
	return fulfil(ctx, k, params, raw, send)
}

// PassTask leaves raw: a legacy client never declared the tasks extension.
func (LegacyEra) PassTask(_ *seal.Sealer, _ string, _ *Route, raw json.RawMessage) (json.RawMessage, error) {
	return raw, nil
}

// Promoted reports whether the session promoted name with tool_search
// (on any replica: one not promoted here is checked in the record).
func (LegacyEra) Promoted(st *Session, cat *Catalog, name string) bool {
	if st.Promo.Has(cat, name) {
		return true
	}
	return st.Refresh != nil && st.Refresh() && st.Promo.Has(cat, name)
}

// Promote adds names to the session's promotions.
func (LegacyEra) Promote(st *Session, cat *Catalog, names []string) bool {
	return st.Promo.Add(cat, names)
}

// TasksExt is false: the extension is not part of the legacy era.
func (LegacyEra) TasksExt() bool { return false }

// Version is 2025-11-25: every legacy session's calls run on it.
func (LegacyEra) Version() string { return upstream.VersionLegacy }
