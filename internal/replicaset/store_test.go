package replicaset_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestFlowsOnRedisCluster (issue 34): every flow, both clients, through
// three replicas sharing a Redis Cluster of three masters (sessions on any
// replica, server→client requests, durable tasks, a shared limits rule),
// then again while the replicas restart in turn; the keys land on every
// master and no replica logs a cross-slot or redirection error.
func TestFlowsOnRedisCluster(t *testing.T) {
	fx := newFixtureOn(t, 3, "cluster", cfgOpts{limits: true})
	storeFlows(t, fx)
	// 48 more sessions over the 16 groups: each master owns 5 or 6 of them.
	for i := range 48 {
		if code := openSession(t, fx.set.URL()); code != http.StatusOK {
			t.Fatalf("initialize %d: HTTP %d", i, code)
		}
	}
	keys := fx.set.Cluster().Keys()
	t.Logf("keys per master: %v", keys)
	for i, n := range keys {
		if n == 0 {
			t.Errorf("master %d holds no key: %v", i, keys)
		}
	}
}

// TestFlowsOnRedisSentinel (issue 34): the same through a primary, its
// replica and three sentinels.
func TestFlowsOnRedisSentinel(t *testing.T) {
	fx := newFixtureOn(t, 3, "sentinel", cfgOpts{limits: true})
	storeFlows(t, fx)
}

// storeFlows runs every flow with both clients, then again while each
// replica restarts, and checks the replicas' logs.
func storeFlows(t *testing.T, fx *fixture) {
	t.Helper()
	t.Run("go-sdk", func(t *testing.T) { runGoFlows(t, fx) })
	t.Run("typescript", func(t *testing.T) { runTSFlows(t, fx) })
	restarted := make(chan error, 1)
	go func() { restarted <- fx.set.RollingRestart(context.Background()) }()
	t.Run("go-sdk during a rolling restart", func(t *testing.T) { runGoFlows(t, fx) })
	if err := <-restarted; err != nil {
		t.Fatalf("rolling restart: %v", err)
	}
	for i, n := range logSpread(t, fx) {
		if n == 0 {
			t.Errorf("replica %d served no request", i)
		}
	}
	for i := range fx.set.Len() {
		logs := fx.set.Logs(i)
		for _, bad := range []string{"CROSSSLOT", "MOVED", "non local key", "limits: the store is unreachable", "limits: renewing leases", "task store is unreachable"} {
			if strings.Contains(logs, bad) {
				t.Errorf("replica %d logged %q", i, bad)
			}
		}
	}
}

// TestSentinelFailover (issue 34): two replicas on Sentinel; a session
// makes calls and 8 durable tasks are in flight when the primary is
// SIGKILLed. The session answers again within 15 s of the kill, all 8
// tasks complete (each creation waited for the replica: WAIT 1), and no
// mux exits.
func TestSentinelFailover(t *testing.T) {
	fx := newFixtureOn(t, 2, "sentinel", cfgOpts{})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, err := connectGo(ctx, fx.set.URL(), "go-failover")
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	const tasks = 8
	ids := make([]string, tasks)
	for i := range tasks {
		res, _, err := c.call(ctx, "jobs_submit_job", map[string]any{"input": fmt.Sprintf("fo-%d", i)}, nil)
		if err != nil || res.IsError {
			t.Fatalf("submit %d: %v %+v", i, err, res)
		}
		ids[i] = taskIDOf(t, res)
	}
	// Calls that read the store keep going through the kill; record when
	// they answer again.
	var mu sync.Mutex
	var lastOK, lastErr time.Time
	var errs int
	loopCtx, stopLoop := context.WithCancel(ctx)
	var loop sync.WaitGroup
	loop.Go(func() {
		for loopCtx.Err() == nil {
			cctx, ccancel := context.WithTimeout(loopCtx, 5*time.Second)
			_, err := taskStatus(cctx, c, ids[0])
			ccancel()
			mu.Lock()
			if err == nil {
				lastOK = time.Now()
			} else if loopCtx.Err() == nil {
				lastErr, errs = time.Now(), errs+1
			}
			mu.Unlock()
			time.Sleep(100 * time.Millisecond)
		}
	})
	time.Sleep(time.Second)
	s := fx.set.Sentinel()
	primary := s.Master()
	killed := time.Now()
	s.KillPrimary()
	t.Logf("SIGKILLed the primary %s", primary)
	// The session answers again within 15 s.
	if err := waitUntil(ctx, 15*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return lastOK.After(killed) && lastOK.After(lastErr)
	}); err != nil {
		t.Fatalf("the session did not answer again within 15 s of the kill (%d failed calls)", errs)
	}
	mu.Lock()
	pause := time.Duration(0)
	if !lastErr.IsZero() {
		pause = lastErr.Sub(killed)
	}
	mu.Unlock()
	t.Logf("failover: new primary %s; calls failed for %s after the kill (%d failed calls)", s.Master(), pause.Round(time.Millisecond), errs)
	for i := range tasks {
		fx.jobs.Release(fmt.Sprintf("fo-%d", i))
	}
	for i, id := range ids {
		var st string
		if err := waitUntil(ctx, 30*time.Second, func() bool {
			st, _ = taskStatus(ctx, c, id)
			return st == "completed"
		}); err != nil {
			t.Errorf("task %d (%s) after the failover: %q, want completed", i, id, st)
		}
	}
	stopLoop()
	loop.Wait()
	for i := range fx.set.Len() {
		if !fx.set.Replica(i).Running() {
			t.Errorf("replica %d exited", i)
		}
	}
}

// openSession opens a 2025-11-25 session with one raw initialize and
// returns the HTTP status.
func openSession(t *testing.T, url string) int {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode
}

// taskIDOf is the task_id of a submit's structured result.
func taskIDOf(t *testing.T, res *mcp.CallToolResult) string {
	t.Helper()
	var sub struct {
		TaskID string `json:"task_id"`
	}
	if b, _ := json.Marshal(res.StructuredContent); json.Unmarshal(b, &sub) != nil || sub.TaskID == "" {
		t.Fatalf("submit answered no task_id: %+v", res)
	}
	return sub.TaskID
}
