package proxy_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/internal/config"
	"github.com/mcp-mux/mcp-mux/internal/mcptest"
	"github.com/mcp-mux/mcp-mux/internal/proxy"
)

// Tests of the bounds on hostile input (requests.go, internal/wire, the
// upstream guards): each breach is a clear error, the mux stays up, and the
// next call works.

// rawSession initializes a session with a raw client speaking version.
func rawSession(t *testing.T, base, version string) string {
	t.Helper()
	resp, err := rawPost(context.Background(), base, "", version,
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"`+version+`","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	sid := resp.Header.Get("Mcp-Session-Id")
	if sid == "" {
		t.Fatalf("initialize: HTTP %d, no session id", resp.StatusCode)
	}
	resp, err = rawPost(context.Background(), base, sid, version, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return sid
}

func rawPost(ctx context.Context, base, sid, version, body string) (*http.Response, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/mcp", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if sid != "" {
		req.Header.Set("Mcp-Session-Id", sid)
		req.Header.Set("Mcp-Protocol-Version", version)
	}
	return testHTTP.Do(req)
}

// muxReply is a JSON-RPC response read from a JSON or an event-stream body.
type muxReply struct {
	ID     json.RawMessage `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// readReplies returns the responses in a POST's answer.
func readReplies(t *testing.T, resp *http.Response) []muxReply {
	t.Helper()
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	var out []muxReply
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		for _, line := range strings.Split(string(b), "\n") {
			if data, ok := strings.CutPrefix(line, "data: "); ok {
				out = append(out, decodeReplies(t, data)...)
			}
		}
		return out
	}
	return decodeReplies(t, string(b))
}

func decodeReplies(t *testing.T, s string) []muxReply {
	t.Helper()
	s = strings.TrimSpace(s)
	if strings.HasPrefix(s, "[") {
		var rs []muxReply
		if err := json.Unmarshal([]byte(s), &rs); err != nil {
			t.Fatalf("reply %q: %v", s, err)
		}
		return rs
	}
	var r muxReply
	if err := json.Unmarshal([]byte(s), &r); err != nil {
		t.Fatalf("reply %q: %v", s, err)
	}
	return []muxReply{r}
}

func deepCall(id int, levels int) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"web_echo","arguments":{"text":%s}}}`, id, mcptest.Deep(levels))
}

// TestNestedRequestsRefused: a body nested two million levels deep (4 MB)
// is a JSON-RPC error on the fast path, on the SDK path (initialize, and a
// 2025-03-26 batch), and the session's next call works.
func TestNestedRequestsRefused(t *testing.T) {
	web := mcptest.ServeHTTP(t, mcptest.NewServer("web"))
	m := startMux(t, fmt.Sprintf(`{"mcpServers": {"web": {"type": "http", "url": %q}}}`, web.URL+"/mcp"), proxy.Options{})
	sid := rawSession(t, m.ts.URL, "2025-03-26")

	cases := []struct{ name, sid, body string }{
		{"fast-path tools/call", sid, deepCall(7, 2_000_000)},
		{"SDK-path initialize", "", `{"jsonrpc":"2.0","id":7,"method":"initialize","params":{"capabilities":` + string(mcptest.Deep(2_000_000)) + `}}`},
		{"SDK-path batch", sid, `[` + deepCall(7, 2_000_000) + `]`},
		{"just past the limit", sid, deepCall(7, 998)},
	}
	for _, c := range cases {
		resp, err := rawPost(context.Background(), m.ts.URL, c.sid, "2025-03-26", c.body)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		rs := readReplies(t, resp)
		if resp.StatusCode != http.StatusBadRequest || len(rs) != 1 || rs[0].Error == nil ||
			!strings.Contains(rs[0].Error.Message, "JSON nested deeper than 1000 levels") {
			t.Errorf("%s: HTTP %d %+v, want 400 and a JSON-RPC error about the nesting", c.name, resp.StatusCode, rs)
			continue
		}
		if c.name != "SDK-path batch" && string(rs[0].ID) != "7" {
			t.Errorf("%s: error answers id %s, want 7", c.name, rs[0].ID)
		}
	}
	// Within the limit, nesting passes through to the upstream.
	resp, err := rawPost(context.Background(), m.ts.URL, sid, "2025-03-26",
		`{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"web_echo","arguments":{"text":"still up"}}}`)
	if err != nil {
		t.Fatal(err)
	}
	if rs := readReplies(t, resp); len(rs) != 1 || !strings.Contains(string(rs[0].Result), "still up") {
		t.Fatalf("next call: %+v", rs)
	}
}

