package modern

import (
	"context"
	"encoding/json"

	"github.com/mcp-mux/mcp-mux/internal/proxy/callpath"
	"github.com/mcp-mux/mcp-mux/internal/seal"
	"github.com/mcp-mux/mcp-mux/internal/upstream"
)

// The protocol era of one request, on the shared call path.
//
// A request is served by callpath's Dispatch, CallTool and Forward
// whichever era it belongs to; what differs is decided by its era
// (callpath.Era), a value built for each request: callpath.LegacyEra for a
// request of a stateful session, *Era for a 2026-07-28 request (modern.go,
// fastpath.go). The call path asks the era and never looks at a flag.

// Era is the era of one 2026-07-28 request: it has no session to
// remember anything in (no keys, no promotions: its lists never depend on
// earlier calls), a retry carries the answers to an upstream's
// input_required, a call to a legacy upstream may run bridged, and a
// server's own task passes through when the request declared the tasks
// extension (tasks.go).
type Era struct {
	bridge callpath.Sink // the bridged call's sink (mrtr.go), nil otherwise
	again  *mrtrRetry    // a retry of an upstream's input_required, or nil
	tasks  bool          // the request declared the tasks extension
}

var _ callpath.Era = (*Era)(nil)

// Sink returns the bridged call's Sink, or an SDK Sink on the handler's context.
func (e *Era) Sink(ctx context.Context, st *callpath.Session) callpath.Sink {
	if e.bridge != nil {
		return e.bridge
	}
	return callpath.NewSDKSink(ctx, st)
}

// RecordKey does nothing: the request's session is gone when it is answered.
func (*Era) RecordKey(*callpath.Session, upstream.Key) {}

// Retry applies the Retry's answers and the upstream's own state.
func (e *Era) Retry(params json.RawMessage) json.RawMessage { return e.again.apply(params) }

// Fulfil leaves raw: an input_required goes back to the client (mrtr.go).
func (*Era) Fulfil(_ context.Context, _ callpath.Sink, _, raw json.RawMessage, _ callpath.SendFunc) (json.RawMessage, error) {
	return raw, nil
}

// PassTask namespaces a server's own task (tasks.go).
func (e *Era) PassTask(states *seal.Sealer, user string, r *callpath.Route, raw json.RawMessage) (json.RawMessage, error) {
	return passTask(states, e.tasks, user, r, raw)
}

// Promoted is true: a deferred tool needs no promotion (README: tool_search).
func (*Era) Promoted(*callpath.Session, *callpath.Catalog, string) bool { return true }

// Promote records nothing.
func (*Era) Promote(*callpath.Session, *callpath.Catalog, []string) bool { return false }

// TasksExt reports whether the request declared the tasks extension.
func (e *Era) TasksExt() bool { return e.tasks }

// Version is 2026-07-28.
func (*Era) Version() string { return upstream.VersionModern }
