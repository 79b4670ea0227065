package proxy

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/mcp-mux/mcp-mux/internal/wire"
	"github.com/mcp-mux/mcp-mux/taskpoll"
)

// subscriptions/listen with task ids (the tasks extension).
//
// go-sdk's listen params have no taskIds and its server cannot send
// notifications/tasks, so a listen that asks for task ids is served here,
// on its own event stream: the same listener as the SDK path (list changes
// reach it through sendListener), plus the task ids it was granted.
// Resource subscriptions are not honoured on this path (the
// acknowledgement leaves them out; a second listen without taskIds takes
// them).

// directStream is a listen stream mcp-mux writes itself.
type directStream struct {
	mu       sync.Mutex
	w        http.ResponseWriter
	closed   bool
	versions map[string]int64 // newest task version sent, by task id
}

// write sends one JSON-RPC message as an SSE event, unless the stream ended.
func (d *directStream) write(msg []byte) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.writeLocked(msg)
}

func (d *directStream) writeLocked(msg []byte) {
	if d.closed {
		return
	}
	_, _ = fmt.Fprintf(d.w, "event: message\ndata: %s\n\n", msg)
	if f, ok := d.w.(http.Flusher); ok {
		f.Flush()
	}
}

// notify sends a notification with params (a JSON object or a value that
// marshals to one).
func (d *directStream) notify(method string, params any) {
	b, err := json.Marshal(params)
	if err != nil {
		return
	}
	d.write(wire.AppendNotification(nil, method, b))
}

// task sends t unless a newer version of it was sent already (events are
// fetched concurrently).
func (d *directStream) task(method string, version int64, id string, params []byte) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.versions[id] >= version {
		return
	}
	d.versions[id] = version
	d.writeLocked(wire.AppendNotification(nil, method, params))
}

func (d *directStream) close() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.closed = true
}

// listenParams is what mcp-mux reads of a listen request's params.
type listenParams struct {
	Meta          map[string]json.RawMessage `json:"_meta"`
	Notifications *struct {
		TaskIDs              []string `json:"taskIds"`
		ToolsListChanged     bool     `json:"toolsListChanged"`
		PromptsListChanged   bool     `json:"promptsListChanged"`
		ResourcesListChanged bool     `json:"resourcesListChanged"`
	} `json:"notifications"`
}

