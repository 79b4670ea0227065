package modern

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/internal/proxy/callpath"
	"github.com/mcp-mux/mcp-mux/internal/seal"
	"github.com/mcp-mux/mcp-mux/internal/taskpoll"
	"github.com/mcp-mux/mcp-mux/internal/upstream"
	"github.com/mcp-mux/mcp-mux/internal/wire"
	"github.com/mcp-mux/mcp-mux/internal/wire/mcpwire"
)

// The 2026-07-28 tasks extension (io.modelcontextprotocol/tasks, SEP-2663).
//
// A 2026-07-28 request that declares the extension in its _meta client
// capabilities (era.tasksExt) gets tasks the protocol's way:
//
//   - A call of a task_toolsets submit tool goes through taskpoll's
//     SubmitTask (the record is durably written, and the remote handle with
//     it, before anything returns) and answers CreateTaskResult built from
//     the record: the local task id only. tasks/get maps the record
//     (taskpoll.ExtensionView), tasks/cancel records a cancel request (the
//     poller cancels remotely), tasks/update is acknowledged and its answers
//     ignored: a DeerFlow toolset's input_required is a remote status with a
//     message, with no request mcp-mux could deliver an answer to, so such a
//     task's inputRequests is always empty.
//   - A 2026-07-28 upstream that itself answers CreateTaskResult (it sees
//     the extension declared on the requests mcp-mux sends it for such a
//     caller) has its task passed through under a namespaced id: the server
//     name, the upstream's own task id and the caller, sealed with
//     AES-256-GCM under a key derived from inbound.request_state_key. The id
//     is opaque (it shows neither the server nor the remote id) and
//     tamper-proof, needs no store (passthrough works without mcp_tasks),
//     and every replica sharing the key resolves it. tasks/get, tasks/update
//     and tasks/cancel for it go to that server with its own id.
//   - subscriptions/listen with notifications.taskIds is served here (the
//     SDK knows neither the field nor notifications/tasks): after the
//     acknowledgement (the caller's own local tasks among the ids, and list
//     changes as on the SDK path), every event of those tasks, from
//     whichever replica wrote it, arrives as notifications/tasks with the
//     full task, tagged with the subscription id.
//
// Task ids a caller does not own, unknown ones and malformed ones are all
// -32602; a tasks/* request (or a listen with taskIds) that does not declare
// the extension is -32021. Without the extension nothing changes: a submit
// answers DeerFlow's shape, and no task result ever reaches the caller.

const (
	tasksExtension = "io.modelcontextprotocol/tasks"
	// methodTaskNotification is the extension's task status notification.
	methodTaskNotification = "notifications/tasks"
	// passTaskPrefix starts a passed-through task's namespaced id.
	passTaskPrefix = seal.TaskIDPrefix
	// maxTaskIDLen bounds a task id a client sends; maxRemoteTaskIDLen one
	// an upstream returns.
	maxTaskIDLen       = 4096
	maxRemoteTaskIDLen = 1024
	// maxListenTaskIDs bounds the task ids of one subscriptions/listen.
	maxListenTaskIDs = 256
)

var requiredTasksCapability = json.RawMessage(`{"requiredCapabilities":{"extensions":{"` + tasksExtension + `":{}}}}`)

func errNoTasksExtension(method string) *jsonrpc.Error {
	return &jsonrpc.Error{Code: codeMissingCapability, Data: requiredTasksCapability,
		Message: method + " needs the " + tasksExtension + " extension declared in the request's clientCapabilities"}
}

var errUnknownTask = &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "Failed to retrieve task: Task not found"}

// taskParams are the params of tasks/get, tasks/update and tasks/cancel.
type taskParams struct {
	mcp.ParamsBase
	TaskID         string          `json:"taskId"`
	InputResponses json.RawMessage `json:"inputResponses,omitempty"`
}

// taskMethods are the extension's methods.
var taskMethods = []string{"tasks/get", "tasks/update", "tasks/cancel"}

