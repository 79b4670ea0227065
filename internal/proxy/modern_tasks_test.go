package proxy_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcp-mux/mcp-mux/internal/mcptest"
	"github.com/mcp-mux/mcp-mux/internal/proxy"
	"github.com/mcp-mux/mcp-mux/internal/storeclient"
	"github.com/mcp-mux/mcp-mux/internal/taskpoll"
)

// The 2026-07-28 tasks extension over real HTTP, raw JSON-RPC.

const tasksCaps = `{"extensions":{"io.modelcontextprotocol/tasks":{}}}`

// extTask is a task as the extension shows it (CreateTaskResult or tasks/get).
type extTask struct {
	ResultType     string          `json:"resultType"`
	TaskID         string          `json:"taskId"`
	Status         string          `json:"status"`
	StatusMessage  string          `json:"statusMessage"`
	CreatedAt      string          `json:"createdAt"`
	LastUpdatedAt  string          `json:"lastUpdatedAt"`
	TTLMs          json.RawMessage `json:"ttlMs"`
	PollIntervalMs *int64          `json:"pollIntervalMs"`
	Result         *struct {
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
		StructuredContent json.RawMessage `json:"structuredContent"`
	} `json:"result"`
	Error *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func decodeTask(t *testing.T, r rpcReply) extTask {
	t.Helper()
	var v extTask
	if r.Error != nil || json.Unmarshal(r.Result, &v) != nil {
		t.Fatalf("want a task, got %s %+v", r.Result, r.Error)
	}
	return v
}

// taskCall sends tasks/get, tasks/update or tasks/cancel for id.
func taskCall(t *testing.T, url string, hdr map[string]string, caps, method, id, extra string) (int, rpcReply) {
	t.Helper()
	return modernCall(t, url, hdr, caps, method, id, `"taskId":`+mustQuote(id)+extra)
}

// sharedRedisStore is a Redis store on the shared Redis under prefix.
func sharedRedisStore(t *testing.T, prefix string) taskpoll.Store {
	t.Helper()
	c, err := storeclient.Dial("redis://127.0.0.1:6379")
	if err != nil {
		t.Fatalf("the shared Redis on 127.0.0.1:6379: %v", err)
	}
	return taskpoll.NewRedisStore(taskpoll.RedisOptions{Client: c, KeyPrefix: prefix})
}

// testPrefix is a key prefix of this test's own.
func testPrefix() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "tasksext-test:" + hex.EncodeToString(b[:]) + ":"
}

