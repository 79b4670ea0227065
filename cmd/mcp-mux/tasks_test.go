package main

import (
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/internal/mcptest"
	"github.com/mcp-mux/mcp-mux/internal/storeclient"
	"github.com/mcp-mux/mcp-mux/internal/taskpoll"
)

// Durable tasks across real mux processes sharing a redis-server the test
// owns: replicas killed with SIGKILL, Redis stopped and restarted from its
// append-only file, and two replicas completing 1,000 tasks.

// taskConfig writes a config with the task server at url, durable tasks
// on Redis at redisURL (lease 5 s, the minimum) and polling every second.
func writeTaskConfig(t *testing.T, dir, url, redisURL, extra string) string {
	t.Helper()
	return writeFile(t, dir, "config.json", `{
  "mcpServers": {"jobs": `+mcptest.TaskServerJSON(url, "")+`},
  "mcp_tasks": {"enabled": true, "poll_interval_seconds": 1, "lease_seconds": 5`+extra+`},
  "store": {"redis_url": "`+redisURL+`", "key_prefix": "faults:"}
}`)
}

type threadRT struct{ thread string }

func (r threadRT) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.Header.Set("X-Mux-Thread-Id", r.thread)
	return http.DefaultTransport.RoundTrip(req)
}

func connectMux(t *testing.T, s *server) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "faults", Version: "1"}, nil)
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: s.url("/mcp"), HTTPClient: &http.Client{Transport: threadRT{"th"}}},
		&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	// "serving" comes before discovery: wait for the submit tool.
	waitCond(t, 30*time.Second, "the submit tool", func() bool {
		res, err := cs.ListTools(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, tl := range res.Tools {
			if tl.Name == "jobs_submit_job" {
				return true
			}
		}
		return false
	})
	return cs
}

// submit calls the submit tool and returns the local task id ("" and the
// error text when the call was a tool error).
func submit(t *testing.T, cs *mcp.ClientSession) (string, string) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "jobs_submit_job", Arguments: map[string]any{"input": "x"}})
	if err != nil {
		t.Fatalf("submit: %v", err)
	}
	if res.IsError {
		var parts []string
		for _, c := range res.Content {
			if tc, ok := c.(*mcp.TextContent); ok {
				parts = append(parts, tc.Text)
			}
		}
		return "", strings.Join(parts, " ")
	}
	b, _ := json.Marshal(res.StructuredContent)
	var out struct {
		TaskID string `json:"task_id"`
	}
	_ = json.Unmarshal(b, &out)
	return out.TaskID, ""
}

// taskStatuses reads the thread's tasks through the REST API.
func taskStatuses(t *testing.T, s *server) map[string]string {
	t.Helper()
	code, body := httpGet(t, newHTTPClient(t), s.url("/api/threads/th/mcp-tasks?limit=100"))
	if code != 200 {
		t.Fatalf("task list: %d %s", code, body)
	}
	var list []struct {
		TaskID string `json:"task_id"`
		Status string `json:"status"`
	}
	if err := json.Unmarshal([]byte(body), &list); err != nil {
		t.Fatalf("task list %s: %v", body, err)
	}
	out := map[string]string{}
	for _, x := range list {
		out[x.TaskID] = x.Status
	}
	return out
}