// registerTaskMethods makes the SDK accept the extension's methods; their
// handler only answers a legacy session (a 2026-07-28 request is served in
// Receive): the extension is not part of the legacy era.
func (s *Handler) registerTaskMethods() {
	for _, m := range taskMethods {
		_ = mcp.AddReceivingCustomMethod(s.sdk, m, func(context.Context, *mcp.ServerSession, *taskParams) (*mcpwire.RawResult, error) {
			return nil, LegacyRefusal(m)
		})
	}
}

// LegacyRefusal is the error a 2025-11-25 session gets for a method of
// the 2026-07-28 era (the tasks extension's), nil for any other method.
func LegacyRefusal(method string) *jsonrpc.Error {
	if !slices.Contains(taskMethods, method) {
		return nil
	}
	return &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: method + " is a 2026-07-28 method (the " + tasksExtension + " extension)"}
}

// declareTasks notes whether a 2026-07-28 request declared the extension.
// Its upstream requests then declare it too (Key.Caps: a 2026-07-28
// server sees it; legacy call sessions mirror only roots, sampling and
// elicitation), so a server that supports it may answer with a task.
func declareTasks(st *callpath.Session, e *Era, ip *mcp.InitializeParams) {
	if ip == nil || ip.Capabilities == nil {
		return
	}
	if _, ok := ip.Capabilities.Extensions[tasksExtension]; !ok {
		return
	}
	e.tasks = true
	var m map[string]json.RawMessage
	if json.Unmarshal([]byte(st.Caps), &m) != nil || m == nil {
		m = map[string]json.RawMessage{}
	}
	var exts map[string]json.RawMessage // MCP Apps' entry kept (upstream/appcaps.go)
	if json.Unmarshal(m["extensions"], &exts) != nil || exts == nil {
		exts = map[string]json.RawMessage{}
	}
	exts[tasksExtension] = json.RawMessage(`{}`)
	m["extensions"], _ = json.Marshal(exts)
	b, _ := json.Marshal(m) // sorted keys: one Key.Caps per capability set
	st.Caps = string(b)
}

// advertiseTasks adds the extension to server/discover's capabilities when
// mcp-mux can serve it: durable tasks are on, or some server supports it.
func (s *Handler) advertiseTasks(dr *mcp.DiscoverResult) {
	if !s.tasksServable() {
		return
	}
	var c mcp.ServerCapabilities
	if dr.Capabilities != nil {
		c = *dr.Capabilities // the SDK's own: never modified in place
	}
	c.Extensions = maps.Clone(c.Extensions)
	c.AddExtension(tasksExtension, nil)
	dr.Capabilities = &c
}

func (s *Handler) tasksServable() bool {
	if s.tasks != nil {
		return true
	}
	for _, b := range s.rt.Load().Backends {
		if upstreamTasks(b.Up) {
			return true
		}
	}
	return false
}

// upstreamTasks reports whether a server advertised the extension.
func upstreamTasks(up *upstream.Upstream) bool {
	caps := up.Lists().Capabilities
	if caps == nil {
		return false
	}
	_, ok := caps.Extensions[tasksExtension]
	return ok
}

// passTask is Router.CallTool's hook for a 2026-07-28 caller (Era): a
// server's CreateTaskResult gets its namespaced task id, sealed with states
// for user, and one the caller did not ask for (it declared no extension,
// tasksExt false) is refused.
func passTask(states *seal.Sealer, tasksExt bool, user string, r *callpath.Route, raw json.RawMessage) (json.RawMessage, error) {
	if !bytes.Contains(raw, []byte(`"task"`)) {
		return raw, nil
	}
	var head struct {
		ResultType string `json:"resultType"`
		TaskID     string `json:"taskId"`
	}
	if json.Unmarshal(raw, &head) != nil || head.ResultType != "task" {
		return raw, nil
	}
	switch {
	case !tasksExt:
		return nil, &wire.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("MCP server %q answered with a task, which the client did not declare it can take", r.Server.Name)}
	case head.TaskID == "" || len(head.TaskID) > maxRemoteTaskIDLen:
		return nil, &wire.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("MCP server %q answered with a task without a usable taskId (1 to %d bytes)", r.Server.Name, maxRemoteTaskIDLen)}
	}
	id := states.SealTaskID(user, r.Server.Name, head.TaskID)
	if len(id) > maxTaskIDLen {
		// Escapes in the sealed reference (or a long user id) can make it
		// longer than a client may send back: never issue an id that
		// cannot resolve.
		return nil, &wire.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("MCP server %q answered with a task id mcp-mux cannot namespace within %d bytes", r.Server.Name, maxTaskIDLen)}
	}
	return withTaskID(raw, head.TaskID, id), nil
}

