package modern

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/mcp-mux/mcp-mux/internal/panicguard"
	"github.com/mcp-mux/mcp-mux/internal/proxy/callpath"
	"github.com/mcp-mux/mcp-mux/internal/taskpoll"
	"github.com/mcp-mux/mcp-mux/internal/wire"
	"github.com/mcp-mux/mcp-mux/internal/wire/mcpwire"
)

// subscriptions/listen with task ids (the tasks extension).
//
// go-sdk's listen params have no taskIds and its server cannot send
// notifications/tasks; mcp-mux serves listens itself (serveListen,
// internal/listenstream), and one that asks for task ids follows the task ids
// it was granted too.

// checkTaskListen makes the checks the SDK makes of every 2026-07-28
// request of a listen that asks for task ids, which the SDK cannot serve:
// it answers what the SDK would refuse itself and reports whether the
// listen may go on (listenServe), was answered (listenDone) or is the
// SDK's to answer (listenSDK: what it refuses before reading the body, and
// a version it does not serve; the refusal does not depend on taskIds).
func (s *listens) checkTaskListen(w http.ResponseWriter, r *http.Request, m *wire.Message, p *listenParams) listenVerdict {
	var meta map[string]json.RawMessage
	_ = json.Unmarshal(p.Meta, &meta)
	var version string
	_ = json.Unmarshal(meta["io.modelcontextprotocol/protocolVersion"], &version)
	if v := r.Header.Get("Mcp-Protocol-Version"); (v != "" && v != modernVersion) || !modernContentHeaders(r.Header) {
		return listenSDK
	}
	switch v := r.Header.Get("Mcp-Protocol-Version"); {
	case v == "":
		mcpwire.WriteError(w, http.StatusBadRequest, m.ID, codeHeaderMismatch, "missing MCP-Protocol-Version header", nil)
		return listenDone
	case v != version:
		mcpwire.WriteError(w, http.StatusBadRequest, m.ID, codeHeaderMismatch, "header mismatch: MCP-Protocol-Version does not match _meta's protocol version", nil)
		return listenDone
	case r.Header.Get("Mcp-Method") != m.Method:
		mcpwire.WriteError(w, http.StatusBadRequest, m.ID, codeHeaderMismatch, "header mismatch: the Mcp-Method header does not match the body's method", nil)
		return listenDone
	}
	var caps struct {
		Extensions map[string]json.RawMessage `json:"extensions"`
	}
	_ = json.Unmarshal(meta["io.modelcontextprotocol/clientCapabilities"], &caps)
	if _, ok := caps.Extensions[tasksExtension]; !ok {
		writeJSONRPCError(w, m.ID, errNoTasksExtension(m.Method))
		return listenDone
	}
	if len(p.Notifications.TaskIDs) > maxListenTaskIDs {
		writeJSONRPCError(w, m.ID, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("subscriptions/listen: at most %d taskIds", maxListenTaskIDs)})
		return listenDone
	}
	return listenServe
}

// grantTasks returns the task ids of ids that user may follow: mcp-mux's
// own durable tasks of theirs. Passed-through tasks are not granted (their
// servers' own streams are not fanned in), nor unknown ones, another
// caller's, or any while the store is down.
func (s *listens) grantTasks(ctx context.Context, user string, ids []string) []string {
	var granted []string
	for _, tid := range ids {
		if s.tasks == nil || !taskpoll.ValidID(tid) || slices.Contains(granted, tid) {
			continue
		}
		if _, err := s.tasks.Get(ctx, user, tid); err == nil {
			granted = append(granted, tid)
		}
	}
	return granted
}

// writeJSONRPCError answers a request with a JSON-RPC error (HTTP 200).
func writeJSONRPCError(w http.ResponseWriter, id json.RawMessage, e *jsonrpc.Error) {
	mcpwire.WriteError(w, http.StatusOK, id, e.Code, e.Message, e.Data)
}

// taskEvent sends a task event to the listeners granted its task: the
// whole task, as tasks/get would answer it now.
func (t *listenTable) taskEvent(s *listens, e taskpoll.Event) {
	for _, l := range t.all() {
		if l.direct == nil || l.user != e.User || !l.taskIDs[e.TaskID] {
			continue
		}
		s.bg.Go(func() {
			defer s.panics.Catch(panicguard.Task, nil) // internal/panicguard
			ctx, cancel := context.WithTimeout(l.ctx, callpath.NotifyTimeout)
			defer cancel()
			task, err := s.tasks.Get(ctx, e.User, e.TaskID)
			if err != nil {
				s.log.Debug("task notification not delivered", "err", err)
				return
			}
			v := s.tasks.ExtensionView(task)
			if v.Meta == nil {
				v.Meta = map[string]any{}
			}
			v.Meta[metaSubscriptionID] = l.id
			b, err := json.Marshal(v)
			if err != nil {
				return
			}
			l.direct.NotifyNewer(task.ID, task.Version, methodTaskNotification, b)
		})
	}
}
