package proxy_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/internal/api"
	"github.com/mcp-mux/mcp-mux/internal/config"
	"github.com/mcp-mux/mcp-mux/internal/doctest"
	"github.com/mcp-mux/mcp-mux/internal/mcptest"
	"github.com/mcp-mux/mcp-mux/internal/proxy"
	"github.com/mcp-mux/mcp-mux/internal/storeclient"
	"github.com/mcp-mux/mcp-mux/internal/taskpoll"
)

// taskMux runs mcp-mux with durable tasks on store, the task REST API
// mounted as cmd mounts it.
func taskMux(t *testing.T, cfgJSON string, store taskpoll.Store) (*proxy.Server, *httptest.Server) {
	t.Helper()
	return taskMuxWith(t, cfgJSON, store, nil)
}

// taskMuxWith is taskMux with its options passed through edit (nil: unchanged).
func taskMuxWith(t *testing.T, cfgJSON string, store taskpoll.Store, edit func(*proxy.Options)) (*proxy.Server, *httptest.Server) {
	t.Helper()
	cfg, err := config.Parse([]byte(cfgJSON), config.LoadOptions{Filename: "test.json", LookupEnv: func(string) (string, bool) { return "", false }})
	if err != nil || len(cfg.Invalid) > 0 {
		t.Fatalf("config: %v %+v", err, cfg.Invalid)
	}
	opts := proxy.Options{
		Logger:    hclog.New(&hclog.LoggerOptions{Output: &mcptest.LogBuffer{}, Level: hclog.Trace}),
		TaskStore: store, TaskConfig: taskpoll.Config{PollInterval: 20 * time.Millisecond, Lease: 10 * time.Second},
		RetryMin: 20 * time.Millisecond, RetryMax: 200 * time.Millisecond,
	}
	if edit != nil {
		edit(&opts)
	}
	srv := proxy.New(opts)
	if err := srv.Apply(cfg); err != nil {
		t.Fatal(err)
	}
	routes := http.NewServeMux()
	api.MountTasks(routes, api.TasksOptions{Service: srv.Tasks(), Authenticated: srv.Authenticated})
	routes.Handle("/", srv.Handler())
	ts := httptest.NewServer(routes)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Close(ctx)
		ts.Close()
		_ = store.Close()
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := srv.WaitDiscovery(ctx); err != nil {
		t.Fatal(err)
	}
	return srv, ts
}

