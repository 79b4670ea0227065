package callpath

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/internal/panicguard"
	"github.com/mcp-mux/mcp-mux/internal/secret"
	"github.com/mcp-mux/mcp-mux/internal/taskpoll"
	"github.com/mcp-mux/mcp-mux/internal/telemetry"
	"github.com/mcp-mux/mcp-mux/internal/upstream"
	"github.com/mcp-mux/mcp-mux/internal/wire"
	"github.com/mcp-mux/mcp-mux/internal/wire/mcpwire"
)

// tasksStage is the tools/call's durable task, if any: a submit tool's
// call runs, from here on, as a durable task (package taskpoll) and the
// caller gets the task; any other call's result that is a server's own
// task becomes the caller's (Era.PassTask).
func tasksStage(s *Router) Stage {
	return Stage{
		Name:    "tasks",
		Methods: ToolCall,
		Wrap: func(next CallFunc) CallFunc {
			return func(ctx context.Context, c *Call) (json.RawMessage, error) {
				if c.Route.Task != nil {
					bg := *c // the task's work may outlive the call: it runs on its own copy
					return s.submitTask(ctx, c.Session, c.Era, c.Key, c.Route, func(ctx context.Context) (json.RawMessage, error) {
						return next(ctx, &bg)
					})
				}
				raw, err := next(ctx, c)
				if err == nil {
					raw, err = c.Era.PassTask(c.Runtime.States, c.Session.User, c.Route, raw)
				}
				return raw, err
			}
		},
	}
}

// submitTask submits a submit tool's call as a durable task: run is the
// rest of its pipeline (interceptors included). The task is DeerFlow's
// tool result, or for a caller with the tasks extension CreateTaskResult.
func (s *Router) submitTask(ctx context.Context, st *Session, e Era, key upstream.Key, r *Route, run func(context.Context) (json.RawMessage, error)) (json.RawMessage, error) {
	var upErr error
	t, raw, err := s.tasks.SubmitTask(ctx, taskpoll.SubmitRequest{User: st.User, Thread: key.Thread, Server: r.Server.Name, Toolset: *r.Task,
		Trace: s.tel.Traceparent(ctx)}, // the polls' spans link to the submit's
		func(ctx context.Context) (json.RawMessage, error) {
			raw, err := run(ctx)
			upErr = err
			return raw, err
		})
	if _, capped := errors.AsType[*taskpoll.ActiveLimitError](err); capped {
		// The caller's own limit, checked before the upstream is called:
		// a tool error in both eras (no task was created), not worth a warning.
		s.logFor(ctx).Debug("durable task submit refused: active task cap", "server", r.Server.Name, "tool", r.Raw)
		return wire.ToolError(err.Error()), nil
	}
	if err != nil && (upErr == nil || !errors.Is(err, upErr)) {
		s.logFor(ctx).Warn("durable task submit failed", "server", r.Server.Name, "tool", r.Raw, "err", err)
		return wire.ToolError(err.Error()), nil
	}
	switch {
	case t == nil:
		return raw, err // the upstream's own error result, or its error
	case e.TasksExt():
		return s.createTaskResult(t), nil // the tasks extension's CreateTaskResult
	}
	return taskpoll.SubmitResult(t), nil
}

// builtinTask answers a built-in task tool.
func (s *Router) builtinTask(ctx context.Context, st *Session, key upstream.Key, name string, args json.RawMessage) json.RawMessage {
	raw, _ := s.tasks.CallBuiltin(ctx, st.User, key.Thread, name, args)
	return raw
}

// createTaskResult is a submit's answer to a caller with the extension.
func (s *Router) createTaskResult(t *taskpoll.Task) json.RawMessage {
	b, _ := json.Marshal(s.tasks.ExtensionView(t))
	return append([]byte(`{"resultType":"task",`), b[1:]...)
}

// taskResource answers resources/read, subscribe and unsubscribe for a
// task resource of the session's user.
func (s *Router) taskResource(ctx context.Context, st *Session, method, uri string) (mcp.Result, error) {
	if _, err := s.tasks.Get(ctx, st.User, strings.TrimPrefix(uri, taskpoll.ResourcePrefix)); err != nil {
		if errors.Is(err, taskpoll.ErrNotFound) {
			return nil, &jsonrpc.Error{Code: -32002, Message: fmt.Sprintf("resource not found: %q", uri)}
		}
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the durable task store is unavailable"}
	}
	switch method {
	case "resources/read":
		raw, err := s.tasks.ReadResource(ctx, st.User, uri)
		if err != nil {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the durable task store is unavailable"}
		}
		return &mcpwire.RawResult{Raw: raw}, nil
	case "resources/subscribe":
		st.Subs.Mark(uri, true)
	default:
		st.Subs.Mark(uri, false)
	}
	return &mcpwire.RawResult{Raw: json.RawMessage(`{}`)}, nil
}