// TestNestedUpstreamRepliesRefused: a call result and a tools/list nested
// two million levels deep, from an HTTP and a stdio server: the call is a
// tool error naming the server, the list skips its server with the reason,
// and the same sessions serve the next call.
func TestNestedUpstreamRepliesRefused(t *testing.T) {
	deepCalls := func(_ context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
		switch {
		case method == "tools/list":
			return mcptest.ToolList("", "echo", "deep"), nil
		case method == "tools/call" && strings.Contains(string(params), `"deep"`):
			return mcptest.Deep(2_000_000), nil
		case method == "tools/call":
			return mcptest.TextResult("web ok"), nil
		}
		return json.RawMessage(`{}`), nil
	}
	web := mcptest.RawHTTP(t, deepCalls)
	sse := mcptest.RawHTTPStream(t, deepCalls) // the reply as an event
	list := mcptest.RawHTTP(t, func(_ context.Context, method string, _ json.RawMessage) (json.RawMessage, error) {
		return json.RawMessage(`{"tools":` + string(mcptest.Deep(2_000_000)) + `}`), nil
	})
	stdioJSON := func(name, script string) string {
		cmd, args, env := mcptest.ScriptedStdio(script)
		c, _ := json.Marshal(cmd)
		a, _ := json.Marshal(args)
		e, _ := json.Marshal(env)
		return fmt.Sprintf(`%q: {"type": "stdio", "command": %s, "args": %s, "env": %s}`, name, c, a, e)
	}
	cfg := fmt.Sprintf(`{"mcpServers": {"web": {"type": "http", "url": %q}, "events": {"type": "http", "url": %q}, "weblist": {"type": "http", "url": %q}, %s, %s}}`,
		web.URL+"/mcp", sse.URL+"/mcp", list.URL+"/mcp", stdioJSON("local", mcptest.DeepCall), stdioJSON("locallist", mcptest.DeepList))
	m := startMux(t, cfg, proxy.Options{})
	cs := connect(t, m.ts.URL, nil)

	names := toolNames(t, cs)
	for _, want := range []string{"web_echo", "web_deep", "events_deep", "local_echo", "local_deep"} {
		if !contains(names, want) {
			t.Errorf("tools/list lacks %s: %v", want, names)
		}
	}
	for _, server := range []string{"web", "events", "local"} {
		got, res := callText(t, cs, server+"_deep", map[string]any{})
		if !res.IsError || !strings.Contains(got, fmt.Sprintf("MCP server %q", server)) || !strings.Contains(got, "nested deeper than 1000 levels") {
			t.Errorf("%s_deep: isError=%v %q, want a tool error naming the server and the nesting", server, res.IsError, got)
		}
		want := "web ok"
		if server == "local" { // the stdio script echoes
			want = "after"
		}
		if got, _ := callText(t, cs, server+"_echo", map[string]any{"text": "after"}); got != want {
			t.Errorf("%s_echo after the deep reply = %q, want %q", server, got, want)
		}
	}
	for _, server := range []string{"weblist", "locallist"} {
		var skipped bool
		for _, line := range strings.Split(m.logs.String(), "\n") {
			if strings.Contains(line, "skipping upstream server") && strings.Contains(line, "nested deeper than 1000 levels") &&
				strings.Contains(line, `"server":"`+server+`"`) {
				skipped = true
			}
		}
		if !skipped {
			t.Errorf("%s not skipped with the nesting as its reason:\n%s", server, m.logs.String())
		}
	}
}

// hangingUpstream is a scripted HTTP server whose tools/call never answers
// until its client goes away; it counts the calls in flight.
type hangingUpstream struct {
	inflight atomic.Int64
	url      string
	ts       *httptest.Server
}

