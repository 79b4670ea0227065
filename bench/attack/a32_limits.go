package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Issue 32's attacks on the limits rules: attack 7 (parked calls hold
// in_flight slots) and attack 11 (completion/complete bypasses limits).

// a32RedisAddr is the Redis the replicas of attack 7 share
// (ATTACK_REDIS_ADDR, default 127.0.0.1:6379); "" when none answers, and
// the attack then runs on one replica with its limits in process.
func a32RedisAddr() string {
	addr := os.Getenv("ATTACK_REDIS_ADDR")
	if addr == "" {
		addr = "127.0.0.1:6379"
	}
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return ""
	}
	_ = c.Close()
	return addr
}

// attackParkedSlots: issue 32, attack 7. A server takes 3 calls in flight
// (one rule, every caller together). Alice makes 3 sessionless 2026-07-28
// calls that end in input_required and walks away; then bob makes 20 calls
// of the same server, spread over the replicas. Before issue 32 the parked
// calls held the 3 slots for their 10-minute park and bob was refused 20
// of 20.
func attackParkedSlots(bin, dir string) error {
	up := legacyElicitUpstream()
	defer func() {
		up.CloseClientConnections()
		closed := make(chan struct{})
		go func() { up.Close(); close(closed) }()
		select {
		case <-closed:
		case <-time.After(5 * time.Second):
		}
	}()
	store, replicas := "", 1
	if addr := a32RedisAddr(); addr != "" {
		store = fmt.Sprintf(`, "store": {"redis_url": "redis://%s", "key_prefix": "attack32-%d-%d:"}`, addr, os.Getpid(), time.Now().UnixNano())
		replicas = 2
	}
	cfg := fmt.Sprintf(`{"mcpServers": {"e": {"type": "http", "url": %q, "max_sessions": 100}},
	  "inbound": {"auth": {"mode": "trusted_header"}, "user_header": "X-User"},
	  "limits": {"rules": [{"name": "e-in-flight", "scope": "server", "server": "e", "in_flight": 3}]}%s}`, up.URL+"/mcp", store)
	var muxes []*mux
	defer func() {
		for _, m := range muxes {
			m.stop()
		}
	}()
	for i := range replicas {
		rdir := filepath.Join(dir, fmt.Sprint("r", i))
		if err := os.MkdirAll(rdir, 0o700); err != nil {
			return err
		}
		m, err := startMux(bin, rdir, cfg)
		if err != nil {
			return fmt.Errorf("replica %d: %w", i, err)
		}
		muxes = append(muxes, m)
	}
	var thread atomic.Int64
	call := func(m *mux, user string) string {
		_, body := m.postModern(user, "tools/call", "e_ask", `"name":"e_ask","arguments":{}`,
			[][2]string{{"X-Mux-Thread-Id", fmt.Sprint("t", thread.Add(1))}})
		switch {
		case strings.Contains(body, `"input_required"`):
			return "parked"
		case strings.Contains(body, "concurrency limit"):
			return "refused"
		}
		return "other: " + short(strings.TrimSpace(body))
	}
	before := muxes[0].stats()
	parked := 0
	for range 3 {
		if call(muxes[0], "alice") == "parked" {
			parked++
		}
	}
	counts := map[string]int{}
	start := time.Now()
	for i := range 20 {
		counts[call(muxes[i%len(muxes)], "bob")]++
	}
	other := ""
	if n := 20 - counts["refused"] - counts["parked"]; n > 0 {
		other = fmt.Sprintf(", %d other %v", n, otherKeys(counts))
	}
	fmt.Printf("parked-slots: %d replica(s); alice parked %d of 3 and walked away; bob's 20 calls: %d refused, %d admitted (parked)%s in %.1fs; before: %s; after: %s\n",
		len(muxes), parked, counts["refused"], counts["parked"], other, time.Since(start).Seconds(), before, muxes[0].stats())
	return nil
}

// otherKeys are the outcomes of counts other than refused and parked.
func otherKeys(counts map[string]int) []string {
	var out []string
	for k := range counts {
		if k != "refused" && k != "parked" {
			out = append(out, k)
		}
	}
	return out
}

// completionUpstream is a go-sdk server with a prompt and completions,
// counting the completions it serves.
func completionUpstream(served *atomic.Int64) *httptest.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "c", Version: "1"}, &mcp.ServerOptions{
		CompletionHandler: func(context.Context, *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
			served.Add(1)
			return &mcp.CompleteResult{Completion: mcp.CompletionResultDetails{Values: []string{"x"}}}, nil
		},
	})
	s.AddPrompt(&mcp.Prompt{Name: "greet", Arguments: []*mcp.PromptArgument{{Name: "who"}}}, func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: "hi"}}}}, nil
	})
	return httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
}

// attackCompletionLimits: issue 32, attack 11. Alice may make 10 requests
// an hour (a caller rule); she spends them on prompts/get, is refused the
// 11th, then sends 200 completion/complete. Before issue 32 all 200 reached
// the server.
func attackCompletionLimits(bin, dir string) error {
	var served atomic.Int64
	up := completionUpstream(&served)
	defer up.Close()
	m, err := startMux(bin, dir, fmt.Sprintf(`{"mcpServers": {"c": {"type": "http", "url": %q}},
	  "inbound": {"auth": {"mode": "trusted_header"}, "user_header": "X-User"},
	  "limits": {"rules": [{"name": "per-caller", "scope": "caller", "calls": 10, "per_seconds": 3600}]}}`, up.URL+"/mcp"))
	if err != nil {
		return err
	}
	defer m.stop()
	before := m.stats()
	for range 10 {
		m.postModern("alice", "prompts/get", "c_greet", `"name":"c_greet"`, nil)
	}
	_, body := m.postModern("alice", "prompts/get", "c_greet", `"name":"c_greet"`, nil)
	limited := strings.Contains(body, "-32029")
	refused, other := 0, ""
	for range 200 {
		_, body := m.postModern("alice", "completion/complete", "", `"ref":{"type":"ref/prompt","name":"c_greet"},"argument":{"name":"who","value":"a"}`, nil)
		switch {
		case strings.Contains(body, "-32029"):
			refused++
		case !strings.Contains(body, `"completion"`) && other == "":
			other = short(strings.TrimSpace(body))
		}
	}
	fmt.Printf("completion-limits: alice limited after 10 prompts: %v; of 200 completions, %d reached the server, %d refused (-32029)%s; before: %s; after: %s\n",
		limited, served.Load(), refused, map[bool]string{true: "", false: "; other answer: " + other}[other == ""], before, m.stats())
	return nil
}