func TestTasksExtensionBolt(t *testing.T) {
	st, err := taskpoll.OpenBoltStore(taskpoll.BoltOptions{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	tasksExtensionFlow(t, st)
}

func TestTasksExtensionRedis(t *testing.T) {
	tasksExtensionFlow(t, sharedRedisStore(t, testPrefix()))
}

// A task's notifications reach a listener on another replica than the one
// that took the submit and the cancel (events travel over Redis pub/sub).
func TestTasksExtensionListenAcrossReplicas(t *testing.T) {
	jobs := &mcptest.TaskServer{PollsToComplete: 1 << 30}
	uj := mcptest.ServeHTTP(t, jobs.MCP())
	cfg := `{"mcpServers": {"jobs": ` + mcptest.TaskServerJSON(uj.URL+"/mcp", "") + `}, "mcp_tasks": {"enabled": true},
		"inbound": {"auth": {"mode": "trusted_header"}, "user_header": "X-User"}}`
	prefix := testPrefix()
	_, a := taskMux(t, cfg, sharedRedisStore(t, prefix))
	_, b := taskMux(t, cfg, sharedRedisStore(t, prefix))
	alice := map[string]string{"X-User": "alice"}
	_, r := modernCall(t, a.URL+"/mcp", alice, tasksCaps, "tools/call", "jobs_submit_job", `"name":"jobs_submit_job","arguments":{"input":"x"}`)
	task := decodeTask(t, r)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	lh := modernHeaders("subscriptions/listen", "")
	lh["X-User"] = "alice"
	s := openStream(t, ctx, b.URL+"/mcp", lh, `{"jsonrpc":"2.0","id":9,"method":"subscriptions/listen","params":{`+modernMeta(tasksCaps)+
		`,"notifications":{"taskIds":[`+mustQuote(task.TaskID)+`]}}}`)
	if ack := s.next(t); ack["method"] != "notifications/subscriptions/acknowledged" {
		t.Fatalf("first message %v", ack)
	}
	if _, r := taskCall(t, a.URL+"/mcp", alice, tasksCaps, "tasks/cancel", task.TaskID, ""); r.Error != nil {
		t.Fatalf("tasks/cancel: %+v", r.Error)
	}
	for {
		n := s.next(t)
		p, _ := n["params"].(map[string]any)
		if n["method"] != "notifications/tasks" || p["taskId"] != task.TaskID || p["_meta"].(map[string]any)["io.modelcontextprotocol/subscriptionId"] != float64(9) {
			t.Fatalf("notification %v", n)
		}
		if p["status"] == "cancelled" {
			return
		}
	}
}

func tasksExtensionFlow(t *testing.T, store taskpoll.Store) {
	jobs := &mcptest.TaskServer{PollsToComplete: 2}
	slow := &mcptest.TaskServer{PollsToComplete: 1 << 30}
	uj, us := mcptest.ServeHTTP(t, jobs.MCP()), mcptest.ServeHTTP(t, slow.MCP())
	_, ts := taskMux(t, `{"mcpServers": {"jobs": `+mcptest.TaskServerJSON(uj.URL+"/mcp", "")+`, "slow": `+mcptest.TaskServerJSON(us.URL+"/mcp", "")+`},
		"mcp_tasks": {"enabled": true}, "inbound": {"auth": {"mode": "trusted_header"}, "user_header": "X-User"}}`, store)
	url := ts.URL + "/mcp"
	alice, bob := map[string]string{"X-User": "alice"}, map[string]string{"X-User": "bob"}

	// server/discover advertises the extension.
	_, r := modernCall(t, url, alice, `{}`, "server/discover", "", `"x":1`)
	if r.Error != nil || !strings.Contains(string(r.Result), `"io.modelcontextprotocol/tasks":{}`) {
		t.Fatalf("discover: %s %+v", r.Result, r.Error)
	}

	// A submit answers CreateTaskResult once the task is durably recorded.
	_, r = modernCall(t, url, alice, tasksCaps, "tools/call", "jobs_submit_job", `"name":"jobs_submit_job","arguments":{"input":"x"}`)
	created := decodeTask(t, r)
	if created.ResultType != "task" || created.Status != "working" || !strings.HasPrefix(created.TaskID, "mcp-task-") ||
		created.CreatedAt == "" || created.LastUpdatedAt == "" || string(created.TTLMs) != "604800000" || created.PollIntervalMs == nil || created.Result != nil {
		t.Fatalf("CreateTaskResult %s", r.Result)
	}
	if strings.Contains(string(r.Result), "job-1") || strings.Contains(string(r.Result), `"jobs"`) {
		t.Fatalf("remote id or server name leaked: %s", r.Result)
	}
	rec, err := store.Get(context.Background(), created.TaskID)
	if err != nil || rec.RemoteID != "job-1" || rec.User != "alice" {
		t.Fatalf("record when CreateTaskResult arrived: %v %+v", err, rec)
	}
	// tasks/get through completion, with the raw JSON result.
	var done extTask
	waitUntil(t, func() bool {
		_, r := taskCall(t, url, alice, tasksCaps, "tasks/get", created.TaskID, "")
		done = decodeTask(t, r)
		return done.Status == "completed"
	})
	if done.TaskID != created.TaskID || done.Result == nil || string(done.Result.StructuredContent) != `{"ok":true,"polls":3}` ||
		len(done.Result.Content) == 0 || done.Result.Content[0].Text != `{"ok":true,"polls":3}` || done.Error != nil {
		t.Fatalf("completed task %+v", done)
	}

	// Unknown, malformed, forged and foreign ids are -32602.
	for _, c := range []struct {
		who map[string]string
		id  string
	}{{bob, created.TaskID}, {alice, "mcp-task-00000000000000000000000000000000"}, {alice, "nope"}, {alice, "mux-task-AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"}} {
		for _, method := range []string{"tasks/get", "tasks/cancel", "tasks/update"} {
			if _, r := taskCall(t, url, c.who, tasksCaps, method, c.id, `,"inputResponses":{}`); r.Error == nil || r.Error.Code != -32602 {
				t.Errorf("%s %s as %v: %s %+v, want -32602", method, c.id, c.who, r.Result, r.Error)
			}
		}
	}
	// Without the extension: -32021, for every tasks method.
	for _, method := range []string{"tasks/get", "tasks/cancel", "tasks/update"} {
		if _, r := taskCall(t, url, alice, `{}`, method, created.TaskID, `,"inputResponses":{}`); r.Error == nil || r.Error.Code != -32021 {
			t.Errorf("%s without the extension: %s %+v, want -32021", method, r.Result, r.Error)
		}
	}
	// The extension is not part of the legacy era: a session's tasks/get is -32601.
	status, h, body := rawRequest(t, http.MethodPost, url, alice, initializeBody)
	sid := h.Get("Mcp-Session-Id")
	if status != http.StatusOK || sid == "" {
		t.Fatalf("initialize: HTTP %d %s", status, body)
	}
	session := map[string]string{"X-User": "alice", "Mcp-Session-Id": sid, "Mcp-Protocol-Version": "2025-11-25"}
	rawRequest(t, http.MethodPost, url, session, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	_, _, body = rawRequest(t, http.MethodPost, url, session, `{"jsonrpc":"2.0","id":5,"method":"tasks/get","params":{"taskId":`+mustQuote(created.TaskID)+`}}`)
	if r := reply(t, body); r.Error == nil || r.Error.Code != -32601 {
		t.Errorf("legacy tasks/get: %s", body)
	}
	// Mcp-Name must name the task.
	if status, r := modernCall(t, url, map[string]string{"X-User": "alice", "Mcp-Name": "other"}, tasksCaps, "tasks/get", "", `"taskId":`+mustQuote(created.TaskID)); status != http.StatusBadRequest || r.Error == nil || r.Error.Code != -32020 {
		t.Errorf("Mcp-Name mismatch: HTTP %d %+v", status, r.Error)
	}

	// Cancel, with the task's notifications on subscriptions/listen.
	_, r = modernCall(t, url, alice, tasksCaps, "tools/call", "slow_submit_job", `"name":"slow_submit_job","arguments":{"input":"y"}`)
	running := decodeTask(t, r)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	listenBody := func(caps string, ids ...string) string {
		b, _ := json.Marshal(ids)
		return `{"jsonrpc":"2.0","id":"listen-7","method":"subscriptions/listen","params":{` + modernMeta(caps) + `,"notifications":{"taskIds":` + string(b) + `}}}`
	}
	lh := modernHeaders("subscriptions/listen", "")
	lh["X-User"] = "alice"
	if _, _, body := rawRequest(t, http.MethodPost, url, lh, listenBody(`{}`, running.TaskID)); !strings.Contains(body, "-32021") {
		t.Fatalf("listen for tasks without the extension: %s", body)
	}
	bad := modernHeaders("tools/list", "")
	bad["X-User"] = "alice"
	if status, _, body := rawRequest(t, http.MethodPost, url, bad, listenBody(tasksCaps, running.TaskID)); status != http.StatusBadRequest || !strings.Contains(body, "-32020") {
		t.Fatalf("listen for tasks with a mismatched Mcp-Method: HTTP %d %s", status, body)
	}
	s := openStream(t, ctx, url, lh, listenBody(tasksCaps, running.TaskID, created.TaskID+"x", "mcp-task-00000000000000000000000000000000"))
	ack := s.next(t)
	ab, _ := json.Marshal(ack)
	if ack["method"] != "notifications/subscriptions/acknowledged" || !strings.Contains(string(ab), `"taskIds":["`+running.TaskID+`"]`) ||
		!strings.Contains(string(ab), `"io.modelcontextprotocol/subscriptionId":"listen-7"`) {
		t.Fatalf("acknowledgement %s", ab)
	}
	if _, r := taskCall(t, url, alice, tasksCaps, "tasks/update", running.TaskID, `,"inputResponses":{"k":{"action":"accept"}}`); r.Error != nil || string(r.Result) != `{"resultType":"complete"}` {
		t.Fatalf("tasks/update: %s %+v", r.Result, r.Error)
	}
	if _, r := taskCall(t, url, alice, tasksCaps, "tasks/cancel", running.TaskID, ""); r.Error != nil || string(r.Result) != `{"resultType":"complete"}` {
		t.Fatalf("tasks/cancel: %s %+v", r.Result, r.Error)
	}
	for {
		n := s.next(t)
		nb, _ := json.Marshal(n)
		p, _ := n["params"].(map[string]any)
		if n["method"] != "notifications/tasks" || p["taskId"] != running.TaskID ||
			p["_meta"].(map[string]any)["io.modelcontextprotocol/subscriptionId"] != "listen-7" {
			t.Fatalf("task notification %s", nb)
		}
		if p["status"] == "cancelled" {
			break
		}
	}
	_, r = taskCall(t, url, alice, tasksCaps, "tasks/get", running.TaskID, "")
	if v := decodeTask(t, r); v.Status != "cancelled" || slow.Cancels()["job-1"] != 1 {
		t.Fatalf("after cancel: %+v, remote cancels %v", v, slow.Cancels())
	}
	// Cancelling a finished task is acknowledged, and changes nothing.
	if _, r := taskCall(t, url, alice, tasksCaps, "tasks/cancel", created.TaskID, ""); r.Error != nil {
		t.Fatalf("cancel of a completed task: %+v", r.Error)
	}

	// A client without the extension keeps DeerFlow's shape.
	_, r = modernCall(t, url, alice, `{}`, "tools/call", "jobs_submit_job", `"name":"jobs_submit_job","arguments":{"input":"z"}`)
	var legacy struct {
		ResultType        string `json:"resultType"`
		StructuredContent struct {
			TaskID string `json:"task_id"`
			Status string `json:"status"`
		} `json:"structuredContent"`
	}
	if r.Error != nil || json.Unmarshal(r.Result, &legacy) != nil || legacy.ResultType != "complete" ||
		!strings.HasPrefix(legacy.StructuredContent.TaskID, "mcp-task-") || legacy.StructuredContent.Status != "submitted" ||
		strings.Contains(string(r.Result), `"taskId"`) {
		t.Fatalf("submit without the extension: %s %+v", r.Result, r.Error)
	}
}

// tasksUpstream is a real 2026-07-28 server speaking the tasks extension
// (raw JSON-RPC over HTTP: go-sdk has no tasks): its tool "build" answers
// CreateTaskResult to a caller that declares the extension.
type tasksUpstream struct {
	mu       sync.Mutex
	calls    []string // method, taskId and Mcp-Name of each tasks/* request
	declared []bool   // whether each tools/call declared the extension
	gets     int
	updates  []string
	remote   string // the task id it hands out ("remote-7" unless set)
	ts       *httptest.Server
}

func newTasksUpstream(t *testing.T) *tasksUpstream {
	u := &tasksUpstream{}
	u.ts = httptest.NewServer(http.HandlerFunc(u.serve))
	t.Cleanup(u.ts.Close)
	return u
}

func (u *tasksUpstream) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params struct {
			Meta struct {
				Caps struct {
					Extensions map[string]any `json:"extensions"`
				} `json:"io.modelcontextprotocol/clientCapabilities"`
			} `json:"_meta"`
			TaskID         string          `json:"taskId"`
			InputResponses json.RawMessage `json:"inputResponses"`
		} `json:"params"`
	}
	b, _ := io.ReadAll(r.Body)
	if json.Unmarshal(b, &m) != nil {
		http.Error(w, "bad json", http.StatusBadRequest)
		return
	}
	if m.ID == nil {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	remote := "remote-7"
	if u.remote != "" {
		remote = u.remote
	}
	rq, _ := json.Marshal(remote)
	task := `"taskId":` + string(rq) + `,"createdAt":"2026-08-01T10:00:00Z","lastUpdatedAt":"2026-08-01T10:00:00Z","ttlMs":60000,"pollIntervalMs":50`
	var result string
	u.mu.Lock()
	switch m.Method {
	case "server/discover":
		result = `{"resultType":"complete","supportedVersions":["2026-07-28"],"capabilities":{"tools":{},"extensions":{"io.modelcontextprotocol/tasks":{}}},"serverInfo":{"name":"builder","version":"1"},"ttlMs":0,"cacheScope":"private"}`
	case "tools/list":
		result = `{"resultType":"complete","tools":[{"name":"build","inputSchema":{"type":"object"}}],"ttlMs":0,"cacheScope":"private"}`
	case "tools/call":
		_, ok := m.Params.Meta.Caps.Extensions["io.modelcontextprotocol/tasks"]
		u.declared = append(u.declared, ok)
		result = `{"resultType":"complete","content":[{"type":"text","text":"built synchronously"}]}`
		if ok {
			result = `{"resultType":"task","status":"working",` + task + `,"_meta":{"io.modelcontextprotocol/related-task":{"taskId":` + string(rq) + `}}}`
		}
	case "tasks/get", "tasks/update", "tasks/cancel":
		u.calls = append(u.calls, m.Method+" "+m.Params.TaskID+" "+r.Header.Get("Mcp-Name"))
		if m.Params.TaskID != remote {
			u.mu.Unlock()
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32602,"message":"Task not found"}}`, m.ID)
			return
		}
		result = `{"resultType":"complete"}`
		if m.Method == "tasks/update" {
			u.updates = append(u.updates, string(m.Params.InputResponses))
		}
		if m.Method == "tasks/get" {
			u.gets++
			result = `{"resultType":"complete","status":"working",` + task + `}`
			if u.gets > 1 {
				result = `{"resultType":"complete","status":"completed",` + task + `,"result":{"content":[{"type":"text","text":"built"}],"isError":false,"_meta":{"io.modelcontextprotocol/related-task":{"taskId":` + string(rq) + `}}}}`
			}
		}
	default:
		u.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"method not found"}}`, m.ID)
		return
	}
	u.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":%s}`, m.ID, result)
}