func newHangingUpstream(t *testing.T) *hangingUpstream {
	h := &hangingUpstream{}
	ts := mcptest.RawHTTP(t, func(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
		switch method {
		case "tools/list":
			return mcptest.ToolList("", "hang", "echo"), nil
		case "tools/call":
			if strings.Contains(string(params), `"echo"`) {
				return mcptest.TextResult("echoed"), nil
			}
			h.inflight.Add(1)
			defer h.inflight.Add(-1)
			<-ctx.Done()
			return nil, ctx.Err()
		}
		return json.RawMessage(`{}`), nil
	})
	h.url, h.ts = ts.URL+"/mcp", ts
	return h
}

// waitLong polls cond until it holds or d passes.
func waitLong(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// openFDs counts this process's open file descriptors.
func openFDs() int {
	ents, _ := os.ReadDir("/proc/self/fd")
	return len(ents)
}

func hangCall(id int) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"up_hang","arguments":{}}}`, id)
}

// TestAbandonedBatchesAreCancelled: 300 hanging calls sent as 2025-03-26
// batches (ten of 30, on five sessions) whose clients go away: every
// upstream call is cancelled and the goroutines return to their baseline.
// A batch over the cap is refused.
func TestAbandonedBatchesAreCancelled(t *testing.T) {
	up := newHangingUpstream(t)
	m := startMux(t, fmt.Sprintf(`{"mcpServers": {"up": {"type": "http", "url": %q}}}`, up.url), proxy.Options{})
	var sids []string
	for range 5 {
		sids = append(sids, rawSession(t, m.ts.URL, "2025-03-26"))
	}
	// Warm one upstream session per mux session.
	for _, sid := range sids {
		resp, err := rawPost(context.Background(), m.ts.URL, sid, "2025-03-26",
			`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"up_echo","arguments":{}}}`)
		if err != nil {
			t.Fatal(err)
		}
		readReplies(t, resp)
	}
	testHTTP.CloseIdleConnections()
	baseline, baseFDs := runtime.NumGoroutine(), openFDs()

	big := make([]string, 33)
	for i := range big {
		big[i] = hangCall(1000 + i)
	}
	resp, err := rawPost(context.Background(), m.ts.URL, sids[0], "2025-03-26", "["+strings.Join(big, ",")+"]")
	if err != nil {
		t.Fatal(err)
	}
	if rs := readReplies(t, resp); resp.StatusCode != http.StatusBadRequest || len(rs) != 1 || rs[0].Error == nil ||
		!strings.Contains(rs[0].Error.Message, "batch of 33 messages exceeds the limit of 32") {
		t.Fatalf("oversized batch: HTTP %d %+v", resp.StatusCode, rs)
	}

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	id := 0
	for _, sid := range sids {
		for range 2 {
			calls := make([]string, 30)
			for i := range calls {
				id++
				calls[i] = hangCall(id)
			}
			body := "[" + strings.Join(calls, ",") + "]"
			wg.Go(func() {
				if resp, err := rawPost(ctx, m.ts.URL, sid, "2025-03-26", body); err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			})
		}
	}
	waitLong(t, 20*time.Second, "300 calls in flight upstream", func() bool { return up.inflight.Load() == 300 })
	during, duringFDs := runtime.NumGoroutine(), openFDs()
	cancel()
	wg.Wait()
	waitLong(t, 20*time.Second, "the upstream calls to be cancelled", func() bool { return up.inflight.Load() == 0 })
	var after int
	deadline := time.Now().Add(20 * time.Second)
	for after = runtime.NumGoroutine(); after > baseline+5; after = runtime.NumGoroutine() {
		// Idle keep-alive connections (bounded by the transports' pools, some
		// opened by the cancellation notices sent upstream) are not what is
		// measured: drop them on both sides.
		testHTTP.CloseIdleConnections()
		up.ts.CloseClientConnections()
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("goroutines: baseline %d, %d in flight, %d after the clients left:\n%s", baseline, during, after, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("goroutines: baseline %d, 300 calls in flight %d, after the clients left %d; fds %d, %d, %d",
		baseline, during, after, baseFDs, duringFDs, openFDs())

	// The sessions still work.
	resp, err = rawPost(context.Background(), m.ts.URL, sids[0], "2025-03-26",
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"up_echo","arguments":{}}}`)
	if err != nil {
		t.Fatal(err)
	}
	if rs := readReplies(t, resp); len(rs) != 1 || !strings.Contains(string(rs[0].Result), "echoed") {
		t.Fatalf("call after the abandoned batches: %+v", rs)
	}
}

