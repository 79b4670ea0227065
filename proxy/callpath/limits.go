package callpath

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/mcp-mux/mcp-mux/ratelimit"
	"github.com/mcp-mux/mcp-mux/taskpoll"
)

// The limits step: every request a caller makes mcp-mux forward is checked
// against the limits rules before it goes upstream — a tools/call in
// routeCall, everything Forward sends (prompts/get, resources/read,
// completion/complete, the tasks extension's requests for a server's own
// task), and each resource subscription (AdmitSubscribe: a 2025-11-25
// resources/subscribe, each URI of a 2026-07-28 subscriptions/listen).
// Unsubscribing gives back and is never refused. A tools/call past a rule
// gets a tool error result, anything else the JSON-RPC error CodeLimited.

// CodeLimited is the JSON-RPC error code of a request other than
// tools/call refused by a limits rule (a tools/call gets a tool error
// result instead); its data carries the rule and retryAfter in seconds.
const CodeLimited = -32029

// admitLimits checks a request of st to server against the limits rules:
// a tools/call of tool, or (tool "") a request of method.
func (s *Router) admitLimits(ctx context.Context, st *Session, server, tool, method string) ratelimit.Decision {
	return s.limits.Admit(ctx, ratelimit.Call{Caller: st.User, Server: server, Tool: tool, Method: method})
}

// AdmitSubscribe is the limits step of st's resources/subscribe of uri:
// one request to the server that owns it in st's view (AdmitForward). A
// URI no server owns, or a durable task's, is not forwarded and not
// checked.
func (s *Router) AdmitSubscribe(ctx context.Context, st *Session, uri string) (release func(), refused *jsonrpc.Error) {
	if s.tasks != nil && strings.HasPrefix(uri, taskpoll.ResourcePrefix) {
		return func() {}, nil
	}
	b := s.rt.Load().Catalog.Load().For(st.Profile).ResourceOwner(uri)
	if b == nil {
		return func() {}, nil
	}
	return s.AdmitForward(ctx, st, b, "resources/subscribe")
}

// AdmitForward is the limits step of a request of method that st makes
// mcp-mux send to b outside Forward (a resource subscription). Refused,
// it returns the CodeLimited error; admitted, call release once b has
// answered.
func (s *Router) AdmitForward(ctx context.Context, st *Session, b *Backend, method string) (release func(), refused *jsonrpc.Error) {
	d := s.admitLimits(ctx, st, b.Name, "", method)
	if !d.Allowed {
		return nil, limitError(&d)
	}
	return d.Release, nil
}

// limitError is the JSON-RPC error of a refusal d.
func limitError(d *ratelimit.Decision) *jsonrpc.Error {
	data, _ := json.Marshal(struct {
		Limit      string `json:"limit"`
		Kind       string `json:"kind"`
		RetryAfter int    `json:"retryAfter"`
	}{d.Rule, d.Kind, d.RetryAfterSeconds()})
	return &jsonrpc.Error{Code: CodeLimited, Message: d.Message, Data: data}
}