func (u *tasksUpstream) snapshot() ([]string, []bool, []string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.calls...), append([]bool(nil), u.declared...), append([]string(nil), u.updates...)
}

// An upstream with the extension: its task passes through under a sealed,
// namespaced id that any replica with the same key resolves.
func TestTasksExtensionPassthrough(t *testing.T) {
	up := newTasksUpstream(t)
	cfg := func(key string) string {
		return fmt.Sprintf(`{"mcpServers": {"builder": {"type": "http", "url": %q}},
			"inbound": {"auth": {"mode": "trusted_header"}, "user_header": "X-User", "request_state_key": %q}}`, up.ts.URL+"/mcp", key)
	}
	const key = "0123456789abcdef0123456789abcdef-replicas"
	m1, m2 := startMux(t, cfg(key), proxy.Options{}), startMux(t, cfg(key), proxy.Options{})
	other := startMux(t, cfg("another-key-another-key-another-key!"), proxy.Options{})
	url := m1.ts.URL + "/mcp"
	alice, bob := map[string]string{"X-User": "alice"}, map[string]string{"X-User": "bob"}

	// Durable tasks are off: discover advertises the extension for the server's sake.
	if _, r := modernCall(t, url, alice, `{}`, "server/discover", "", `"x":1`); !strings.Contains(string(r.Result), `"io.modelcontextprotocol/tasks":{}`) {
		t.Fatalf("discover: %s", r.Result)
	}
	_, r := modernCall(t, url, alice, tasksCaps, "tools/call", "builder_build", `"name":"builder_build","arguments":{}`)
	created := decodeTask(t, r)
	if created.ResultType != "task" || created.Status != "working" || !strings.HasPrefix(created.TaskID, "mux-task-") ||
		strings.Contains(string(r.Result), "remote-7") || strings.Contains(created.TaskID, "builder") {
		t.Fatalf("passed-through CreateTaskResult %s", r.Result)
	}
	if _, declared, _ := up.snapshot(); len(declared) != 1 || !declared[0] {
		t.Fatalf("the upstream call declared the extension: %v", declared)
	}
	// tasks/get reaches the server with its own id, on either replica.
	for _, mm := range []*mux{m1, m2} {
		_, r = taskCall(t, mm.ts.URL+"/mcp", alice, tasksCaps, "tasks/get", created.TaskID, "")
		if v := decodeTask(t, r); v.TaskID != created.TaskID {
			t.Fatalf("tasks/get: %s", r.Result)
		}
	}
	if v := decodeTask(t, r); v.Status != "completed" || v.Result == nil || v.Result.Content[0].Text != "built" ||
		strings.Contains(string(r.Result), "remote-7") || !strings.Contains(string(r.Result), `related-task":{"taskId":`+mustQuote(created.TaskID)) {
		t.Fatalf("completed passed-through task: %s", r.Result)
	}
	if _, r = taskCall(t, url, alice, tasksCaps, "tasks/update", created.TaskID, `,"inputResponses":{"q1":{"action":"accept","content":{"ok":true}}}`); r.Error != nil {
		t.Fatalf("tasks/update: %+v", r.Error)
	}
	if _, r = taskCall(t, url, alice, tasksCaps, "tasks/cancel", created.TaskID, ""); r.Error != nil || string(r.Result) != `{"resultType":"complete"}` {
		t.Fatalf("tasks/cancel: %s %+v", r.Result, r.Error)
	}
	calls, _, updates := up.snapshot()
	want := []string{"tasks/get remote-7 remote-7", "tasks/get remote-7 remote-7", "tasks/update remote-7 remote-7", "tasks/cancel remote-7 remote-7"}
	if strings.Join(calls, "|") != strings.Join(want, "|") || len(updates) != 1 || updates[0] != `{"q1":{"action":"accept","content":{"ok":true}}}` {
		t.Fatalf("upstream saw %q, updates %q", calls, updates)
	}
	// Another caller, a tampered id, another key: -32602, and nothing reaches the server.
	tampered := created.TaskID[:20] + map[bool]string{true: "B", false: "A"}[created.TaskID[20] == 'A'] + created.TaskID[21:]
	for _, c := range []struct {
		url string
		who map[string]string
		id  string
	}{{url, bob, created.TaskID}, {url, alice, tampered}, {other.ts.URL + "/mcp", alice, created.TaskID}} {
		if _, r := taskCall(t, c.url, c.who, tasksCaps, "tasks/get", c.id, ""); r.Error == nil || r.Error.Code != -32602 {
			t.Errorf("tasks/get %v: %s %+v, want -32602", c.who, r.Result, r.Error)
		}
	}
	if calls, _, _ := up.snapshot(); len(calls) != len(want) {
		t.Fatalf("refused requests reached the server: %q", calls)
	}
	// A caller without the extension is not offered a task.
	_, r = modernCall(t, url, alice, `{}`, "tools/call", "builder_build", `"name":"builder_build","arguments":{}`)
	if r.Error != nil || !strings.Contains(string(r.Result), "built synchronously") || strings.Contains(string(r.Result), `"task"`) {
		t.Fatalf("call without the extension: %s %+v", r.Result, r.Error)
	}
	if _, declared, _ := up.snapshot(); len(declared) != 2 || declared[1] {
		t.Fatalf("the second upstream call declared the extension: %v", declared)
	}
}

