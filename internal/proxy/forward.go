package proxy

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/internal/proxy/callpath"
	"github.com/mcp-mux/mcp-mux/internal/proxy/modern"
	"github.com/mcp-mux/mcp-mux/internal/proxy/sessions"
	"github.com/mcp-mux/mcp-mux/internal/upstream"
	"github.com/mcp-mux/mcp-mux/internal/wire"
)

// forwarder is the upstream.Handler of every upstream: it routes what
// upstream servers send on call sessions outside any call to the
// downstream sessions they belong to. (What they send during a call goes
// to that call's sink, passed down with it: callpath/sink.go.)
type forwarder struct {
	sessions *sessions.Table
	modern   *modern.Handler // listeners of resource updates
}

var _ upstream.Handler = (*forwarder)(nil)

// ServerNotification delivers an upstream's notification to the sessions
// it belongs to.
func (s *forwarder) ServerNotification(_ context.Context, key upstream.Key, method string, params json.RawMessage) {
	switch method {
	case "notifications/message":
		for _, st := range s.sessions.WithKey(key) {
			s.sessions.Notify(st, method, params)
		}
	case "notifications/resources/updated":
		var p mcp.ResourceUpdatedNotificationParams
		if json.Unmarshal(params, &p) != nil {
			return
		}
		// Subscriptions live on the owner's discovery session (Upstream.Subscribe):
		// every session that subscribed to the URI here gets the update.
		for _, st := range s.sessions.All() {
			if st.Subs.Has(p.URI) {
				s.sessions.Notify(st, method, params)
			}
		}
		s.modern.ResourceUpdated(&p)
	}
}

// ServerRequest forwards an upstream's request to the client of a session
// it belongs to.
func (s *forwarder) ServerRequest(ctx context.Context, key upstream.Key, method string, params json.RawMessage) (json.RawMessage, error) {
	for _, st := range s.sessions.WithKey(key) {
		return callpath.SessionRequest(ctx, st, method, params)
	}
	return nil, &wire.Error{Code: -32603, Message: fmt.Sprintf("no client session is waiting for %s", method)}
}