// TestSessionCallCapAndDelete: a session runs at most 64 requests at once
// (the 65th is a clear JSON-RPC error), and DELETE of a session with hung
// calls returns at once, cancelling them upstream.
func TestSessionCallCapAndDelete(t *testing.T) {
	var wg sync.WaitGroup
	t.Cleanup(wg.Wait) // last: after the mux is closed, whatever happened
	up := newHangingUpstream(t)
	m := startMux(t, fmt.Sprintf(`{"mcpServers": {"up": {"type": "http", "url": %q}}}`, up.url), proxy.Options{})
	sid := rawSession(t, m.ts.URL, "2025-11-25")
	for i := range 64 {
		wg.Go(func() {
			if resp, err := rawPost(context.Background(), m.ts.URL, sid, "2025-11-25", hangCall(100+i)); err == nil {
				readReplies(t, resp)
			}
		})
	}
	waitLong(t, 20*time.Second, "64 calls in flight upstream", func() bool { return up.inflight.Load() == 64 })
	resp, err := rawPost(context.Background(), m.ts.URL, sid, "2025-11-25", hangCall(999))
	if err != nil {
		t.Fatal(err)
	}
	if rs := readReplies(t, resp); len(rs) != 1 || rs[0].Error == nil || rs[0].Error.Code != -32000 ||
		!strings.Contains(rs[0].Error.Message, "already has 64 requests in flight") || string(rs[0].ID) != "999" {
		t.Fatalf("65th call: %+v", rs)
	}

	// DELETE of a session with hung calls on both paths: two fast-path calls
	// and a batch (which go-sdk runs, and whose session's Close waits for it).
	old := sid
	sid = rawSession(t, m.ts.URL, "2025-03-26")
	for i, body := range []string{hangCall(1), hangCall(2), "[" + hangCall(3) + "," + hangCall(4) + "]"} {
		wg.Go(func() {
			if resp, err := rawPost(context.Background(), m.ts.URL, sid, "2025-03-26", body); err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			} else {
				t.Errorf("POST %d: %v", i, err)
			}
		})
	}
	waitLong(t, 20*time.Second, "68 calls in flight upstream", func() bool { return up.inflight.Load() == 68 })
	dctx, dcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer dcancel()
	req, _ := http.NewRequestWithContext(dctx, http.MethodDelete, m.ts.URL+"/mcp", nil)
	req.Header.Set("Mcp-Session-Id", sid)
	req.Header.Set("Mcp-Protocol-Version", "2025-03-26")
	start := time.Now()
	dresp, err := testHTTP.Do(req)
	if err != nil {
		t.Fatalf("DELETE with hung calls: %v after %s", err, time.Since(start))
	}
	dresp.Body.Close()
	if took := time.Since(start); dresp.StatusCode != http.StatusNoContent || took > 5*time.Second {
		t.Fatalf("DELETE: HTTP %d after %s", dresp.StatusCode, took)
	}
	waitLong(t, 10*time.Second, "the deleted session's calls to be cancelled upstream", func() bool { return up.inflight.Load() == 64 })
	req, _ = http.NewRequest(http.MethodDelete, m.ts.URL+"/mcp", nil)
	req.Header.Set("Mcp-Session-Id", old)
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	if dresp, err = testHTTP.Do(req); err != nil {
		t.Fatal(err)
	}
	dresp.Body.Close()
	waitLong(t, 10*time.Second, "the hung calls to be cancelled upstream", func() bool { return up.inflight.Load() == 0 })
}

