package proxy_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/internal/mcptest"
	"github.com/mcp-mux/mcp-mux/internal/taskpoll"
)

// parkUpstream is a legacy go-sdk HTTP server with three tools: ask
// elicits and waits for the answer, slow runs until its gate opens (or it
// is cancelled), echo answers at once.
type parkUpstream struct {
	url                string
	asking, slow       atomic.Int64 // handlers running
	unanswered, echoes atomic.Int64

	mu   sync.Mutex
	gate chan struct{} // closed: slow calls finish
}

func startParkUpstream(t *testing.T) *parkUpstream {
	t.Helper()
	u := &parkUpstream{gate: make(chan struct{})}
	t.Cleanup(u.release)
	s := mcp.NewServer(&mcp.Implementation{Name: "up", Version: "1"}, nil)
	obj := map[string]any{"type": "object"}
	s.AddTool(&mcp.Tool{Name: "ask", InputSchema: obj}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		u.asking.Add(1)
		defer u.asking.Add(-1)
		res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: "name?",
			RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{}}})
		if err != nil || ctx.Err() != nil {
			u.unanswered.Add(1)
			return nil, fmt.Errorf("unanswered: %w", err)
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "answered " + res.Action}}}, nil
	})
	s.AddTool(&mcp.Tool{Name: "slow", InputSchema: obj}, func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		u.slow.Add(1)
		defer u.slow.Add(-1)
		select {
		case <-u.gateCh():
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "slept"}}}, nil
	})
	s.AddTool(&mcp.Tool{Name: "echo", InputSchema: obj}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		u.echoes.Add(1)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "echo"}}}, nil
	})
	u.url = mcptest.ServeHTTP(t, s).URL + "/mcp"
	return u
}

func (u *parkUpstream) gateCh() chan struct{} {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.gate
}

// release lets every slow call finish.
func (u *parkUpstream) release() {
	u.mu.Lock()
	defer u.mu.Unlock()
	select {
	case <-u.gate:
	default:
		close(u.gate)
	}
}

// rearm makes slow calls wait again.
func (u *parkUpstream) rearm() {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.gate = make(chan struct{})
}

// parkLimitsConfig is a mux on u whose server takes 3 calls in flight, for
// every caller together.
func parkLimitsConfig(u *parkUpstream) string {
	return fmt.Sprintf(`{"mcpServers": {"up": {"type": "http", "url": %q}},
	  "inbound": {"auth": {"mode": "api_keys", "keys": {"alice": "$ALICE_KEY", "bob": "$BOB_KEY"}}},
	  "limits": {"rules": [{"name": "up-in-flight", "scope": "server", "server": "up", "in_flight": 3}]}}`, u.url)
}

// bearer is the header of a caller's api key, with a thread of its own.
func bearer(key, thread string) map[string]string {
	return map[string]string{"Authorization": "Bearer " + key, "X-Mux-Thread-Id": thread}
}

const elicitCaps = `{"elicitation":{"form":{}}}`

// Issue 32, attack 7: 2026-07-28 calls parked on their client's input
// hold no in_flight slot while they wait. Alice parks three calls of a
// server whose rule allows three in flight and walks away; bob's calls on
// any replica are still admitted. A retry takes its slots again: refused
// while bob holds all three (the call ends, cancelled upstream), admitted
// once he is done.
func TestParkedCallsHoldNoInFlightSlots(t *testing.T) {
	t.Run("in process", func(t *testing.T) {
		u := startParkUpstream(t)
		checkParkedSlots(t, u, limitReplicas(t, 1, parkLimitsConfig(u), nil, ""))
	})
	t.Run("shared", func(t *testing.T) {
		u := startParkUpstream(t)
		r := mcptest.StartRedis(t, false)
		checkParkedSlots(t, u, limitReplicas(t, 2, parkLimitsConfig(u), r, "park-slots:"))
	})
}

