package conformance

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// The tasks-extension scenarios of the 2026-07-28 set need server
// fixtures the go-sdk everything-server lacks (greet, slow_compute,
// failing_job, protocol_error_job, confirm_delete, multi_input,
// test_tool_with_task) and a server that speaks the extension (go-sdk has
// none). tasksFixture is such a server, raw JSON-RPC over HTTP; through
// mcp-mux its tasks are passed through under mcp-mux's namespaced ids, so
// the scenarios measure mcp-mux's tasks surface end to end.

const tasksExt = "io.modelcontextprotocol/tasks"

type fxTask struct {
	id, status       string
	created, updated time.Time
	result, err      json.RawMessage
	inputs           map[string]json.RawMessage // outstanding input requests
	onInput          func(t *fxTask, key string, answer json.RawMessage)
}

type tasksFixture struct {
	mu    sync.Mutex
	seq   int
	tasks map[string]*fxTask
}

func (f *tasksFixture) newTask() *fxTask {
	f.seq++
	now := time.Now().UTC()
	t := &fxTask{id: fmt.Sprintf("fx-task-%d", f.seq), status: "working", created: now, updated: now, inputs: map[string]json.RawMessage{}}
	f.tasks[t.id] = t
	return t
}

// finish moves t to a terminal status unless it is terminal already.
func (f *tasksFixture) finish(t *fxTask, status string, result, rpcErr json.RawMessage) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if t.status == "completed" || t.status == "failed" || t.status == "cancelled" {
		return
	}
	t.status, t.result, t.err, t.updated = status, result, rpcErr, time.Now().UTC()
	t.inputs = map[string]json.RawMessage{}
}

func (t *fxTask) view() map[string]any {
	v := map[string]any{"taskId": t.id, "status": t.status, "createdAt": t.created.Format(time.RFC3339Nano),
		"lastUpdatedAt": t.updated.Format(time.RFC3339Nano), "ttlMs": 600000, "pollIntervalMs": 100}
	switch t.status {
	case "input_required":
		v["inputRequests"] = t.inputs
	case "completed":
		v["result"] = t.result
	case "failed":
		v["error"] = t.err
	}
	return v
}

func textResult(text string, isError bool) json.RawMessage {
	b, _ := json.Marshal(map[string]any{"content": []map[string]string{{"type": "text", "text": text}}, "isError": isError})
	return b
}

var elicit = json.RawMessage(`{"method":"elicitation/create","params":{"mode":"form","message":"Confirm?","requestedSchema":{"type":"object","properties":{"confirm":{"type":"boolean"},"name":{"type":"string"}}}}}`)

func startTasksFixture(t *testing.T) string {
	f := &tasksFixture{tasks: map[string]*fxTask{}}
	ts := httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(ts.Close)
	return ts.URL + "/mcp"
}

type fxRequest struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params struct {
		Meta struct {
			Caps struct {
				Extensions map[string]any `json:"extensions"`
			} `json:"io.modelcontextprotocol/clientCapabilities"`
		} `json:"_meta"`
		Name           string                     `json:"name"`
		Arguments      map[string]any             `json:"arguments"`
		TaskID         string                     `json:"taskId"`
		InputResponses map[string]json.RawMessage `json:"inputResponses"`
	} `json:"params"`
}

func (f *tasksFixture) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	}
	var m fxRequest
	b, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if json.Unmarshal(b, &m) != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	if m.ID == nil {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	res, code, msg, data := f.handle(&m)
	w.Header().Set("Content-Type", "application/json")
	if code != 0 {
		e := map[string]any{"code": code, "message": msg}
		if data != nil {
			e["data"] = data
		}
		out, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": m.ID, "error": e})
		_, _ = w.Write(out)
		return
	}
	out, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": m.ID, "result": res})
	_, _ = w.Write(out)
}

var missingTasks = json.RawMessage(`{"requiredCapabilities":{"extensions":{"` + tasksExt + `":{}}}}`)