// withTaskID returns a task object with its taskId replaced by id, and
// every nested taskId member that names remote (a related-task _meta of its
// result or of its input requests, say) replaced too: the caller never sees
// the server's own id. Nesting is followed to maxTaskIDRewriteDepth.
func withTaskID(raw json.RawMessage, remote, id string) json.RawMessage {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil || m == nil {
		return raw
	}
	for k, v := range m {
		m[k] = rewriteTaskIDs(v, remote, id, 1)
	}
	m["taskId"], _ = json.Marshal(id)
	out, err := json.Marshal(m)
	if err != nil {
		return raw
	}
	return out
}

// maxTaskIDRewriteDepth bounds how deep withTaskID looks for nested task
// ids (a related-task _meta sits at depth 3 to 5), so that a deep reply
// costs no more than a few passes over it.
const maxTaskIDRewriteDepth = 8

// rewriteTaskIDs returns v with the taskId members that name remote, in v
// and below it, replaced by id.
func rewriteTaskIDs(v json.RawMessage, remote, id string, depth int) json.RawMessage {
	v = bytes.TrimSpace(v)
	if depth > maxTaskIDRewriteDepth || len(v) == 0 || (v[0] != '{' && v[0] != '[') || !bytes.Contains(v, []byte("taskId")) {
		return v
	}
	var out any
	var ok bool
	if v[0] == '[' {
		out, ok = rewriteArrayTaskIDs(v, remote, id, depth)
	} else {
		out, ok = rewriteObjectTaskIDs(v, remote, id, depth)
	}
	if !ok {
		return v
	}
	b, err := json.Marshal(out)
	if err != nil {
		return v
	}
	return b
}

// rewriteArrayTaskIDs rewrites the task ids in each element of the array v.
func rewriteArrayTaskIDs(v json.RawMessage, remote, id string, depth int) ([]json.RawMessage, bool) {
	var a []json.RawMessage
	if json.Unmarshal(v, &a) != nil {
		return nil, false
	}
	for i := range a {
		a[i] = rewriteTaskIDs(a[i], remote, id, depth+1)
	}
	return a, true
}

// rewriteObjectTaskIDs rewrites the object v's taskId naming remote, and
// the task ids below its other members.
func rewriteObjectTaskIDs(v json.RawMessage, remote, id string, depth int) (map[string]json.RawMessage, bool) {
	var m map[string]json.RawMessage
	if json.Unmarshal(v, &m) != nil {
		return nil, false
	}
	for k, e := range m {
		var s string
		if k == "taskId" && json.Unmarshal(e, &s) == nil && s == remote {
			m[k], _ = json.Marshal(id)
			continue
		}
		m[k] = rewriteTaskIDs(e, remote, id, depth+1)
	}
	return m, true
}

// taskMethod serves tasks/get, tasks/update and tasks/cancel of a
// 2026-07-28 request.
func (s *Handler) taskMethod(ctx context.Context, st *callpath.Session, e *Era, method string, req mcp.Request) (mcp.Result, error) {
	if !e.tasks {
		return nil, errNoTasksExtension(method)
	}
	p, _ := req.GetParams().(*taskParams)
	if p == nil || p.TaskID == "" {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: method + ": missing required 'taskId'"}
	}
	var raw json.RawMessage
	var err error
	switch {
	case len(p.TaskID) > maxTaskIDLen:
		err = errUnknownTask
	case strings.HasPrefix(p.TaskID, passTaskPrefix):
		raw, err = s.passedTaskMethod(ctx, st, e, method, req, p)
	default:
		raw, err = s.localTaskMethod(ctx, st, method, p.TaskID)
	}
	if err != nil {
		return nil, err
	}
	return &mcpwire.RawResult{Raw: s.modernResult(method, raw)}, nil
}