// serveTaskListen serves a subscriptions/listen that asks for task ids
// and reports whether it did (others go to the SDK).
func (s *Server) serveTaskListen(w http.ResponseWriter, r *http.Request, m *wire.Message) bool {
	var p listenParams
	if json.Unmarshal(m.Params, &p) != nil || p.Notifications == nil || len(p.Notifications.TaskIDs) == 0 {
		return false
	}
	// The checks the SDK makes of every 2026-07-28 request. What it refuses
	// before it reads the body, and a version it does not serve, it answers
	// itself (the refusal does not depend on taskIds).
	var version string
	_ = json.Unmarshal(p.Meta["io.modelcontextprotocol/protocolVersion"], &version)
	if v := r.Header.Get("Mcp-Protocol-Version"); (v != "" && v != modernVersion) || !modernContentHeaders(r.Header) {
		return false
	}
	switch v := r.Header.Get("Mcp-Protocol-Version"); {
	case v == "":
		writeRPCError(w, http.StatusBadRequest, m.ID, codeHeaderMismatch, "missing MCP-Protocol-Version header")
		return true
	case v != version:
		writeRPCError(w, http.StatusBadRequest, m.ID, codeHeaderMismatch, "header mismatch: MCP-Protocol-Version does not match _meta's protocol version")
		return true
	case r.Header.Get("Mcp-Method") != m.Method:
		writeRPCError(w, http.StatusBadRequest, m.ID, codeHeaderMismatch, "header mismatch: the Mcp-Method header does not match the body's method")
		return true
	}
	var caps struct {
		Extensions map[string]json.RawMessage `json:"extensions"`
	}
	_ = json.Unmarshal(p.Meta["io.modelcontextprotocol/clientCapabilities"], &caps)
	if _, ok := caps.Extensions[tasksExtension]; !ok {
		writeJSONRPCError(w, m.ID, errNoTasksExtension(m.Method))
		return true
	}
	if len(p.Notifications.TaskIDs) > maxListenTaskIDs {
		writeJSONRPCError(w, m.ID, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("subscriptions/listen: at most %d taskIds", maxListenTaskIDs)})
		return true
	}
	var id any
	if json.Unmarshal(m.ID, &id) != nil || id == nil {
		writeJSONRPCError(w, m.ID, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: "subscriptions/listen requires a request id"})
		return true
	}
	if limit := s.maxSessions(); !s.listeners.admit(limit) {
		writeJSONRPCError(w, m.ID, &jsonrpc.Error{Code: codeLimit, Message: fmt.Sprintf(
			"mcp-mux holds at most %d open subscriptions/listen streams (inbound.max_sessions); try again later", limit)})
		return true
	}
	defer s.listeners.leave()

	ctx := r.Context()
	user := requestUser(r.Header)
	n := p.Notifications
	l := &listener{ctx: ctx, id: id, user: user, tools: n.ToolsListChanged, prompts: n.PromptsListChanged,
		resources: n.ResourcesListChanged, uris: map[string]bool{}, taskIDs: map[string]bool{}}
	var granted []string
	for _, tid := range n.TaskIDs {
		if l.taskIDs[tid] || s.tasks == nil || !taskpoll.ValidID(tid) {
			continue // passed-through tasks: their servers' own streams are not fanned in
		}
		if _, err := s.tasks.Get(ctx, user, tid); err != nil {
			continue // unknown, another caller's, or the store is down: not granted
		}
		l.taskIDs[tid] = true
		granted = append(granted, tid)
	}
	d := &directStream{w: w, versions: map[string]int64{}}
	l.direct = d
	defer d.close() // no write after the handler returns
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	s.listeners.add(l)
	defer s.listeners.remove(l)
	type agreed struct {
		TaskIDs              []string `json:"taskIds,omitempty"`
		ToolsListChanged     bool     `json:"toolsListChanged,omitempty"`
		PromptsListChanged   bool     `json:"promptsListChanged,omitempty"`
		ResourcesListChanged bool     `json:"resourcesListChanged,omitempty"`
	}
	meta := map[string]any{metaSubscriptionID: id}
	d.notify("notifications/subscriptions/acknowledged", map[string]any{"_meta": meta, "notifications": agreed{
		TaskIDs: granted, ToolsListChanged: l.tools, PromptsListChanged: l.prompts, ResourcesListChanged: l.resources}})
	if len(granted) > 0 || l.tools || l.prompts || l.resources {
		select {
		case <-ctx.Done():
			return true
		case <-s.life.Done():
		}
	}
	res, _ := json.Marshal(map[string]any{"_meta": meta, "resultType": "complete"})
	d.write(wire.AppendResult(nil, m.ID, res))
	return true
}

// writeJSONRPCError answers a request with a JSON-RPC error (HTTP 200).
func writeJSONRPCError(w http.ResponseWriter, id json.RawMessage, e *jsonrpc.Error) {
	w.Header().Set("Content-Type", "application/json")
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "error": e})
	_, _ = w.Write(b)
}

// taskEvent sends a task event to the listeners granted its task: the
// whole task, as tasks/get would answer it now.
func (t *listenTable) taskEvent(s *Server, e taskpoll.Event) {
	for _, l := range t.all() {
		if l.direct == nil || l.user != e.User || !l.taskIDs[e.TaskID] {
			continue
		}
		s.bg.Go(func() {
			defer s.panics.catch(whereTask, nil) // recover.go
			ctx, cancel := context.WithTimeout(l.ctx, notifyTimeout)
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
			l.direct.task(methodTaskNotification, task.Version, task.ID, b)
		})
	}
}
