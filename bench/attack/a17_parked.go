package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// legacyElicitUpstream is a 2025-11-25-only go-sdk server whose tool asks
// the client for input with elicitation/create and waits for the answer
// (until its session ends).
func legacyElicitUpstream() *httptest.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "elicit", Version: "1"}, &mcp.ServerOptions{SupportedProtocolVersions: []string{"2025-11-25"}})
	s.AddTool(&mcp.Tool{Name: "ask", InputSchema: map[string]any{"type": "object"}}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		r, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: "name?", RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{}}})
		if err != nil {
			return nil, err
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: r.Action}}}, nil
	})
	return httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
}

// attackParked: issue 17, attack 8. Alice parks as many input_required
// calls as she can (up to 1,100, 32 at a time, at most 30 s); then bob
// makes one call that should park too. Every call has a thread (so an
// upstream session) of its own; the server's max_sessions is raised past
// the flood so that the upstream pool is not what stops it. Before issue 17 alice took the
// whole fixed cap of 1024 and bob was refused.
func attackParked(bin, dir string) error {
	up := legacyElicitUpstream()
	// An old build leaves parked calls running upstream after it exits (the
	// Elicit never returns), so the test server's Close would wait on them
	// for ever: close it in the background and move on after 5 s.
	defer func() {
		up.CloseClientConnections()
		closed := make(chan struct{})
		go func() { up.Close(); close(closed) }()
		select {
		case <-closed:
		case <-time.After(5 * time.Second):
			fmt.Println("parked: the upstream still had calls running 5 s after the mux stopped")
		}
	}()
	cfg := func(keys string) string {
		return fmt.Sprintf(`{"mcpServers": {"e": {"type": "http", "url": %q, "max_sessions": 2200}},
		"inbound": {"auth": {"mode": "trusted_header"}, "user_header": "X-User"%s}}`, up.URL+"/mcp", keys)
	}
	m, err := startMux(bin, dir, cfg(`, "max_parked_calls": 1024`))
	if err != nil {
		if m != nil {
			m.stop()
		}
		fmt.Printf("parked: note: startMux with inbound.max_parked_calls failed (%v); retrying without it (the old fixed cap is 1024)\n", err)
		if m, err = startMux(bin, dir, cfg("")); err != nil {
			return err
		}
	}
	defer m.stop()
	var thread atomic.Int64
	park := func(user string) (bool, string) {
		_, body := m.postModern(user, "tools/call", "e_ask", `"name":"e_ask","arguments":{}`,
			[][2]string{{"X-Mux-Thread-Id", fmt.Sprint("t", thread.Add(1))}})
		return strings.Contains(body, `"input_required"`), body
	}
	before := m.stats()
	const tries, workers = 1100, 32
	var parked, refused atomic.Int64
	var mu sync.Mutex
	refusal := ""
	next := make(chan struct{})
	deadline := time.Now().Add(30 * time.Second)
	go func() {
		defer close(next)
		for range tries {
			if time.Now().After(deadline) {
				return
			}
			next <- struct{}{}
		}
	}()
	start := time.Now()
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range next {
				ok, body := park("alice")
				if ok {
					parked.Add(1)
					continue
				}
				refused.Add(1)
				mu.Lock()
				if refusal == "" {
					refusal = body
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	took := time.Since(start)
	during := m.stats()
	bobOK, bobBody := park("bob")
	if _, msg, ok := strings.Cut(refusal, `"message":"`); ok {
		refusal, _, _ = strings.Cut(msg, `"`)
	}
	if len(refusal) > 160 {
		refusal = refusal[:160] + "…"
	}
	bob := "parked (input_required)"
	if !bobOK {
		if len(bobBody) > 160 {
			bobBody = bobBody[:160] + "…"
		}
		bob = "NOT parked: " + strings.TrimSpace(bobBody)
	}
	fmt.Printf("parked: alice parked %d, refused %d in %.1fs (refusal: %s); bob's call: %s; alive %v; before: %s; during: %s; after: %s\n",
		parked.Load(), refused.Load(), took.Seconds(), strings.TrimSpace(refusal), bob, m.alive(), before, during, m.stats())
	return nil
}
