package callpath

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/internal/taskpoll"
	"github.com/mcp-mux/mcp-mux/internal/wire"
	"github.com/mcp-mux/mcp-mux/internal/wire/mcpwire"
)

// request is one SDK-path request on its way through Dispatch.
type request struct {
	st     *Session
	e      Era
	method string
	req    mcp.Request
	next   mcp.MethodHandler
	cat    *Catalog
}

// handler serves one method of Dispatch (the handlers are functions of
// the Router, not its methods: the SDK path's table, not its API).
type handler func(s *Router, ctx context.Context, r request) (mcp.Result, error)

// handlers are the methods mcp-mux answers itself; the rest of the
// protocol is the SDK's (next).
var handlers = map[string]handler{
	"notifications/roots/list_changed": rootsChanged,
	"logging/setLevel":                 setLevel,
	"tools/list":                       listTools,
	"tools/call":                       callTool,
	"prompts/list":                     listPrompts,
	"resources/list":                   listResources,
	"resources/templates/list":         listTemplates,
	"prompts/get":                      getPrompt,
	"resources/read":                   resource,
	"resources/subscribe":              resource,
	"resources/unsubscribe":            resource,
	"completion/complete":              complete,
	"skills/list":                      listSkills,   // skills.go
	"skills/get":                       skillRequest, // skills.go
	"resources/directory/read":         skillRequest, // skills.go
}

// Dispatch serves one SDK-path request of st, of either era (e): tools,
// prompts, resources and completion go to the server that owns the name
// or URI; the rest goes to next.
func (s *Router) Dispatch(ctx context.Context, st *Session, e Era, method string, req mcp.Request, next mcp.MethodHandler) (mcp.Result, error) {
	h := handlers[method]
	if h == nil {
		return next(ctx, method, req)
	}
	rt := s.rt.Load()
	if strings.HasSuffix(method, "/list") {
		rt.RefreshStale(time.Now()) // lists past the TTL their servers gave
	}
	return h(s, ctx, request{st: st, e: e, method: method, req: req, next: next, cat: rt.View(st.Profile)})
}

// rootsChanged tells the servers the session's calls went to, then the SDK.
func rootsChanged(s *Router, ctx context.Context, r request) (mcp.Result, error) {
	for _, b := range s.rt.Load().Backends {
		for _, k := range r.st.UsedKeys() {
			b.Up.Notify(k, r.method, json.RawMessage(`{}`))
		}
	}
	return r.next(ctx, r.method, r.req)
}

// setLevel records the session's logging level, then lets the SDK answer.
func setLevel(s *Router, ctx context.Context, r request) (mcp.Result, error) {
	if p, ok := r.req.GetParams().(*mcp.SetLoggingLevelParams); ok {
		r.st.SetLevel(string(p.Level))
	}
	return r.next(ctx, r.method, r.req)
}

// listTools answers the session's tools/list (its promotions included).
func listTools(s *Router, _ context.Context, r request) (mcp.Result, error) {
	return &mcpwire.RawResult{Raw: r.st.ToolsList(r.cat)}, nil
}

// callTool runs a tools/call through the pipeline (ToolCall).
func callTool(s *Router, ctx context.Context, r request) (mcp.Result, error) {
	req := r.req.(*mcp.CallToolRequest)
	p := wire.CallParams{Name: req.Params.Name, Arguments: req.Params.Arguments}
	if m := req.Params.Meta; len(m) > 0 {
		p.Meta, _ = json.Marshal(m)
	}
	raw, err := s.Run(ctx, s.ToolCall(ctx, r.st, r.e, r.e.Sink(ctx, r.st), HeaderOf(r.req), &p))
	if err != nil {
		return nil, err
	}
	return &mcpwire.RawResult{Raw: raw}, nil
}

// listPrompts answers a page of prompts/list.
func listPrompts(s *Router, _ context.Context, r request) (mcp.Result, error) {
	return pageResult(r.cat.Prompts(), "prompts", cursorOf(r.req), s.pageSize)
}

// listResources answers a page of resources/list.
func listResources(s *Router, _ context.Context, r request) (mcp.Result, error) {
	return pageResult(r.cat.Resources(), "resources", cursorOf(r.req), s.pageSize)
}