// localTaskMethod serves a durable task of the caller.
func (s *Handler) localTaskMethod(ctx context.Context, st *callpath.Session, method, id string) (json.RawMessage, error) {
	if s.tasks == nil || !taskpoll.ValidID(id) {
		return nil, errUnknownTask
	}
	var t *taskpoll.Task
	var err error
	if method == "tasks/cancel" {
		t, err = s.tasks.RequestCancel(ctx, st.User, id) // a terminal task: unchanged, acknowledged
	} else {
		t, err = s.tasks.Get(ctx, st.User, id)
	}
	switch {
	case errors.Is(err, taskpoll.ErrNotFound):
		return nil, errUnknownTask
	case err != nil:
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the durable task store is unavailable"}
	case method == "tasks/get":
		return json.Marshal(s.tasks.ExtensionView(t))
	}
	// tasks/update: a DeerFlow toolset takes no answers; nothing is
	// outstanding, so every response is ignored (the spec's rule for keys
	// that are not outstanding).
	return json.RawMessage(`{}`), nil
}

// passedTaskMethod sends a method for a passed-through task to its server,
// with the server's own task id.
func (s *Handler) passedTaskMethod(ctx context.Context, st *callpath.Session, e *Era, method string, req mcp.Request, p *taskParams) (json.RawMessage, error) {
	rt := s.rt.Load()
	server, remote, ok := rt.States.OpenTaskID(p.TaskID, st.User)
	if !ok {
		return nil, errUnknownTask
	}
	b := rt.ByName[server]
	if b == nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "Failed to retrieve task: the server that runs it is no longer configured"}
	}
	params := struct {
		TaskID         string          `json:"taskId"`
		InputResponses json.RawMessage `json:"inputResponses,omitempty"`
	}{TaskID: remote}
	if method == "tasks/update" {
		params.InputResponses = p.InputResponses
		if len(params.InputResponses) == 0 {
			params.InputResponses = json.RawMessage(`{}`)
		}
	}
	res, err := s.calls.Forward(ctx, st, e, callpath.HeaderOf(req), b, method, params)
	if err != nil {
		return nil, err
	}
	raw := res.(*mcpwire.RawResult).Raw
	if method == "tasks/get" {
		return withTaskID(raw, remote, p.TaskID), nil
	}
	return rewriteTaskIDs(raw, remote, p.TaskID, 1), nil
}

// serveTaskRequest takes the extension's requests the SDK cannot serve
// before it sees them: it checks Mcp-Name on tasks/* (the SDK checks it on
// tools/call, resources/read and prompts/get only) and serves a
// subscriptions/listen with taskIds. It reports whether it answered.
func (s *Handler) serveTaskRequest(w http.ResponseWriter, r *http.Request, m *wire.Message) bool {
	switch m.Method {
	case "tasks/get", "tasks/update", "tasks/cancel":
		if r.Header.Get("Mcp-Protocol-Version") < modernVersion {
			return false
		}
		var p struct {
			TaskID *string `json:"taskId"`
		}
		_ = json.Unmarshal(m.Params, &p)
		name := r.Header.Get("Mcp-Name")
		switch {
		case name == "":
			mcpwire.WriteError(w, http.StatusBadRequest, m.ID, codeHeaderMismatch, "missing required Mcp-Name header for method "+m.Method, nil)
			return true
		case p.TaskID != nil && name != *p.TaskID:
			mcpwire.WriteError(w, http.StatusBadRequest, m.ID, codeHeaderMismatch, "header mismatch: the Mcp-Name header does not match params.taskId", nil)
			return true
		}
	case "subscriptions/listen":
		return s.listens.serveListen(w, r, m) // listen.go
	}
	return false
}

// codeHeaderMismatch is HeaderMismatchError.
const codeHeaderMismatch = -32020