// TestCloseCancelsHungCalls: shutdown with calls that never answer returns
// within its bound.
func TestCloseCancelsHungCalls(t *testing.T) {
	var wg sync.WaitGroup
	t.Cleanup(wg.Wait) // last: after the mux is closed, whatever happened
	up := newHangingUpstream(t)
	m := startMux(t, fmt.Sprintf(`{"mcpServers": {"up": {"type": "http", "url": %q}}}`, up.url), proxy.Options{})
	sid := rawSession(t, m.ts.URL, "2025-03-26")
	wg.Go(func() {
		if resp, err := rawPost(context.Background(), m.ts.URL, sid, "2025-03-26", "["+hangCall(1)+","+hangCall(2)+"]"); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	})
	for i := range 3 {
		wg.Go(func() {
			if resp, err := rawPost(context.Background(), m.ts.URL, sid, "2025-03-26", hangCall(10+i)); err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
	}
	waitLong(t, 20*time.Second, "5 calls in flight upstream", func() bool { return up.inflight.Load() == 5 })
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	closed := make(chan struct{})
	go func() { _ = m.srv.Close(ctx); close(closed) }()
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("Close with hung calls did not return within 5s of its 500ms drain bound")
	}
	waitLong(t, 10*time.Second, "the hung calls to be cancelled upstream", func() bool { return up.inflight.Load() == 0 })
}

// TestPagingUpstreamSkipped: a server that pages tools/list without end (or
// with huge pages) is skipped with a reason naming the cap it broke.
func TestPagingUpstreamSkipped(t *testing.T) {
	var pages atomic.Int64 // every discovery round's pages
	endless := mcptest.RawHTTP(t, func(_ context.Context, method string, _ json.RawMessage) (json.RawMessage, error) {
		if method != "tools/list" {
			return json.RawMessage(`{}`), nil
		}
		n := pages.Add(1)
		names := make([]string, 500)
		for i := range names {
			names[i] = fmt.Sprintf("t%d_%d", n, i)
		}
		return mcptest.ToolList(fmt.Sprint(n), names...), nil
	})
	fat := mcptest.RawHTTP(t, func(_ context.Context, method string, _ json.RawMessage) (json.RawMessage, error) {
		if method != "tools/list" {
			return json.RawMessage(`{}`), nil
		}
		desc, _ := json.Marshal(strings.Repeat("x", 4<<20))
		return json.RawMessage(`{"tools":[{"name":"fat","description":` + string(desc) + `,"inputSchema":{"type":"object"}}],"nextCursor":"more"}`), nil
	})
	web := mcptest.ServeHTTP(t, mcptest.NewServer("web"))
	m := startMux(t, fmt.Sprintf(`{"mcpServers": {"endless": {"type": "http", "url": %q}, "fat": {"type": "http", "url": %q}, "web": {"type": "http", "url": %q}}}`,
		endless.URL+"/mcp", fat.URL+"/mcp", web.URL+"/mcp"), proxy.Options{RetryMin: time.Minute, RetryMax: time.Minute}) // no 16 MiB rounds in the background
	logs := m.logs.String()
	for _, want := range []string{"tools/list returned more than 10000 items, the cap on one list of a server",
		"tools/list returned more than 16 MiB, the cap on one list of a server"} {
		if !strings.Contains(logs, want) {
			t.Errorf("no %q in the logs:\n%.3000s", want, logs)
		}
	}
	cs := connect(t, m.ts.URL, nil)
	names := toolNames(t, cs)
	if !contains(names, "web_echo") || len(names) > 20 {
		t.Errorf("tools: %d, want only web's", len(names))
	}
}

// TestInboundSessionBounds: inbound.max_sessions refuses a session past the
// cap, and inbound.session_idle_timeout_seconds closes an idle one.
func TestInboundSessionBounds(t *testing.T) {
	m := startMux(t, `{"mcpServers": {}, "inbound": {"max_sessions": 2, "session_idle_timeout_seconds": 1}}`, proxy.Options{})
	a := rawSession(t, m.ts.URL, "2025-11-25")
	rawSession(t, m.ts.URL, "2025-11-25")
	lastTouch := time.Now() // the sessions' last requests were answered by now
	resp, err := rawPost(context.Background(), m.ts.URL, "", "2025-11-25",
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	if err != nil {
		t.Fatal(err)
	}
	if rs := readReplies(t, resp); resp.StatusCode != http.StatusServiceUnavailable || len(rs) != 1 || rs[0].Error == nil ||
		!strings.Contains(rs[0].Error.Message, "at most 2 sessions (inbound.max_sessions)") {
		t.Fatalf("third session: HTTP %d %+v", resp.StatusCode, rs)
	}
	// Both sessions go idle (nothing touches them now) and are closed after
	// about a second.
	waitLong(t, 10*time.Second, "both idle sessions to be closed", func() bool { return m.srv.Status().Sessions == 0 })
	if idle := time.Since(lastTouch); idle < 900*time.Millisecond {
		t.Fatalf("the sessions were closed %s after their last request, before the 1s idle timeout", idle)
	}
	resp, err = rawPost(context.Background(), m.ts.URL, a, "2025-11-25", `{"jsonrpc":"2.0","id":2,"method":"ping"}`)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("a request of the closed idle session: HTTP %d, want 404", resp.StatusCode)
	}
	rawSession(t, m.ts.URL, "2025-11-25") // room again
}

// TestConnectionBounds: on the listener serve runs (Server.HTTPServer), an
// idle keep-alive connection is closed after IdleConnTimeout, a body that
// trickles in is cut off after BodyTimeout with a JSON-RPC error, and a call
// that runs longer than both is unaffected.
func TestConnectionBounds(t *testing.T) {
	web := mcptest.ServeHTTP(t, mcptest.NewServer("web"))
	cfg, err := config.Parse([]byte(fmt.Sprintf(`{"mcpServers": {"web": {"type": "http", "url": %q}}}`, web.URL+"/mcp")), config.LoadOptions{Filename: "t.json"})
	if err != nil {
		t.Fatal(err)
	}
	srv := proxy.New(proxy.Options{IdleConnTimeout: 300 * time.Millisecond, BodyTimeout: 300 * time.Millisecond})
	if err := srv.Apply(cfg); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := srv.HTTPServer()
	go func() { _ = hs.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Close(ctx)
		_ = hs.Close()
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.WaitDiscovery(ctx); err != nil {
		t.Fatal(err)
	}
	base := "http://" + ln.Addr().String()

	// An idle keep-alive connection is closed by the server.
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	br := bufio.NewReader(conn)
	fmt.Fprintf(conn, "GET /healthz HTTP/1.1\r\nHost: %s\r\n\r\n", ln.Addr())
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	start := time.Now()
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := br.ReadByte(); err != io.EOF {
		t.Fatalf("idle keep-alive connection: read %v after %s, want EOF (closed by the server)", err, time.Since(start))
	}
	t.Logf("idle keep-alive connection closed after %s", time.Since(start).Round(time.Millisecond))

	// The rest runs on connections that are never reused: a pooled
	// connection idle for about IdleConnTimeout races the server closing it
	// (the client writes its POST as the server hangs up, and net/http does
	// not retry a POST) — that is the bound above working, not what these
	// steps test.
	fresh := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	defer fresh.CloseIdleConnections()
	c := mcp.NewClient(&mcp.Implementation{Name: "test-client", Version: "1"}, nil)
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: base + "/mcp", HTTPClient: fresh},
		&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer cs.Close()

	// A body that never completes is cut off.
	sid := cs.ID()
	if sid == "" {
		t.Fatal("the client session has no Mcp-Session-Id")
	}
	slow, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	fmt.Fprintf(slow, "POST /mcp HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"+
		"Mcp-Session-Id: %s\r\nMcp-Protocol-Version: 2025-11-25\r\nContent-Length: 1000\r\n\r\n{\"jsonrpc\":", ln.Addr(), sid)
	_ = slow.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err = http.ReadResponse(bufio.NewReader(slow), nil)
	if err != nil {
		t.Fatalf("slow body: %v", err)
	}
	rs := readReplies(t, resp)
	if resp.StatusCode != http.StatusRequestTimeout || len(rs) != 1 || rs[0].Error == nil ||
		!strings.Contains(rs[0].Error.Message, "request body not received within 300ms") {
		t.Fatalf("slow body: HTTP %d %+v", resp.StatusCode, rs)
	}

	// A call longer than both timeouts, with its response stream, is unaffected.
	if got, _ := callText(t, cs, "web_sleep", map[string]any{"ms": 900}); got != "slept" {
		t.Fatalf("long call = %q", got)
	}
	if got, _ := callText(t, cs, "web_echo", map[string]any{"text": "again"}); got != "again" {
		t.Fatalf("call after idling = %q", got)
	}
}