func checkParkedSlots(t *testing.T, u *parkUpstream, muxes []*mux) {
	t.Helper()
	first, last := muxes[0].ts.URL+"/mcp", muxes[len(muxes)-1].ts.URL+"/mcp"
	states := make([]string, 3)
	keys := make([]string, 3)
	for i := range states {
		_, r := modernCall(t, first, bearer(limAliceKey, fmt.Sprint("park-", i)), elicitCaps, "tools/call", "up_ask", `"name":"up_ask","arguments":{}`)
		reqs, state := inputRequiredOf(t, r)
		for k := range reqs {
			keys[i] = k
		}
		states[i] = state
	}
	waitLong(t, 10*time.Second, "alice's three calls to wait upstream", func() bool { return u.asking.Load() == 3 })

	// Alice walked away: bob is served, on every replica.
	for i, m := range muxes {
		_, r := modernCall(t, m.ts.URL+"/mcp", bearer(limBobKey, "bob"), `{}`, "tools/call", "up_echo", `"name":"up_echo","arguments":{}`)
		if r.Error != nil || !strings.Contains(string(r.Result), `"text":"echo"`) || strings.Contains(string(r.Result), `"isError":true`) {
			t.Fatalf("bob's call on replica %d while alice's three calls are parked: %s %+v", i, r.Result, r.Error)
		}
	}

	// Bob holds the three slots with calls that run; alice's retry needs one.
	done := make(chan rpcReply, 3)
	for i := range 3 {
		go func() {
			_, r := modernCallRaw2(last, bearer(limBobKey, fmt.Sprint("slow-", i)), "up_slow")
			done <- r
		}()
	}
	waitLong(t, 10*time.Second, "bob's three slow calls to run upstream", func() bool { return u.slow.Load() == 3 })
	_, r := modernCall(t, first, bearer(limAliceKey, "park-0"), elicitCaps, "tools/call", "up_ask", retryParams(keys[0], states[0]))
	if !strings.Contains(string(r.Result), `"isError":true`) || !strings.Contains(string(r.Result), `concurrency limit \"up-in-flight\" exceeded: 3 calls in flight for each server`) {
		t.Fatalf("alice's retry while bob holds every slot: %s %+v, want the concurrency limit's tool error", r.Result, r.Error)
	}
	waitLong(t, 10*time.Second, "the refused retry's call to end upstream", func() bool { return u.unanswered.Load() == 1 })
	_, r = modernCall(t, first, bearer(limAliceKey, "park-0"), elicitCaps, "tools/call", "up_ask", retryParams(keys[0], states[0]))
	if r.Error == nil || !strings.Contains(r.Error.Message, "no longer waiting") {
		t.Fatalf("a second retry of the refused call: %s %+v, want no longer waiting", r.Result, r.Error)
	}

	u.release()
	for range 3 {
		if r := <-done; r.Error != nil || !strings.Contains(string(r.Result), "slept") {
			t.Fatalf("bob's slow call: %s %+v", r.Result, r.Error)
		}
	}
	for i := 1; i < 3; i++ {
		_, r := modernCall(t, first, bearer(limAliceKey, fmt.Sprint("park-", i)), elicitCaps, "tools/call", "up_ask", retryParams(keys[i], states[i]))
		if r.Error != nil || !strings.Contains(string(r.Result), "answered accept") {
			t.Fatalf("alice's retry %d once bob is done: %s %+v", i, r.Result, r.Error)
		}
	}
	// Every slot is back: three of bob's calls run at once again.
	u.rearm()
	for i := range 3 {
		go func() {
			_, r := modernCallRaw2(first, bearer(limBobKey, fmt.Sprint("slow-", i)), "up_slow")
			done <- r
		}()
	}
	waitLong(t, 10*time.Second, "three slow calls to run upstream again", func() bool { return u.slow.Load() == 3 })
	u.release()
	for range 3 {
		if r := <-done; r.Error != nil || !strings.Contains(string(r.Result), "slept") {
			t.Fatalf("bob's slow call after the retries: %s %+v", r.Result, r.Error)
		}
	}
}

// retryParams are a retry's params: the answer to the input request key
// and the requestState.
func retryParams(key, state string) string {
	return `"name":"up_ask","arguments":{},"inputResponses":{` + mustQuote(key) + `:{"action":"accept","content":{}}},"requestState":` + mustQuote(state)
}

// modernCallRaw2 is a 2026-07-28 tools/call of tool without arguments for
// any goroutine: failures are the reply's error.
func modernCallRaw2(url string, hdr map[string]string, tool string) (int, rpcReply) {
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{` + modernMeta(`{}`) + `,"name":"` + tool + `","arguments":{}}}`
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		panic(err)
	}
	for k, v := range modernHeaders("tools/call", tool) {
		req.Header.Set(k, v)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	return doRPC(req)
}

// A durable task holds its caller's in_flight slot only while its submit
// runs (docs/limits.md: calls that wait): with one call in flight per
// caller, alice submits a second task while her first still runs, and
// each submit answers at once.
func TestDurableTaskHoldsSlotOnlyForSubmit(t *testing.T) {
	st, err := taskpoll.OpenBoltStore(taskpoll.BoltOptions{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	jobs := &mcptest.TaskServer{Held: true}
	uj := mcptest.ServeHTTP(t, jobs.MCP())
	_, ts := taskMux(t, `{"mcpServers": {"jobs": `+mcptest.TaskServerJSON(uj.URL+"/mcp", "")+`}, "mcp_tasks": {"enabled": true},
		"inbound": {"auth": {"mode": "trusted_header"}, "user_header": "X-User"},
		"limits": {"rules": [{"name": "one-each", "scope": "caller", "in_flight": 1}]}}`, st)
	alice := map[string]string{"X-User": "alice"}
	for i := range 2 {
		_, r := modernCall(t, ts.URL+"/mcp", alice, tasksCaps, "tools/call", "jobs_submit_job", `"name":"jobs_submit_job","arguments":{"input":"job`+fmt.Sprint(i)+`"}`)
		if task := decodeTask(t, r); r.Error != nil || task.ResultType != "task" || task.Status != "working" {
			t.Fatalf("submit %d while %d of alice's tasks run: %s %+v", i, i, r.Result, r.Error)
		}
	}
}