func (f *tasksFixture) handle(m *fxRequest) (res any, code int, msg string, data json.RawMessage) {
	_, ext := m.Params.Meta.Caps.Extensions[tasksExt]
	complete := func(v map[string]any) map[string]any { v["resultType"] = "complete"; return v }
	switch m.Method {
	case "server/discover":
		return complete(map[string]any{"supportedVersions": []string{"2026-07-28"}, "capabilities": map[string]any{"tools": map[string]any{}, "extensions": map[string]any{tasksExt: map[string]any{}}},
			"serverInfo": map[string]any{"name": "tasks-fixture", "version": "1"}, "ttlMs": 0, "cacheScope": "private"}), 0, "", nil
	case "tools/list":
		var tools []map[string]any
		for _, n := range []string{"greet", "slow_compute", "failing_job", "protocol_error_job", "confirm_delete", "multi_input", "test_tool_with_task"} {
			tools = append(tools, map[string]any{"name": n, "inputSchema": map[string]any{"type": "object"}})
		}
		return complete(map[string]any{"tools": tools, "ttlMs": 0, "cacheScope": "private"}), 0, "", nil
	case "tools/call":
		return f.call(m, ext)
	case "tasks/get", "tasks/update", "tasks/cancel":
		if !ext {
			return nil, -32021, "the tasks extension is required", missingTasks
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		t := f.tasks[m.Params.TaskID]
		if t == nil {
			return nil, -32602, "Failed to retrieve task: Task not found", nil
		}
		switch m.Method {
		case "tasks/get":
			return complete(t.view()), 0, "", nil
		case "tasks/update":
			for k, v := range m.Params.InputResponses {
				if _, ok := t.inputs[k]; ok && t.status == "input_required" {
					delete(t.inputs, k)
					t.updated = time.Now().UTC()
					if t.onInput != nil {
						t.onInput(t, k, v)
					}
				}
			}
		case "tasks/cancel":
			if t.status == "working" || t.status == "input_required" {
				t.status, t.updated, t.inputs = "cancelled", time.Now().UTC(), map[string]json.RawMessage{}
			}
		}
		return complete(map[string]any{}), 0, "", nil
	}
	return nil, -32601, "method not found: " + m.Method, nil
}

func (f *tasksFixture) call(m *fxRequest, ext bool) (res any, code int, msg string, data json.RawMessage) {
	args := m.Params.Arguments
	str := func(k string) string { s, _ := args[k].(string); return s }
	created := func(t *fxTask) map[string]any {
		v := t.view()
		v["resultType"] = "task"
		return v
	}
	later := func(d time.Duration, fn func()) { time.AfterFunc(d, fn) }
	name := m.Params.Name
	if name == "greet" {
		return map[string]any{"resultType": "complete", "content": []map[string]string{{"type": "text", "text": "Hello, " + str("name") + "!"}}}, 0, "", nil
	}
	if name == "slow_compute" && !ext {
		return map[string]any{"resultType": "complete", "content": []map[string]string{{"type": "text", "text": "computed " + str("label")}}}, 0, "", nil
	}
	if name == "test_tool_with_task" && m.Params.InputResponses["user_name"] == nil {
		return map[string]any{"resultType": "input_required", "inputRequests": map[string]json.RawMessage{"user_name": elicit}}, 0, "", nil
	}
	if !ext {
		return nil, -32021, "this tool runs as a task: declare the tasks extension", missingTasks
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	t := f.newTask()
	switch name {
	case "slow_compute":
		secs, _ := args["seconds"].(float64)
		label := str("label")
		later(time.Duration(secs*float64(time.Second)), func() { f.finish(t, "completed", textResult("computed "+label, false), nil) })
	case "failing_job":
		later(300*time.Millisecond, func() { f.finish(t, "completed", textResult("the job failed", true), nil) })
	case "protocol_error_job":
		later(300*time.Millisecond, func() {
			f.finish(t, "failed", nil, json.RawMessage(`{"code":-32603,"message":"the job crashed"}`))
		})
	case "confirm_delete", "multi_input":
		t.status = "input_required"
		t.inputs["confirm-1"] = elicit
		if name == "multi_input" {
			t.inputs["name-1"] = elicit
		}
		file := str("filename")
		t.onInput = func(t *fxTask, _ string, _ json.RawMessage) {
			if len(t.inputs) == 0 { // every input answered: finish (the caller holds f.mu)
				t.status, t.result = "completed", textResult("deleted "+file, false)
			}
		}
	case "test_tool_with_task":
		var answer struct {
			Content struct {
				Name string `json:"name"`
			} `json:"content"`
		}
		_ = json.Unmarshal(m.Params.InputResponses["user_name"], &answer)
		later(100*time.Millisecond, func() { f.finish(t, "completed", textResult("Hello, "+answer.Content.Name+"!", false), nil) })
	default:
		delete(f.tasks, t.id)
		return nil, -32602, "unknown tool " + name, nil
	}
	return created(t), 0, "", nil
}

// Through mcp-mux fronting a server that speaks the tasks extension: the
// tasks scenarios' counts (not scored for 2026-07-28, logged; the
// scenarios that pass entirely must keep passing).
func TestModernConformanceTasksUpstream(t *testing.T) {
	url := startMux(t, fmt.Sprintf(`{"type": "http", "url": %q, "tool_name_prefix": false}`, startTasksFixture(t)))
	r := runModernSuite(t, url)
	var tasks []string
	for _, line := range r.optional {
		if strings.Contains(line, " tasks-") {
			tasks = append(tasks, line)
		}
	}
	t.Logf("tasks scenarios through mcp-mux: %s", strings.Join(tasks, "; "))
	for _, want := range tasksScenariosPassing {
		ok := false
		for _, line := range tasks {
			if strings.HasPrefix(line, "✓ "+want+":") && strings.HasSuffix(line, " 0 failed") {
				ok = true
			}
		}
		if !ok {
			t.Errorf("tasks scenario %s no longer passes through mcp-mux: %v", want, tasks)
		}
	}
}

// tasksScenariosPassing pass entirely through mcp-mux fronting tasksFixture.
var tasksScenariosPassing = []string{
	"tasks-lifecycle", "tasks-capability-negotiation", "tasks-wire-fields", "tasks-request-state-removal",
	"tasks-mrtr-input", "tasks-request-headers", "tasks-dispatch-and-envelope", "tasks-required-task-error",
	"tasks-mrtr-composition",
}