func TestDurableTasksBolt(t *testing.T) {
	st, err := taskpoll.OpenBoltStore(taskpoll.BoltOptions{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	durableTaskFlow(t, st)
}

func TestDurableTasksRedis(t *testing.T) {
	r := mcptest.StartRedis(t, false)
	c, err := storeclient.Dial(r.URL())
	if err != nil {
		t.Fatal(err)
	}
	durableTaskFlow(t, taskpoll.NewRedisStore(taskpoll.RedisOptions{Client: c, KeyPrefix: "e2e:"}))
}

func durableTaskFlow(t *testing.T, st taskpoll.Store) {
	up := &mcptest.TaskServer{PollsToComplete: 2}
	upTS := mcptest.ServeHTTP(t, up.MCP())
	_, ts := taskMux(t, `{"mcpServers": {"jobs": `+mcptest.TaskServerJSON(upTS.URL+"/mcp", `, "headers": {"X-Server-Key": "static-key"}`)+`},
		"mcp_tasks": {"enabled": true}, "inbound": {"auth": {"mode": "trusted_header"}}}`, st)

	var mu sync.Mutex
	var updated []string
	var logs []string
	rt := &clientRT{static: http.Header{"X-Mux-User": {"alice"}, "X-Mux-Thread-Id": {"th-1"}, "X-Mux-Secrets": {`{"token":"caller-secret"}`}}}
	c := mcp.NewClient(&mcp.Implementation{Name: "c", Version: "1"}, &mcp.ClientOptions{
		ResourceUpdatedHandler: func(_ context.Context, r *mcp.ResourceUpdatedNotificationRequest) {
			mu.Lock()
			updated = append(updated, r.Params.URI)
			mu.Unlock()
		},
		LoggingMessageHandler: func(_ context.Context, r *mcp.LoggingMessageRequest) {
			b, _ := json.Marshal(r.Params.Data)
			mu.Lock()
			logs = append(logs, string(b))
			mu.Unlock()
		},
	})
	ctx := context.Background()
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: ts.URL + "/mcp", HTTPClient: &http.Client{Transport: rt}}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if err := cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "info"}); err != nil {
		t.Fatal(err)
	}

	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range tools.Tools {
		names = append(names, tl.Name)
		if tl.Name == "jobs_submit_job" && !strings.HasSuffix(tl.Description, "Start a job.\n\nSubmitted as durable background task 'job'; returns a task ID immediately and status polling is handled automatically.") {
			t.Fatalf("submit description %q", tl.Description)
		}
	}
	for _, want := range []string{"jobs_submit_job", "list_background_tasks", "cancel_background_task", "get_background_task"} {
		if !contains(names, want) {
			t.Fatalf("tools %v lack %s", names, want)
		}
	}
	if contains(names, "jobs_job_status") || contains(names, "jobs_cancel_job") {
		t.Fatalf("status/cancel visible: %v", names)
	}

	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "jobs_submit_job", Arguments: map[string]any{"input": "x"}})
	if err != nil || res.IsError {
		t.Fatalf("submit: %v %+v", err, res)
	}
	raw, _ := json.Marshal(res)
	if strings.Contains(string(raw), "job-1") || strings.Contains(string(raw), `"jobs"`) {
		t.Fatalf("remote id or server name leaked: %s", raw)
	}
	var sub struct {
		TaskID, TaskName, Status, Message string
	}
	b, _ := json.Marshal(res.StructuredContent)
	_ = json.Unmarshal(b, &struct {
		TaskID   *string `json:"task_id"`
		TaskName *string `json:"task_name"`
		Status   *string `json:"status"`
		Message  *string `json:"message"`
	}{&sub.TaskID, &sub.TaskName, &sub.Status, &sub.Message})
	if sub.TaskName != "job" || sub.Status != "submitted" || sub.Message != taskpoll.SubmitMessage || !strings.HasPrefix(sub.TaskID, "mcp-task-") {
		t.Fatalf("submit result %s", b)
	}
	uri := taskpoll.ResourcePrefix + sub.TaskID
	if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: uri}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(logs) > 0 && strings.Contains(logs[len(logs)-1], `"completed"`) && contains(updated, uri)
	})

	text, _ := callText(t, cs, "get_background_task", map[string]any{"task_id": sub.TaskID})
	var detail map[string]any
	if err := json.Unmarshal([]byte(text), &detail); err != nil || detail["status"] != "completed" || detail["result"].(map[string]any)["ok"] != true {
		t.Fatalf("get: %s", text)
	}
	rr, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
	if err != nil || len(rr.Contents) != 1 || !strings.Contains(rr.Contents[0].Text, `"status":"completed"`) {
		t.Fatalf("read resource: %v %+v", err, rr)
	}
	if text, _ := callText(t, cs, "list_background_tasks", map[string]any{}); !strings.Contains(text, `"count":1`) {
		t.Fatalf("list: %s", text)
	}
	// Polls carry the server's own credentials, never the caller's secrets.
	for _, h := range up.StatusHeaders() {
		if h.Get("X-Server-Key") != "static-key" || h.Get("X-Mux-Secrets") != "" {
			t.Fatalf("status call headers: %v", h)
		}
	}
	if n := len(up.Polls()["job-1"]); n != 3 {
		t.Fatalf("status calls %d, want 3", n)
	}

	// The REST API: the owner's thread only.
	get := func(method, path, user string) (int, string) {
		req, _ := http.NewRequest(method, ts.URL+path, nil)
		req.Header.Set("X-Mux-User", user)
		resp, err := testHTTP.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	if code, body := get("GET", "/api/threads/th-1/mcp-tasks", "alice"); code != 200 || !strings.Contains(body, sub.TaskID) || strings.Contains(body, "job-1") {
		t.Fatalf("list: %d %s", code, body)
	}
	if code, body := get("GET", "/api/threads/th-1/mcp-tasks/"+sub.TaskID, "alice"); code != 200 || !strings.Contains(body, `"result":{"ok":true,"polls":3}`) {
		t.Fatalf("detail: %d %s", code, body)
	}
	for _, c := range []struct{ path, user string }{{"/api/threads/th-1/mcp-tasks/" + sub.TaskID, "bob"}, {"/api/threads/th-2/mcp-tasks/" + sub.TaskID, "alice"}} {
		if code, body := get("GET", c.path, c.user); code != 404 || !strings.Contains(body, "MCP task not found") {
			t.Fatalf("%s as %s: %d %s", c.path, c.user, code, body)
		}
	}
	if code, body := get("GET", "/api/threads/th-1/mcp-tasks", "bob"); code != 200 || body != "[]\n" {
		t.Fatalf("bob's list: %d %s", code, body)
	}
	if code, _ := get("GET", "/api/threads/th-1/mcp-tasks", ""); code != 401 {
		t.Fatalf("anonymous: %d", code)
	}
	// A cancel through the API of a finished task changes nothing.
	if code, body := get("POST", "/api/threads/th-1/mcp-tasks/"+sub.TaskID+"/cancel", "alice"); code != 200 || !strings.Contains(body, `"status":"completed"`) {
		t.Fatalf("cancel: %d %s", code, body)
	}
}