// Without inbound.request_state_key a passed-through task's id resolves
// only on the replica that issued it (each process seals under its own
// random key), and nothing reaches the server from another replica.
func TestTasksExtensionPassthroughWithoutKey(t *testing.T) {
	up := newTasksUpstream(t)
	cfg := fmt.Sprintf(`{"mcpServers": {"builder": {"type": "http", "url": %q}}}`, up.ts.URL+"/mcp")
	m1, m2 := startMux(t, cfg, proxy.Options{}), startMux(t, cfg, proxy.Options{})
	_, r := modernCall(t, m1.ts.URL+"/mcp", nil, tasksCaps, "tools/call", "builder_build", `"name":"builder_build","arguments":{}`)
	created := decodeTask(t, r)
	if _, r = taskCall(t, m2.ts.URL+"/mcp", nil, tasksCaps, "tasks/get", created.TaskID, ""); r.Error == nil || r.Error.Code != -32602 {
		t.Fatalf("tasks/get on another replica: %s %+v, want -32602", r.Result, r.Error)
	}
	if calls, _, _ := up.snapshot(); len(calls) != 0 {
		t.Fatalf("the other replica reached the server: %q", calls)
	}
	if _, r = taskCall(t, m1.ts.URL+"/mcp", nil, tasksCaps, "tasks/get", created.TaskID, ""); decodeTask(t, r).TaskID != created.TaskID {
		t.Fatalf("tasks/get on the issuing replica: %s", r.Result)
	}
}

// A server task id that is legal (at most 1024 bytes) but whose sealed,
// namespaced form would pass the bound on client task ids is refused when
// it is issued: mcp-mux never hands out a task id it cannot resolve.
func TestTasksExtensionPassthroughLongRemoteID(t *testing.T) {
	up := newTasksUpstream(t)
	up.remote = strings.Repeat("<", 1000) // escaped in JSON: six bytes each
	m := startMux(t, fmt.Sprintf(`{"mcpServers": {"builder": {"type": "http", "url": %q}}}`, up.ts.URL+"/mcp"), proxy.Options{})
	url := m.ts.URL + "/mcp"
	_, r := modernCall(t, url, nil, tasksCaps, "tools/call", "builder_build", `"name":"builder_build","arguments":{}`)
	if r.Error != nil {
		if !strings.Contains(r.Error.Message, `"builder"`) {
			t.Fatalf("refusal does not name the server: %+v", r.Error)
		}
		return
	}
	created := decodeTask(t, r)
	if _, r = taskCall(t, url, nil, tasksCaps, "tasks/get", created.TaskID, ""); r.Error != nil {
		t.Fatalf("the issued task id (%d bytes) does not resolve: %+v", len(created.TaskID), r.Error)
	}
}