func waitCond(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func metricValue(t *testing.T, s *server, series string) float64 {
	t.Helper()
	_, body := httpGet(t, newHTTPClient(t), s.url("/metrics"))
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`).FindStringSubmatch(body)
	if m == nil {
		return 0
	}
	v, _ := strconv.ParseFloat(m[1], 64)
	return v
}

func TestTasksSurviveKilledReplica(t *testing.T) {
	rs := mcptest.StartRedis(t, false)
	up := &mcptest.TaskServer{HangFirst: true}
	upTS := mcptest.ServeHTTP(t, up.MCP())
	t.Cleanup(up.Unblock)
	dir := t.TempDir()
	cfg := writeTaskConfig(t, dir, upTS.URL+"/mcp", rs.URL(), "")
	a := startServe(t, dir, nil, "--config", cfg, "--listen", "127.0.0.1:0")
	cs := connectMux(t, a)
	const n = 5
	var ids []string
	for range n {
		id, msg := submit(t, cs)
		if id == "" {
			t.Fatalf("submit failed: %s", msg)
		}
		ids = append(ids, id)
	}
	// A holds every lease, its polls hanging on the upstream.
	waitCond(t, 20*time.Second, "every task polled once", func() bool {
		p := up.Polls()
		return len(p) == n
	})
	b := startServe(t, t.TempDir(), nil, "--config", cfg, "--listen", "127.0.0.1:0")
	if err := a.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-a.done
	waitCond(t, 30*time.Second, "replica B completing the tasks", func() bool {
		st := taskStatuses(t, b)
		done := 0
		for _, id := range ids {
			if st[id] == "completed" {
				done++
			}
		}
		return done == n
	})
	for job, at := range up.Polls() {
		if len(at) != 2 {
			t.Fatalf("%s polled %d times, want 2 (the killed replica's, then the survivor's)", job, len(at))
		}
		// The lease (5 s) starts at the claim, a little before the first
		// poll reaches the server (longer on a loaded machine); a second
		// poll within the lease would come one poll interval (1 s) after it.
		if gap := at[1].Sub(at[0]); gap < 4*time.Second {
			t.Fatalf("%s polled twice within one lease (%s apart)", job, gap)
		}
	}
	if v := metricValue(t, b, "mcp_mux_task_lease_takeovers_total"); v != n {
		t.Fatalf("lease takeovers = %v, want %d", v, n)
	}
}

func TestSIGTERMReleasesLeases(t *testing.T) {
	rs := mcptest.StartRedis(t, false)
	up := &mcptest.TaskServer{HangFirst: true}
	upTS := mcptest.ServeHTTP(t, up.MCP())
	t.Cleanup(up.Unblock)
	dir := t.TempDir()
	// A lease far longer than the test: only a release lets B in.
	cfg := writeFile(t, dir, "config.json", `{
  "mcpServers": {"jobs": `+mcptest.TaskServerJSON(upTS.URL+"/mcp", "")+`},
  "mcp_tasks": {"enabled": true, "poll_interval_seconds": 1, "lease_seconds": 600},
  "store": {"redis_url": "`+rs.URL()+`", "key_prefix": "term:"}
}`)
	a := startServe(t, dir, nil, "--config", cfg, "--listen", "127.0.0.1:0")
	id, msg := submit(t, connectMux(t, a))
	if id == "" {
		t.Fatalf("submit: %s", msg)
	}
	waitCond(t, 20*time.Second, "the first poll", func() bool { return len(up.Polls()) == 1 })
	b := startServe(t, t.TempDir(), nil, "--config", cfg, "--listen", "127.0.0.1:0")
	if code := a.stop(30 * time.Second); code != 0 {
		t.Fatalf("exit %d", code)
	}
	waitCond(t, 20*time.Second, "replica B completing the task", func() bool { return taskStatuses(t, b)[id] == "completed" })
	if v := metricValue(t, b, "mcp_mux_task_lease_takeovers_total"); v != 0 {
		t.Fatalf("takeovers = %v: the lease was not released", v)
	}
}

func TestTasksSurviveRedisOutageAndRestart(t *testing.T) {
	rs := mcptest.StartRedis(t, true) // appendonly, fsync always
	up := &mcptest.TaskServer{PollsToComplete: 2}
	upTS := mcptest.ServeHTTP(t, up.MCP())
	dir := t.TempDir()
	cfg := writeTaskConfig(t, dir, upTS.URL+"/mcp", rs.URL(), "")
	m := startServe(t, dir, nil, "--config", cfg, "--listen", "127.0.0.1:0")
	cs := connectMux(t, m)
	submitN := func(cs *mcp.ClientSession, n int) []string {
		var ids []string
		for range n {
			id, msg := submit(t, cs)
			if id == "" {
				t.Fatalf("submit failed: %s", msg)
			}
			ids = append(ids, id)
		}
		return ids
	}
	allCompleted := func(s *server, ids []string) func() bool {
		return func() bool {
			st := taskStatuses(t, s)
			for _, id := range ids {
				if st[id] != "completed" {
					return false
				}
			}
			return true
		}
	}
	first := submitN(cs, 3)

	// Redis stops for a while: submits fail cleanly without reaching the
	// upstream, /readyz says so, and polling pauses.
	rs.Stop()
	const claimFailed = "MCP task poll failed; retrying next interval"
	claimsBefore := strings.Count(m.stderr.String(), claimFailed)
	jobs := len(up.Polls())
	if id, msg := submit(t, cs); id != "" || !strings.Contains(msg, "durable task store is unavailable, so the task was not submitted") {
		t.Fatalf("submit with Redis down: %q %q", id, msg)
	}
	// /readyz stays ready (the replica serves what needs no store) and
	// says the store is down once its background probe has seen it.
	waitCond(t, 10*time.Second, "/readyz saying the task store is unreachable", func() bool {
		code, body := httpGet(t, newHTTPClient(t), m.url("/readyz"))
		return code == http.StatusOK && strings.Contains(body, `"task_store_reachable":false`)
	})
	// The outage lasts two poll rounds, each finding the store down:
	// nothing is to happen meanwhile.
	waitCond(t, 20*time.Second, "two poll rounds failing on the stopped store", func() bool {
		return strings.Count(m.stderr.String(), claimFailed) >= claimsBefore+2
	})
	if got := len(up.Polls()); got != jobs {
		t.Fatalf("a job appeared upstream while the store was down (%d → %d)", jobs, got)
	}
	// Redis comes back: the same mux resumes and finishes the tasks.
	rs.Start()
	waitCond(t, 30*time.Second, "the tasks completing after the outage", allCompleted(m, first))

	// Tasks in flight when both the mux and Redis die: Redis restarts from
	// its AOF, a new mux recovers them.
	second := submitN(cs, 2)
	_ = m.cmd.Process.Signal(syscall.SIGKILL)
	<-m.done
	rs.Stop()
	rs.Start()
	m2 := startServe(t, dir, nil, "--config", cfg, "--listen", "127.0.0.1:0")
	waitCond(t, 30*time.Second, "the tasks completing after the restart", allCompleted(m2, append(first, second...)))
	if st := taskStatuses(t, m2); len(st) != 5 {
		t.Fatalf("tasks after recovery: %v", st)
	}
	if p := up.Polls(); len(p) != 5 {
		t.Fatalf("jobs upstream: %d, want 5 (the refused submit never reached it)", len(p))
	}
}

func TestTwoReplicasComplete1000TasksExactlyOnce(t *testing.T) {
	rs := mcptest.StartRedis(t, false)
	up := &mcptest.TaskServer{}
	upTS := mcptest.ServeHTTP(t, up.MCP())
	dir := t.TempDir()
	cfg := writeTaskConfig(t, dir, upTS.URL+"/mcp", rs.URL(), `, "max_concurrent_polls": 32, "max_active_tasks_per_user": 1000`)

	// Every terminal event, as a third party on the store sees them.
	c, err := storeclient.Dial(rs.URL())
	if err != nil {
		t.Fatal(err)
	}
	watch := taskpoll.NewRedisStore(taskpoll.RedisOptions{Client: c, KeyPrefix: "faults:"})
	defer watch.Close()
	var mu sync.Mutex
	terminal := map[string]int{}
	const marker = "mcp-task-00000000000000000000000000000000" // no task's id
	markerSeen := false
	defer watch.Subscribe(func(e taskpoll.Event) {
		if e.TaskID == marker {
			mu.Lock()
			markerSeen = true
			mu.Unlock()
			return
		}
		if e.Status.Terminal() {
			mu.Lock()
			terminal[e.TaskID]++
			mu.Unlock()
		}
	})()

	replicas := []*server{
		startServe(t, dir, nil, "--config", cfg, "--listen", "127.0.0.1:0"),
		startServe(t, filepath.Join(t.TempDir()), nil, "--config", cfg, "--listen", "127.0.0.1:0"),
	}
	const n = 1000
	var wg sync.WaitGroup
	ids := make(chan string, n)
	for i, r := range replicas {
		cs := connectMux(t, r)
		for w := range 8 {
			wg.Go(func() {
				for k := w; k < n/2; k += 8 {
					id, msg := submit(t, cs)
					if id == "" {
						t.Errorf("replica %d submit: %s", i, msg)
						return
					}
					ids <- id
				}
			})
		}
	}
	wg.Wait()
	close(ids)
	if len(ids) != n {
		t.Fatalf("submitted %d", len(ids))
	}
	waitCond(t, 90*time.Second, "1000 terminal events", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(terminal) == n
	})
	// A marker published on the event channel after the 1000th terminal
	// event arrives after every event published before it: a duplicate
	// already sent has arrived by then.
	if err := c.Publish(context.Background(), "faults:events", `{"task_id":"`+marker+`","status":"working"}`).Err(); err != nil {
		t.Fatal(err)
	}
	waitCond(t, 10*time.Second, "the marker event", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return markerSeen
	})
	mu.Lock()
	for id, k := range terminal {
		if k != 1 {
			t.Errorf("%s: %d terminal events", id, k)
		}
	}
	mu.Unlock()
	for id := range ids {
		if _, ok := terminal[id]; !ok {
			t.Errorf("%s never finished", id)
		}
	}
	polls := up.Polls()
	if len(polls) != n {
		t.Fatalf("%d jobs polled", len(polls))
	}
	for job, at := range polls {
		if len(at) != 1 {
			t.Fatalf("%s polled %d times", job, len(at))
		}
	}
	if v := metricValue(t, replicas[0], `mcp_mux_tasks{status="completed"}`); v != n {
		t.Fatalf("completed tasks metric = %v", v)
	}
	var total float64
	for _, r := range replicas {
		total += metricValue(t, r, "mcp_mux_task_polls_total")
	}
	if total != n {
		t.Fatalf("polls by both replicas: %v, want %d", total, n)
	}
	for i, r := range replicas {
		if code := r.stop(20 * time.Second); code != 0 {
			t.Fatalf("replica %d exit %d", i, code)
		}
	}
}

func TestTaskToolsetsNeedTasksEnabled(t *testing.T) {
	dir := t.TempDir()
	cfg := writeFile(t, dir, "config.json", `{"mcpServers": {"jobs": `+mcptest.TaskServerJSON("http://127.0.0.1:1/mcp", "")+`}}`)
	want := "MCP task_toolsets are configured, so mcp_tasks.enabled=true is required"
	if r := runMux(t, dir, nil, "validate", cfg); r.code != 1 || !strings.Contains(r.stderr, want) {
		t.Fatalf("validate: %d %s", r.code, r.stderr)
	}
	if r := runMux(t, dir, nil, "serve", "--config", cfg, "--listen", "127.0.0.1:0"); r.code != 1 || !strings.Contains(r.stderr, want) {
		t.Fatalf("serve: %d %s", r.code, r.stderr)
	}
}