func TestCancelThroughBuiltinAndAPI(t *testing.T) {
	st, _ := taskpoll.OpenBoltStore(taskpoll.BoltOptions{Dir: t.TempDir()})
	up := &mcptest.TaskServer{PollsToComplete: 1 << 30} // never finishes on its own
	upTS := mcptest.ServeHTTP(t, up.MCP())
	_, ts := taskMux(t, `{"mcpServers": {"jobs": `+mcptest.TaskServerJSON(upTS.URL+"/mcp", "")+`}, "mcp_tasks": {"enabled": true}}`, st)
	rt := &clientRT{static: http.Header{"X-Mux-Thread-Id": {"th"}}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "c", Version: "1"}, nil).Connect(context.Background(),
		&mcp.StreamableClientTransport{Endpoint: ts.URL + "/mcp", HTTPClient: &http.Client{Transport: rt}}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	for range 2 {
		if _, res := callText(t, cs, "jobs_submit_job", map[string]any{"input": "x"}); res.IsError {
			t.Fatal("submit failed")
		}
	}
	if text, _ := callText(t, cs, "cancel_background_task", map[string]any{}); !strings.Contains(text, "More than one active background task matches") {
		t.Fatalf("ambiguous: %s", text)
	}
	text, _ := callText(t, cs, "list_background_tasks", map[string]any{"active_only": true})
	var list struct {
		Tasks []struct {
			TaskID string `json:"task_id"`
		} `json:"tasks"`
	}
	_ = json.Unmarshal([]byte(text), &list)
	if len(list.Tasks) != 2 {
		t.Fatalf("list %s", text)
	}
	if text, _ := callText(t, cs, "cancel_background_task", map[string]any{"task": list.Tasks[0].TaskID}); !strings.Contains(text, `"cancel_requested":true`) {
		t.Fatalf("cancel: %s", text)
	}
	resp, err := testHTTP.Post(ts.URL+"/api/threads/th/mcp-tasks/"+list.Tasks[1].TaskID+"/cancel", "application/json", nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("API cancel: %v %v", err, resp)
	}
	resp.Body.Close()
	waitUntil(t, func() bool { c := up.Cancels(); return c["job-1"] == 1 && c["job-2"] == 1 })
	waitUntil(t, func() bool {
		text, _ := callText(t, cs, "list_background_tasks", map[string]any{"active_only": true})
		return strings.Contains(text, `"count":0`)
	})
}

func TestTaskToolsetsWithTasksOff(t *testing.T) {
	up := &mcptest.TaskServer{}
	upTS := mcptest.ServeHTTP(t, up.MCP())
	cfgJSON := `{"mcpServers": {"jobs": ` + mcptest.TaskServerJSON(upTS.URL+"/mcp", "") + `}}`
	cfg, _ := config.Parse([]byte(cfgJSON), config.LoadOptions{Filename: "t.json"})
	if err := proxy.TaskStartupError(cfg); err == nil || !strings.Contains(err.Error(), "mcp_tasks.enabled=true is required") {
		t.Fatalf("startup error: %v", err)
	}
	m := startMux(t, cfgJSON, proxy.Options{})
	names := toolNames(t, connect(t, m.ts.URL, nil))
	for _, n := range []string{"jobs_submit_job", "jobs_job_status", "jobs_cancel_job", "list_background_tasks"} {
		if contains(names, n) {
			t.Fatalf("%s exposed without durable tasks: %v", n, names)
		}
	}
}

