// Calls: requests and notifications a caller sends on its pooled session.

package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/mcp-mux/mcp-mux/internal/reqid"
	"github.com/mcp-mux/mcp-mux/internal/telemetry"
	"github.com/mcp-mux/mcp-mux/internal/wire"
)

// scope reduces a caller key to the configured session scope.
func (o *Options) scope(k Key) Key {
	switch o.Scope {
	case ScopeShared:
		return Key{Cred: k.Cred, Caps: k.Caps, Era: k.Era}
	case ScopeUser:
		return Key{User: k.User, Cred: k.Cred, Caps: k.Caps, Era: k.Era}
	}
	return k
}

// CallTool calls tools/call with call's raw params on the session for
// call.Key and returns the raw CallToolResult, bounded by CallTimeout. A
// tool error result (isError) is scrubbed as errors are (package credscrub).
func (u *Upstream) CallTool(ctx context.Context, call Call) (json.RawMessage, error) {
	if u.opts.CallTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, u.opts.CallTimeout)
		defer cancel()
		raw, err := u.Request(ctx, "tools/call", call)
		if err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
			if errors.Is(err, errAllBusy) {
				return nil, fmt.Errorf("tool call timed out after %s waiting for a free session (all %d are busy)", u.opts.CallTimeout, u.opts.MaxSessions)
			}
			return nil, fmt.Errorf("tool call timed out after %s", u.opts.CallTimeout)
		}
		return u.scrubs.ToolError(raw, call.Header), err
	}
	raw, err := u.Request(ctx, "tools/call", call)
	return u.scrubs.ToolError(raw, call.Header), err
}

// Request sends method with call's raw params on the session for call.Key
// and returns the raw result. A JSON-RPC error from the server is returned
// as *wire.Error; anything else is a transport failure. A request that
// provably did not reach the server (dead stdio process, expired HTTP
// session) is retried once on a fresh session. What the server sends while
// serving it goes to call.Sink (returnpath.go).
//
// call.Header, when non-nil, is the complete header set of the caller: it
// is sent with this request and, when the request opens a new session,
// with that session's own HTTP requests (initialize, the event stream,
// DELETE), since servers bind sessions to the credentials that opened
// them. Callers with different credentials must use different keys
// (Key.Cred).
func (u *Upstream) Request(ctx context.Context, method string, call Call) (json.RawMessage, error) {
	key := u.opts.scope(call.Key)
	if call.Header != nil {
		ctx = withHeaders(ctx, call.Header)
	}
	r := newCallRoute(ctx, &call)
	for attempt := 0; ; attempt++ {
		raw, notRun, err := u.attempt(ctx, key, method, call.Params, call.Header, r)
		if !notRun || attempt > 0 {
			return DropServerInfo(raw), err
		}
		u.reconnects.Add(1)
		telemetry.Event(ctx, "mcp_mux.upstream.reconnect", telemetry.ServerAttr.String(u.opts.Name))
		u.logFor(ctx).Debug("upstream session gone before the request; reconnecting", "reason", err)
	}
}

// attempt sends the request once, on a pooled session it hands back (or
// drops, when the session is gone), for call r. notRun reports a failure
// that provably did not reach the server: the request may be retried on a
// fresh session. Errors are scrubbed, but for the caller's own cancellation.
func (u *Upstream) attempt(ctx context.Context, key Key, method string, params json.RawMessage, extra http.Header, r *callRoute) (_ json.RawMessage, notRun bool, _ error) {
	c, err := u.pool.get(ctx, key)
	if err != nil {
		return nil, false, u.scrubs.Error(err, extra)
	}
	start := time.Now()
	ctx, span := u.clientSpan(ctx, c, method, params) // trace.go
	params = u.opts.Telemetry.InjectMeta(ctx, params)
	raw, err := c.request(ctx, u, method, params, extra, r)
	span.End(err, err == nil && method == "tools/call" && wire.IsToolError(raw))
	if err == nil {
		u.pool.release(key, c)
		return raw, false, nil
	}
	var rpcErr *wire.Error
	if errors.As(err, &rpcErr) {
		u.pool.release(key, c)
		return nil, false, u.scrubs.Error(err, extra)
	}
	if ctx.Err() != nil {
		u.pool.release(key, c)
		return nil, false, ctx.Err()
	}
	notRun = c.notRun(err, start)
	if notRun || !c.alive() {
		u.pool.drop(key, c)
	} else {
		u.pool.release(key, c)
	}
	return nil, notRun, u.scrubs.Error(err, extra)
}

// logFor is the logger for a line about a call made with ctx: it names the
// downstream request's id (internal/reqid) when ctx carries one.
func (u *Upstream) logFor(ctx context.Context) hclog.Logger { return reqid.Logger(ctx, u.log) }

// Notify sends a notification on the session for key, if one is open. It
// is how a client's notifications/roots/list_changed reaches the servers its
// calls went to.
func (u *Upstream) Notify(key Key, method string, params json.RawMessage) {
	c := u.pool.peek(u.opts.scope(key))
	if c == nil || !c.alive() {
		return
	}
	if c.direct != nil {
		body := wire.AppendNotification(nil, method, params)
		u.async.Go(func() { c.direct.post(body) })
		return
	}
	ctx, cancel := context.WithTimeout(u.ctx, 5*time.Second)
	defer cancel()
	_ = c.raw.Connection.Write(ctx, &jsonrpc.Request{Method: method, Params: params})
}

// metaServerInfo is the _meta key in which a 2026-07-28 server names
// itself on each result (SEP-2575; go-sdk sets it on every one).
const metaServerInfo = "io.modelcontextprotocol/serverInfo"

// DropServerInfo returns raw without _meta's serverInfo member; raw
// itself when it has none or is not a JSON object. Request drops it from
// every result: the caller's server is mcp-mux, not the upstream. Only
// _meta is decoded and rewritten in place (a 2026-07-28 server puts the
// member on every result, large ones included); a result without the key
// costs one byte search.
func DropServerInfo(raw json.RawMessage) json.RawMessage {
	if !bytes.Contains(raw, []byte(metaServerInfo)) {
		return raw
	}
	var meta []byte // the last _meta, as a decoder takes it
	wire.MemberValues(raw, func(name string, v []byte) bool {
		if name == "_meta" {
			meta = v
		}
		return true
	})
	var members map[string]json.RawMessage
	if meta == nil || json.Unmarshal(meta, &members) != nil || members[metaServerInfo] == nil {
		return raw
	}
	delete(members, metaServerInfo)
	kept, err := json.Marshal(members)
	if err != nil {
		return raw
	}
	start := cap(raw) - cap(meta) // meta is a slice of raw
	out := make([]byte, 0, len(raw)-len(meta)+len(kept))
	out = append(append(append(out, raw[:start]...), kept...), raw[start+len(meta):]...)
	return out
}
