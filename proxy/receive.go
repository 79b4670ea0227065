package proxy

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/internal/wire/mcpwire"
	"github.com/mcp-mux/mcp-mux/proxy/callpath"
	"github.com/mcp-mux/mcp-mux/taskpoll"
)

const (
	defaultUser   = "default"
	notifyTimeout = 10 * time.Second
)

var errBadCursor = &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "invalid cursor"}

// dispatch serves one request of st, of either era (e).
func (s *Server) dispatch(ctx context.Context, st *callpath.Session, e callpath.Era, method string, req mcp.Request, next mcp.MethodHandler) (mcp.Result, error) {
	cat := s.rt.Load().Catalog.Load()
	switch method {
	case "notifications/roots/list_changed":
		// Tell the servers this session's calls went to.
		for _, b := range s.rt.Load().Backends {
			for _, k := range st.UsedKeys() {
				b.Up.Notify(k, method, json.RawMessage(`{}`))
			}
		}
		return next(ctx, method, req)
	case "logging/setLevel":
		if p, ok := req.GetParams().(*mcp.SetLoggingLevelParams); ok {
			st.SetLevel(string(p.Level))
		}
		return next(ctx, method, req)
	case "tools/list":
		return &mcpwire.RawResult{Raw: st.Promo.ToolsList(cat)}, nil
	case "tools/call":
		r := req.(*mcp.CallToolRequest)
		var meta json.RawMessage
		if m := r.Params.Meta; len(m) > 0 {
			meta, _ = json.Marshal(m)
		}
		k := e.Sink(ctx, st)
		h := headerOf(req)
		raw, err := s.calls.CallTool(ctx, st, e, k, s.calls.CallerKey(st, e, h), h, r.Params.Name, r.Params.Arguments, meta)
		if err != nil {
			return nil, err
		}
		return &mcpwire.RawResult{Raw: raw}, nil
	case "prompts/list":
		return pageResult(cat.Prompts(), "prompts", cursorOf(req), s.opts.PageSize)
	case "resources/list":
		return pageResult(cat.Resources(), "resources", cursorOf(req), s.opts.PageSize)
	case "resources/templates/list":
		return pageResult(cat.Templates(), "resourceTemplates", cursorOf(req), s.opts.PageSize)
	case "prompts/get":
		p, _ := req.GetParams().(*mcp.GetPromptParams)
		if p == nil {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "missing params"}
		}
		r := cat.Prompt(p.Name)
		if r == nil {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("unknown prompt %q", p.Name)}
		}
		q := *p
		q.Name = r.Raw
		return s.calls.Forward(ctx, st, e, headerOf(req), r.Server, method, &q)
	case "resources/read", "resources/subscribe", "resources/unsubscribe":
		uri := uriOf(req.GetParams())
		if s.tasks != nil && strings.HasPrefix(uri, taskpoll.ResourcePrefix) {
			return s.taskResource(ctx, st, method, uri) // tasks.go
		}
		b := cat.ResourceOwner(uri)
		if b == nil {
			return nil, &jsonrpc.Error{Code: -32002, Message: fmt.Sprintf("resource not found: %q", uri)}
		}
		if method == "resources/read" {
			return s.calls.Forward(ctx, st, e, headerOf(req), b, method, req.GetParams())
		}
		if err := s.subscribe(ctx, st, b, uri, method == "resources/subscribe"); err != nil {
			return nil, s.calls.RPCError(ctx, b, method, err)
		}
		return &mcpwire.RawResult{Raw: json.RawMessage(`{}`)}, nil
	case "completion/complete":
		p, _ := req.GetParams().(*mcp.CompleteParams)
		if p == nil || p.Ref == nil {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "missing ref"}
		}
		q, ref := *p, *p.Ref
		q.Ref = &ref
		var b *callpath.Backend
		switch ref.Type {
		case "ref/prompt":
			if r := cat.Prompt(ref.Name); r != nil {
				b, ref.Name = r.Server, r.Raw
			}
		case "ref/resource":
			b = cat.ResourceOwner(ref.URI)
		}
		if b == nil {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("no server completes %s %q", ref.Type, ref.Name+ref.URI)}
		}
		return s.calls.Forward(ctx, st, e, headerOf(req), b, method, &q)
	}
	return next(ctx, method, req)
}

func headerOf(req mcp.Request) http.Header {
	if ex := req.GetExtra(); ex != nil {
		return ex.Header
	}
	return nil
}

func cursorOf(req mcp.Request) string {
	var p struct {
		Cursor string `json:"cursor"`
	}
	if b, err := json.Marshal(req.GetParams()); err == nil {
		_ = json.Unmarshal(b, &p)
	}
	return p.Cursor
}

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

func pageResult(items []json.RawMessage, field, cursor string, size int) (mcp.Result, error) {
	raw, err := page(items, field, cursor, size)
	if err != nil {
		return nil, err
	}
	return &mcpwire.RawResult{Raw: raw}, nil
}
