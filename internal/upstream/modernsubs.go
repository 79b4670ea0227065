package upstream

import (
	"context"
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/internal/wire"
)

// Resource subscriptions on a 2026-07-28 server.
//
// The revision has no resources/subscribe: a client names resource URIs in
// a subscriptions/listen, and the server sends their
// notifications/resources/updated on that stream, each tagged with the
// listen's id. mcp-mux holds one listen per URI on the discovery session
// (the SDK session opens it, ClientSession.Subscribe, and ends it,
// Unsubscribe: notifications/cancelled over stdio, closing the stream over
// HTTP), while any downstream session or listener wants the URI; there are
// at most MaxResourceListens.

// MaxResourceListens bounds the resource subscriptions, each a
// subscriptions/listen stream, mcp-mux holds on one 2026-07-28 server.
const MaxResourceListens = 64

// listenResource opens (on) or ends the listen for uri on c. A server that
// does not offer subscriptions is not asked.
func listenResource(ctx context.Context, c *conn, uri string, on bool) error {
	if !on {
		return c.cs.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: uri})
	}
	if caps := c.cs.InitializeResult().Capabilities; caps == nil || caps.Resources == nil || !caps.Resources.Subscribe {
		return &wire.Error{Code: jsonrpc.CodeMethodNotFound, Message: "the server does not offer resource subscriptions"}
	}
	return c.cs.Subscribe(ctx, &mcp.SubscribeParams{URI: uri})
}

// dropSubscriptionID removes the upstream's listen id from a notification's
// _meta: it means nothing to mcp-mux's clients, whose listeners get their own.
func dropSubscriptionID(params json.RawMessage) json.RawMessage {
	const key = "io.modelcontextprotocol/subscriptionId"
	return wire.DropMeta(params, key, func(k string) bool { return k == key })
}
