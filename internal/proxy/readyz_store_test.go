package proxy_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mcp-mux/mcp-mux/internal/mcptest"
	"github.com/mcp-mux/mcp-mux/internal/proxy"
	"github.com/mcp-mux/mcp-mux/internal/ratelimit"
	"github.com/mcp-mux/mcp-mux/internal/sessionstore"
	"github.com/mcp-mux/mcp-mux/internal/storeclient"
	"github.com/mcp-mux/mcp-mux/internal/taskpoll"
)

// readyState is /readyz's answer.
type readyState struct {
	code      int
	Ready     bool   `json:"ready"`
	Reachable *bool  `json:"task_store_reachable"`
	Limits    string `json:"limits"`
}

// getReady asks /readyz with a client that gives up after 500 ms: a load
// balancer's health check (HAProxy's here is 500 ms) would mark a
// replica whose /readyz takes longer as down.
func getReady(base string) (readyState, error) {
	c := &http.Client{Timeout: 500 * time.Millisecond}
	resp, err := c.Get(base + "/readyz")
	if err != nil {
		return readyState{}, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	st := readyState{code: resp.StatusCode}
	if err := json.Unmarshal(b, &st); err != nil {
		return st, fmt.Errorf("/readyz body %q: %w", b, err)
	}
	return st, nil
}

// TestReadyzNeverWaitsOnRedis (issue 34: an outage takes nothing down that
// it need not): with sessions, durable tasks and shared limits on a Redis
// that hangs (SIGSTOP: connections open, nothing answered), /readyz keeps
// answering at once and ready, and says the stores are down once the
// background probes have seen it; when Redis answers again it says so.
func TestReadyzNeverWaitsOnRedis(t *testing.T) {
	r := mcptest.StartRedis(t, false)
	defer r.Resume() // a paused server would hang the muxes' shutdown
	job := &mcptest.TaskServer{PollsToComplete: 1}
	upTS := mcptest.ServeHTTP(t, job.MCP())
	cfg := `{"mcpServers": {"jobs": ` + mcptest.TaskServerJSON(upTS.URL+"/mcp", "") + `},
	  "mcp_tasks": {"enabled": true},
	  "limits": {"rules": [{"name": "r", "scope": "caller", "calls": 1000, "per_seconds": 60}]}}`
	tc, err := storeclient.Dial(r.URL())
	if err != nil {
		t.Fatal(err)
	}
	store := taskpoll.NewRedisStore(taskpoll.RedisOptions{Client: tc, KeyPrefix: "readyz:"})
	t.Cleanup(func() { _ = store.Close() })
	// Sessions in Redis too, on the client serve builds (its round trips
	// end at its 5 s read timeout, whatever the context says).
	sc, err := storeclient.Dial(r.URL())
	if err != nil {
		t.Fatal(err)
	}
	m := startMux(t, cfg, proxy.Options{StateKey: testStateKey,
		SessionStore: func(o sessionstore.Options) sessionstore.Store {
			return sessionstore.NewRedis(sessionstore.RedisOptions{Options: o, Client: sc, KeyPrefix: "readyz:"})
		},
		TaskStore: store, TaskConfig: taskpoll.Config{PollInterval: 50 * time.Millisecond, Lease: 10 * time.Second},
		LimitStore: &ratelimit.Store{Client: redis.NewClient(&redis.Options{Addr: r.Addr, ContextTimeoutEnabled: true}), KeyPrefix: "readyz:"}})

	waitReady := func(what string, ok func(readyState) bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			st, err := getReady(m.ts.URL)
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			if st.code != http.StatusOK || !st.Ready {
				t.Fatalf("%s: /readyz %d %+v: a store outage must leave the replica ready", what, st.code, st)
			}
			if ok(st) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: /readyz still %+v after 10 s", what, st)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	up := func(st readyState) bool {
		return st.Reachable != nil && *st.Reachable && st.Limits == "ok (shared)"
	}
	waitReady("before the outage", up)

	r.Pause()
	waitReady("Redis hanging", func(st readyState) bool {
		return st.Reachable != nil && !*st.Reachable && st.Limits == "degraded: store unreachable, failing open"
	})
	for i := range 20 { // every answer at once, none waiting on the hung store
		if _, err := getReady(m.ts.URL); err != nil {
			t.Fatalf("/readyz %d while Redis hangs: %v", i, err)
		}
	}
	r.Resume()
	waitReady("Redis back", up)
}
