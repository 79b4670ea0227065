package proxy

import (
	"context"
	"encoding/json"

	"github.com/mcp-mux/mcp-mux/internal/panicguard"
	"github.com/mcp-mux/mcp-mux/internal/upstream"
)

// Panics: one request must never end the process (internal/panicguard
// recovers, logs and counts them). Here are the guards around what only
// the proxy knows: the upstream.Handler and the fast paths' tool calls.

// guardedHandler is an upstream.Handler whose panics are caught: a
// server-to-client request the mux fails to forward is the upstream's
// internal error, a notification is dropped.
type guardedHandler struct {
	g    *panicguard.Guard
	next upstream.Handler
}

var _ upstream.Handler = guardedHandler{}

// ServerRequest forwards an upstream's request to the client, recovering a panic.
func (h guardedHandler) ServerRequest(ctx context.Context, key upstream.Key, method string, params json.RawMessage) (_ json.RawMessage, err error) {
	defer h.g.Catch(panicguard.Upstream, &err)
	return h.next.ServerRequest(ctx, key, method, params)
}

// ServerNotification forwards an upstream's notification, recovering a panic.
func (h guardedHandler) ServerNotification(ctx context.Context, key upstream.Key, method string, params json.RawMessage) {
	defer h.g.Catch(panicguard.Upstream, nil)
	h.next.ServerNotification(ctx, key, method, params)
}
