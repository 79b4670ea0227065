package callpath

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/mcp-mux/mcp-mux/internal/wire"
	"github.com/mcp-mux/mcp-mux/internal/wire/mcpwire"
	"github.com/mcp-mux/mcp-mux/taskpoll"
	"github.com/mcp-mux/mcp-mux/upstream"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// submitTask is CallTool's hook for a submit tool: run is the ordinary
// forwarding of the call (interceptors included). The task is DeerFlow's
// tool result, or for a caller with the tasks extension CreateTaskResult.
func (s *Router) submitTask(ctx context.Context, st *Session, e Era, key upstream.Key, r *Route, run func(context.Context) (json.RawMessage, error)) (json.RawMessage, error) {
	var upErr error
	t, raw, err := s.tasks.SubmitTask(ctx, taskpoll.SubmitRequest{User: st.User, Thread: key.Thread, Server: r.Server.Name, Toolset: *r.Task},
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