func TestReloadRefusesTaskServerConnectionChange(t *testing.T) {
	st, _ := taskpoll.OpenBoltStore(taskpoll.BoltOptions{Dir: t.TempDir()})
	up := &mcptest.TaskServer{}
	upTS := mcptest.ServeHTTP(t, up.MCP())
	other := mcptest.ServeHTTP(t, mcptest.NewServer("other"))
	jobs := mcptest.TaskServerJSON(upTS.URL+"/mcp", "")
	srv, ts := taskMux(t, `{"mcpServers": {"jobs": `+jobs+`, "other": {"type": "http", "url": "`+other.URL+`/mcp"}}, "mcp_tasks": {"enabled": true}}`, st)
	next, _ := config.Parse([]byte(`{"mcpServers": {"jobs": `+mcptest.TaskServerJSON("http://127.0.0.1:1/mcp", "")+`,
		"other": {"type": "http", "url": "`+other.URL+`/mcp", "tool_name_prefix": false}}, "mcp_tasks": {"enabled": true}}`), config.LoadOptions{Filename: "t.json"})
	if err := srv.Apply(next); err != nil {
		t.Fatal(err)
	}
	cs := connect(t, ts.URL, nil)
	waitUntil(t, func() bool { return contains(toolNames(t, cs), "echo") }) // the other server reloaded
	if _, res := callText(t, cs, "jobs_submit_job", map[string]any{"input": "x"}); res.IsError {
		t.Fatal("the task server stopped working")
	}
	body := mcptestGet(t, ts.URL+"/metrics")
	if !strings.Contains(body, `mcp_mux_tasks{status="submitted"} 1`) {
		t.Fatalf("task metrics missing:\n%s", grepLines(body, "mcp_mux_task"))
	}
}

