package proxy

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/internal/wire"
	"github.com/mcp-mux/mcp-mux/proxy/callpath"
	"github.com/mcp-mux/mcp-mux/upstream"
)

// forwarder is the Server seen as the upstream.Handler: it routes what
// upstream servers send on call sessions to the downstream session (and,
// where known, the request) they belong to.
type forwarder Server

var _ upstream.Handler = (*forwarder)(nil)

func (f *forwarder) ServerNotification(ctx context.Context, key upstream.Key, method string, params json.RawMessage) {
	s := (*Server)(f)
	switch method {
	case "notifications/progress":
		// The upstream session delivers it only with its call's context (sink.go).
		callpath.DeliverProgress(ctx, params)
	case "notifications/message":
		if k := callpath.SinkFrom(ctx); k != nil {
			k.Notify(method, params)
			return
		}
		for _, st := range s.sessionsWithKey(key) {
			callpath.DeliverNotification(context.Background(), st, method, params)
		}
	case "notifications/resources/updated":
		var p mcp.ResourceUpdatedNotificationParams
		if json.Unmarshal(params, &p) != nil {
			return
		}
		// Subscriptions live on the owner's discovery session (Upstream.Subscribe):
		// every session that subscribed to the URI gets the update.
		for _, ss := range s.sessions.all() {
			if st := s.sessions.get(ss); st != nil && st.Subs.Has(p.URI) {
				s.notify(context.Background(), ss, method, &p)
			}
		}
		s.modern.ResourceUpdated(&p)
	}
}

func (f *forwarder) ServerRequest(ctx context.Context, key upstream.Key, method string, params json.RawMessage) (json.RawMessage, error) {
	s := (*Server)(f)
	if k := callpath.SinkFrom(ctx); k != nil {
		return k.Request(ctx, method, params)
	}
	for _, st := range s.sessionsWithKey(key) {
		return callpath.SessionRequest(ctx, st, method, params)
	}
	return nil, &wire.Error{Code: -32603, Message: fmt.Sprintf("no client session is waiting for %s", method)}
}

// sessionsWithKey returns the downstream sessions that called upstreams as key.
func (s *Server) sessionsWithKey(key upstream.Key) []*callpath.Session {
	var out []*callpath.Session
	for _, ss := range s.sessions.all() {
		if st := s.sessions.get(ss); st != nil && st.HasKey(key) {
			out = append(out, st)
		}
	}
	return out
}