// listTemplates answers a page of resources/templates/list.
func listTemplates(s *Router, _ context.Context, r request) (mcp.Result, error) {
	return pageResult(r.cat.Templates(), "resourceTemplates", cursorOf(r.req), s.pageSize)
}

// getPrompt forwards prompts/get to the prompt's server, under its own name.
func getPrompt(s *Router, ctx context.Context, r request) (mcp.Result, error) {
	p, _ := r.req.GetParams().(*mcp.GetPromptParams)
	if p == nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "missing params"}
	}
	return s.Forward(ctx, r.st, r.e, HeaderOf(r.req), nil, r.method, p)
}

// resource serves resources/read, subscribe and unsubscribe: a durable
// task's resource here, any other at the server that owns the URI.
func resource(s *Router, ctx context.Context, r request) (mcp.Result, error) {
	uri := uriOf(r.req.GetParams())
	if r.method != "resources/read" {
		return s.SubscribeURI(ctx, r.st, uri, r.method == "resources/subscribe")
	}
	if s.tasks != nil && strings.HasPrefix(uri, taskpoll.ResourcePrefix) {
		return s.taskResource(ctx, r.st, r.method, uri) // tasks.go
	}
	if strings.HasPrefix(uri, ResultsPrefix) {
		return s.guards.read(ctx, s.rt.Load(), CallerFrom(ctx).User, uri) // guards.go
	}
	return s.Forward(ctx, r.st, r.e, HeaderOf(r.req), nil, r.method, r.req.GetParams())
}

// SubscribeURI subscribes st to uri (on) or unsubscribes it where the
// resource lives: a durable task's here, any other at the server that
// owns the URI.
func (s *Router) SubscribeURI(ctx context.Context, st *Session, uri string, on bool) (mcp.Result, error) {
	method := "resources/unsubscribe"
	if on {
		method = "resources/subscribe"
	}
	if s.tasks != nil && strings.HasPrefix(uri, taskpoll.ResourcePrefix) {
		return s.taskResource(ctx, st, method, uri) // tasks.go
	}
	b := s.rt.Load().View(st.Profile).ResourceOwner(uri)
	if b == nil {
		return nil, &jsonrpc.Error{Code: -32002, Message: fmt.Sprintf("resource not found: %q", uri)}
	}
	if err := s.Subscribe(ctx, st, b, uri, on); err != nil {
		return nil, s.rpcError(ctx, b, method, err)
	}
	return &mcpwire.RawResult{Raw: json.RawMessage(`{}`)}, nil
}

// complete forwards completion/complete to the server of the prompt or
// resource it completes, under the prompt's own name.
func complete(s *Router, ctx context.Context, r request) (mcp.Result, error) {
	return s.Forward(ctx, r.st, r.e, HeaderOf(r.req), nil, r.method, r.req.GetParams())
}

// RequestIDHeader carries the JSON-RPC id of an SDK-path request from
// the HTTP handler that decoded it to the SDK's handlers (which the SDK does
// not give it). Set by mcp-mux only: a client's copy is removed.
const RequestIDHeader = "Mcp-Mux-Internal-Request-Id"

// HeaderOf returns the HTTP headers an SDK request arrived with, or nil.
func HeaderOf(req mcp.Request) http.Header {
	if ex := req.GetExtra(); ex != nil {
		return ex.Header
	}
	return nil
}

// cursorOf returns a list request's cursor.
func cursorOf(req mcp.Request) string {
	var p struct {
		Cursor string `json:"cursor"`
	}
	if b, err := json.Marshal(req.GetParams()); err == nil {
		_ = json.Unmarshal(b, &p)
	}
	return p.Cursor
}

// uriOf returns the URI of a resources/read, subscribe or unsubscribe.
func uriOf(params mcp.Params) string {
	switch p := params.(type) {
	case *mcp.ReadResourceParams:
		return p.URI
	case *mcp.SubscribeParams:
		return p.URI
	case *mcp.UnsubscribeParams:
		return p.URI
	}
	return ""
}

// pageResult is one page of items as a list result (Page).
func pageResult(items []json.RawMessage, field, cursor string, size int) (mcp.Result, error) {
	raw, err := Page(items, field, cursor, size)
	if err != nil {
		return nil, err
	}
	return &mcpwire.RawResult{Raw: raw}, nil
}