func mcptestGet(t *testing.T, url string) string {
	t.Helper()
	resp, err := testHTTP.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 15s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestDuplicateRemoteTaskID: an upstream whose submit answers a task id this
// caller's other task already tracks gets no cancel for it (that would
// cancel the tracked task), and the caller is told so: the message names
// the duplicate and never says the task was cancelled.
func TestDuplicateRemoteTaskID(t *testing.T) {
	st, _ := taskpoll.OpenBoltStore(taskpoll.BoltOptions{Dir: t.TempDir()})
	up := &mcptest.TaskServer{PollsToComplete: 1 << 30, SameRemoteID: "job-same"}
	upTS := mcptest.ServeHTTP(t, up.MCP())
	_, ts := taskMux(t, `{"mcpServers": {"jobs": `+mcptest.TaskServerJSON(upTS.URL+"/mcp", "")+`}, "mcp_tasks": {"enabled": true}}`, st)
	rt := &clientRT{static: http.Header{"X-Mux-Thread-Id": {"th"}}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "c", Version: "1"}, nil).Connect(context.Background(),
		&mcp.StreamableClientTransport{Endpoint: ts.URL + "/mcp", HTTPClient: &http.Client{Transport: rt}}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if text, res := callText(t, cs, "jobs_submit_job", map[string]any{"input": "a"}); res.IsError {
		t.Fatalf("first submit: %s", text)
	}
	text, res := callText(t, cs, "jobs_submit_job", map[string]any{"input": "b"})
	if !res.IsError || up.Submits() != 2 {
		t.Fatalf("second submit: error %v, submits %d: %s", res.IsError, up.Submits(), text)
	}
	if strings.Contains(text, "was cancelled") || !strings.Contains(text, "'job-same' is already tracked") || !strings.Contains(text, "not cancelled") {
		t.Fatalf("duplicate message: %q", text)
	}
	// The submit's error is returned after every remote call it makes: a
	// cancel, had one been sent, is counted by now.
	if c := up.Cancels(); c["job-same"] != 0 {
		t.Fatalf("cancels sent for the duplicate: %v", c)
	}
	text, _ = callText(t, cs, "list_background_tasks", map[string]any{"active_only": true})
	if !strings.Contains(text, `"count":1`) {
		t.Fatalf("the first task is no longer tracked: %s", text)
	}
}

// pendingJobsMux runs mcp-mux with durable tasks on bolt in front of a
// task server whose jobs never complete, and connects a client calling as
// thread "th".
func pendingJobsMux(t *testing.T) (*httptest.Server, *mcp.ClientSession) {
	t.Helper()
	up := &mcptest.TaskServer{PollsToComplete: 1 << 30}
	upTS := mcptest.ServeHTTP(t, up.MCP())
	_, ts := taskMux(t, `{"mcpServers": {"jobs": `+mcptest.TaskServerJSON(upTS.URL+"/mcp", "")+`}, "mcp_tasks": {"enabled": true}}`, boltStore(t))
	rt := &clientRT{static: http.Header{"X-Mux-Thread-Id": {"th"}}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "c", Version: "1"}, nil).Connect(context.Background(),
		&mcp.StreamableClientTransport{Endpoint: ts.URL + "/mcp", HTTPClient: &http.Client{Transport: rt}}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return ts, cs
}

// boltStore opens a bolt task store in a temporary directory (taskMux
// closes it; other callers close it themselves).
func boltStore(t *testing.T) taskpoll.Store {
	t.Helper()
	st, err := taskpoll.OpenBoltStore(taskpoll.BoltOptions{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// TestTaskToolTextsNameNoDeerFlow: what the built-in task tools and a
// submit tool say to a client (descriptions, schemas, results, errors)
// never names DeerFlow: mcp-mux is not DeerFlow.
func TestTaskToolTextsNameNoDeerFlow(t *testing.T) {
	_, cs := pendingJobsMux(t)
	var seen []string // every text a client was shown
	tools, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	builtins := 0
	for _, tl := range tools.Tools {
		if taskpoll.IsBuiltin(tl.Name) || tl.Name == "jobs_submit_job" {
			builtins++
			b, _ := json.Marshal(tl)
			seen = append(seen, string(b))
		}
	}
	if builtins != 4 {
		t.Fatalf("task tools listed: %d of 4", builtins)
	}
	call := func(name string, args any) string {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			t.Fatalf("call %s: %v", name, err)
		}
		b, _ := json.Marshal(res)
		seen = append(seen, string(b))
		return string(b)
	}
	call(taskpoll.ToolCancel, map[string]any{}) // nothing active
	submitted := call("jobs_submit_job", map[string]any{"input": "x"})
	call("jobs_submit_job", map[string]any{"input": "y"})
	call(taskpoll.ToolCancel, map[string]any{})               // ambiguous
	call(taskpoll.ToolList, map[string]any{"active_only": 7}) // invalid arguments
	call(taskpoll.ToolList, map[string]any{})
	call(taskpoll.ToolGet, map[string]any{"task_id": "mcp-task-unknown"})
	var sub struct {
		StructuredContent struct {
			TaskID string `json:"task_id"`
		} `json:"structuredContent"`
	}
	if err := json.Unmarshal([]byte(submitted), &sub); err != nil || sub.StructuredContent.TaskID == "" {
		t.Fatalf("submit: %v %s", err, submitted)
	}
	call(taskpoll.ToolGet, map[string]any{"task_id": sub.StructuredContent.TaskID})
	if out := call(taskpoll.ToolCancel, map[string]any{"task": sub.StructuredContent.TaskID}); !strings.Contains(out, "Cancellation requested") {
		t.Fatalf("cancel: %s", out)
	}
	for _, s := range seen {
		if strings.Contains(strings.ToLower(s), "deerflow") {
			t.Errorf("a task tool text names DeerFlow: %s", s)
		}
	}
}

// TestTaskAPIThreadIsThePath: the task REST API's thread is the path's
// {thread_id} (DESIGN §2.5), whatever thread header the API request
// carries, and docs/tasks.md says so.
func TestTaskAPIThreadIsThePath(t *testing.T) {
	ts, cs := pendingJobsMux(t)
	_, res := callText(t, cs, "jobs_submit_job", map[string]any{"input": "x"})
	id, _ := res.StructuredContent.(map[string]any)["task_id"].(string)
	if res.IsError || id == "" {
		t.Fatalf("submit: %+v", res)
	}
	get := func(method, path, threadHeader string) (int, string) {
		req, _ := http.NewRequest(method, ts.URL+path, nil)
		req.Header.Set("X-Mux-Thread-Id", threadHeader)
		resp, err := testHTTP.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, c := range []struct {
		method, path, header string
		code                 int
		has                  string
	}{
		{"GET", "/api/threads/th/mcp-tasks", "elsewhere", 200, id},
		{"GET", "/api/threads/elsewhere/mcp-tasks", "th", 200, "[]"},
		{"GET", "/api/threads/th/mcp-tasks/" + id, "elsewhere", 200, id},
		{"GET", "/api/threads/elsewhere/mcp-tasks/" + id, "th", 404, "MCP task not found"},
		{"POST", "/api/threads/elsewhere/mcp-tasks/" + id + "/cancel", "th", 404, "MCP task not found"},
		{"POST", "/api/threads/th/mcp-tasks/" + id + "/cancel", "elsewhere", 200, `"cancel_requested":true`},
	} {
		if code, body := get(c.method, c.path, c.header); code != c.code || !strings.Contains(body, c.has) {
			t.Errorf("%s %s (thread header %q) = %d %s, want %d with %s", c.method, c.path, c.header, code, body, c.code, c.has)
		}
	}
	page, err := doctest.Load("docs/tasks.md")
	if err != nil {
		t.Fatal(err)
	}
	section := page.Text[strings.Index(page.Text, "- **REST API**"):]
	section = section[:strings.Index(section, "\n- **")]
	if !strings.Contains(section, "The thread is the path's `{thread_id}`") || strings.Contains(section, "The thread is the caller's") {
		t.Errorf("docs/tasks.md's task REST API bullet does not say the path names the thread:\n%s", section)
	}
}