// TaskCaller is the poller's taskpoll.Caller: it calls a task's server on
// the runtime running now. Each call is an INTERNAL span, "poll task
// {name}" or "cancel task {name}", the root of a new trace linked to the
// task's submit (package telemetry), whichever replica makes it.
type TaskCaller struct {
	Runtime   *atomic.Pointer[Runtime] // where the running runtime is published
	Panics    *panicguard.Guard        // recovers a call (the poller's goroutine)
	Telemetry *telemetry.Telemetry     // nil: no spans
	Accounts  Accounts                 // the submitting user's token on a connected-account server (nil: none)
}

// CallTool runs a task tool with the server's own credentials only (static
// headers and OAuth, never a request's secrets) — on a connected-account
// server, the submitting user's stored token — on the task's (user,
// thread) scope, retrying once after a 401 with a refreshed token.
func (s *TaskCaller) CallTool(ctx context.Context, call taskpoll.Call) (_ json.RawMessage, err error) {
	ctx, span := s.span(ctx, call)
	defer func() { span.End(err, false) }()     // runs after Catch: a panic ends the span as an error
	defer s.Panics.Catch(panicguard.Task, &err) // the poller's goroutine (internal/panicguard)
	b := s.Runtime.Load().ByName[call.Server]
	if b == nil {
		return nil, fmt.Errorf("MCP task server %q is missing or disabled in the running configuration", call.Server)
	}
	params := wire.AppendCallParams(nil, call.Tool, call.Args, nil)
	key := upstream.Key{User: call.User, Thread: call.Thread}
	for attempt := 0; ; attempt++ {
		hdr, tok, err := s.headers(ctx, b, call.User)
		if err != nil {
			return nil, err
		}
		if tok != "" {
			key.Cred = fingerprint("account:"+call.User, nil) // as the accounts stage keys it
		}
		raw, err := b.Up.CallTool(ctx, upstream.Call{Key: key, Params: params, Header: hdr}) // no sink: no caller waits
		se, refused := errors.AsType[*upstream.StatusError](err)
		if attempt > 0 || !refused || se.Code != http.StatusUnauthorized {
			return raw, err
		}
		switch {
		case tok != "":
			if r, rerr := s.Accounts.Rejected(ctx, call.User, call.Server, tok, se); rerr != nil || !r.Again {
				return raw, err
			}
		case b.Resolver != nil:
			b.Resolver.UnauthorizedHeader(hdr)
		default:
			return raw, err
		}
	}
}

// headers returns the headers a task call to b goes out with for user:
// the server's base headers and, on a connected-account server, user's
// token (tok).
func (s *TaskCaller) headers(ctx context.Context, b *Backend, user string) (hdr http.Header, tok secret.Value, err error) {
	if b.Resolver != nil {
		if hdr, err = b.Resolver.Base(ctx); err != nil {
			return nil, "", fmt.Errorf("MCP task server %q credentials: %w", b.Name, err)
		}
	}
	if s.Accounts == nil || !b.ConnectsAccounts(s.Accounts) {
		return hdr, "", nil
	}
	tok, ok, err := s.Accounts.Token(ctx, user, b.Name)
	switch {
	case err != nil:
		return nil, "", fmt.Errorf("MCP task server %q: the task's user's connected account: %w", b.Name, err)
	case !ok:
		return nil, "", fmt.Errorf("MCP task server %q: the task's user has no connected account there any more (they connect it again with connect_account)", b.Name)
	}
	return WithBearer(hdr, tok), tok, nil
}

// span starts a task call's span, linked to the task's submit; the
// upstream call's CLIENT span is its child.
func (s *TaskCaller) span(ctx context.Context, call taskpoll.Call) (context.Context, telemetry.Span) {
	t := call.Task
	if t == nil {
		return ctx, telemetry.Span{}
	}
	verb := "poll task "
	if call.Tool == t.CancelTool {
		verb = "cancel task "
	}
	return s.Telemetry.Linked(ctx, verb+t.Name, t.Trace, telemetry.TaskAttrs(t.ID, call.Server, call.Tool)...)
}
