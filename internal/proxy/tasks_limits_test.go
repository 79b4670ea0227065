package proxy_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/internal/mcptest"
	"github.com/mcp-mux/mcp-mux/internal/storeclient"
	"github.com/mcp-mux/mcp-mux/internal/taskpoll"
)

// Issue 17, attack 10 through the MCP surface: past
// mcp_tasks.max_active_tasks_per_user a submit is a tool error naming the
// cap in both eras (2025-11-25 sessions, 2026-07-28 with and without the
// tasks extension), the upstream's
// submit tool is not called, another caller still submits, a cancelled
// task frees its slot, and CreateTaskResult's ttlMs is the retention.
func TestTaskCapBolt(t *testing.T) {
	st, err := taskpoll.OpenBoltStore(taskpoll.BoltOptions{Dir: t.TempDir(), MaxActivePerUser: 2})
	if err != nil {
		t.Fatal(err)
	}
	taskCapFlow(t, st)
}

func TestTaskCapRedis(t *testing.T) {
	r := mcptest.StartRedis(t, false)
	c, err := storeclient.Dial(r.URL())
	if err != nil {
		t.Fatal(err)
	}
	taskCapFlow(t, taskpoll.NewRedisStore(taskpoll.RedisOptions{Client: c, KeyPrefix: "cap:", MaxActivePerUser: 2}))
}

func taskCapFlow(t *testing.T, st taskpoll.Store) {
	jobs := &mcptest.TaskServer{PollsToComplete: 1 << 30}
	uj := mcptest.ServeHTTP(t, jobs.MCP())
	_, ts := taskMux(t, `{"mcpServers": {"jobs": `+mcptest.TaskServerJSON(uj.URL+"/mcp", "")+`}, "mcp_tasks": {"enabled": true},
		"inbound": {"auth": {"mode": "trusted_header"}, "user_header": "X-User"}}`, st)
	url := ts.URL + "/mcp"
	alice, bob := map[string]string{"X-User": "alice"}, map[string]string{"X-User": "bob"}
	submit := func(who map[string]string, caps string) rpcReply {
		t.Helper()
		_, r := modernCall(t, url, who, caps, "tools/call", "jobs_submit_job", `"name":"jobs_submit_job","arguments":{"input":"x"}`)
		if r.Error != nil {
			t.Fatalf("submit: %+v", r.Error)
		}
		return r
	}
	refused := func(r rpcReply) bool {
		var res struct {
			IsError bool `json:"isError"`
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
		}
		_ = json.Unmarshal(r.Result, &res)
		return res.IsError && len(res.Content) == 1 && strings.Contains(res.Content[0].Text, "mcp_tasks.max_active_tasks_per_user") &&
			strings.Contains(res.Content[0].Text, "2")
	}

	first := decodeTask(t, submit(alice, tasksCaps))
	if first.ResultType != "task" || string(first.TTLMs) != "604800000" {
		t.Fatalf("CreateTaskResult %+v: ttlMs must be the retention (7 days)", first)
	}
	if r := submit(alice, `{}`); refused(r) || !strings.Contains(string(r.Result), `"submitted"`) {
		t.Fatalf("2nd submit: %s", r.Result)
	}
	for _, caps := range []string{tasksCaps, `{}`} {
		if r := submit(alice, caps); !refused(r) {
			t.Fatalf("3rd submit (caps %s) was not refused naming the cap: %s", caps, r.Result)
		}
	}
	// A 2025-11-25 session of alice is refused the same way.
	ctx := context.Background()
	c := mcp.NewClient(&mcp.Implementation{Name: "c", Version: "1"}, nil)
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: &clientRT{base: tr, static: http.Header{"X-User": {"alice"}}}}},
		&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "jobs_submit_job", Arguments: map[string]any{"input": "x"}})
	if err != nil {
		t.Fatal(err)
	}
	if raw, _ := json.Marshal(res); !refused(rpcReply{Result: raw}) {
		t.Fatalf("a 2025-11-25 submit past the cap: %s", raw)
	}
	if n := jobs.Submits(); n != 2 {
		t.Fatalf("the upstream's submit tool ran %d times, want 2 (refused submits must not reach it)", n)
	}
	if r := submit(bob, tasksCaps); refused(r) {
		t.Fatalf("bob was refused for alice's tasks: %s", r.Result)
	}

	// Cancelling one frees its slot once the poller has cancelled it remotely.
	if _, r := taskCall(t, url, alice, tasksCaps, "tasks/cancel", first.TaskID, ""); r.Error != nil {
		t.Fatalf("tasks/cancel: %+v", r.Error)
	}
	deadline := time.Now().Add(10 * time.Second)
	for r := submit(alice, tasksCaps); refused(r); r = submit(alice, tasksCaps) {
		if time.Now().After(deadline) {
			t.Fatal("a cancelled task's slot was not freed within 10s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if n := jobs.Submits(); n != 4 {
		t.Fatalf("the upstream's submit tool ran %d times, want 4", n)
	}
}
