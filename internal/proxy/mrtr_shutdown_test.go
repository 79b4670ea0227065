package proxy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/internal/proxy"
)

// elicitingUpstream is a legacy go-sdk HTTP server whose ask tool elicits
// and waits for the answer, counting the handlers running and those that
// ended without one.
type elicitingUpstream struct {
	ts      *httptest.Server
	gate    chan struct{} // when set, ask waits for it to close before eliciting
	hold    chan struct{} // when set, ask closes it once answered and then hangs until cancelled
	running atomic.Int64
	ended   atomic.Int64 // handlers that ended unanswered: cancelled, or their elicitation failed
}

func newElicitingUpstream(t *testing.T, gate chan struct{}) *elicitingUpstream {
	t.Helper()
	u := &elicitingUpstream{gate: gate}
	s := mcp.NewServer(&mcp.Implementation{Name: "asker", Version: "1"}, nil)
	s.AddTool(&mcp.Tool{Name: "ask", InputSchema: map[string]any{"type": "object"}},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			u.running.Add(1)
			defer u.running.Add(-1)
			if u.gate != nil {
				<-u.gate
			}
			res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: "name?",
				RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{}}})
			if err != nil || ctx.Err() != nil {
				u.ended.Add(1)
				return nil, fmt.Errorf("unanswered: %w", err)
			}
			if u.hold != nil { // answered: now hang until cancelled
				close(u.hold)
				<-ctx.Done()
				u.ended.Add(1)
				return nil, ctx.Err()
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "answered " + res.Action}}}, nil
		})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
	u.ts = httptest.NewServer(h)
	// Bounded, so a handler left waiting fails the test instead of hanging it.
	t.Cleanup(func() {
		if !within(10*time.Second, u.ts.Close) {
			t.Error("the upstream's Close hung: a handler still waits for its elicitation")
		}
		if !within(5*time.Second, func() {
			for ss := range s.Sessions() {
				_ = ss.Close()
			}
		}) {
			t.Error("closing the upstream's sessions hung")
		}
	})
	return u
}

// within runs f and reports whether it returned within d.
func within(d time.Duration, f func()) bool {
	done := make(chan struct{})
	go func() { f(); close(done) }()
	select {
	case <-done:
		return true
	case <-time.After(d):
		return false
	}
}

// parkAsks makes n 2026-07-28 calls of up's ask tool that park on its
// elicitation; the client never retries them.
func parkAsks(t *testing.T, m *mux, up *elicitingUpstream, n int) {
	t.Helper()
	for i := range n {
		hdr := map[string]string{"X-Mux-Thread-Id": fmt.Sprint("walk-away-", i)}
		inputRequiredOf(t, modernCallR(t, m, hdr))
	}
	waitLong(t, 10*time.Second, "the parked calls to run upstream", func() bool { return up.running.Load() == int64(n) })
}

// askBody is a 2026-07-28 call of up_ask from a client that can elicit.
var askBody = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{` + modernMeta(`{"elicitation":{"form":{}}}`) +
	`,"name":"up_ask","arguments":{}}}`

// modernCallRaw is modernCall of up_ask for any goroutine: failures are
// the reply's error.
func modernCallRaw(m *mux, hdr map[string]string) (int, rpcReply) {
	req, err := http.NewRequest(http.MethodPost, m.ts.URL+"/mcp", strings.NewReader(askBody))
	if err != nil {
		panic(err)
	}
	for k, v := range modernHeaders("tools/call", "up_ask") {
		req.Header.Set(k, v)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	var r rpcReply
	resp, err := testHTTP.Do(req)
	if err != nil {
		r.Error = &struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		}{Message: err.Error()}
		return 0, r
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimPrefix(strings.TrimSpace(line), "data: ")
		if json.Unmarshal([]byte(line), &r) == nil && r.ID != nil {
			break
		}
	}
	return resp.StatusCode, r
}

func modernCallR(t *testing.T, m *mux, hdr map[string]string) rpcReply {
	t.Helper()
	_, r := modernCall(t, m.ts.URL+"/mcp", hdr, `{"elicitation":{"form":{}}}`, "tools/call", "up_ask", `"name":"up_ask","arguments":{}`)
	return r
}

func elicitingMux(t *testing.T, up *elicitingUpstream) *mux {
	t.Helper()
	return startMux(t, fmt.Sprintf(`{"mcpServers": {"up": {"type": "http", "url": %q}}}`, up.ts.URL), proxy.Options{})
}

// Parked calls whose client walked away do not hold up Close: it returns
// at once, and each is cancelled upstream, so the upstream's own Close
// does not wait on an elicitation nobody will answer.
func TestCloseWithParkedCalls(t *testing.T) {
	up := newElicitingUpstream(t, nil)
	m := elicitingMux(t, up)
	parkAsks(t, m, up, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if !within(5*time.Second, func() { _ = m.srv.Close(ctx) }) {
		t.Fatal("Close with 3 parked calls did not return within 5s")
	}
	waitLong(t, 5*time.Second, "the parked calls to be cancelled upstream", func() bool { return up.running.Load() == 0 })
	if n := up.ended.Load(); n != 3 {
		t.Errorf("%d upstream handlers ended unanswered, want 3", n)
	}
}

// A call whose upstream asks for input only after Close began is not
// parked for a retry that cannot come: it ends, cancelled upstream, and
// Close does not wait for it.
func TestCloseRefusesToPark(t *testing.T) {
	gate := make(chan struct{})
	up := newElicitingUpstream(t, gate)
	m := elicitingMux(t, up)
	answered := make(chan rpcReply, 1)
	go func() {
		_, r := modernCallRaw(m, map[string]string{"X-Mux-Thread-Id": "late"})
		answered <- r
	}()
	waitLong(t, 10*time.Second, "the call to run upstream", func() bool { return up.running.Load() == 1 })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	closed := make(chan struct{})
	go func() { _ = m.srv.Close(ctx); close(closed) }()
	time.Sleep(200 * time.Millisecond) // Close is draining the call
	close(gate)                        // … when its server asks for input
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return within 5s of the call asking for input")
	}
	select {
	case r := <-answered:
		if r.Error == nil || r.Error.Message != "mcp-mux is shutting down" {
			t.Errorf("the caller got %s %+v, want the error mcp-mux is shutting down", r.Result, r.Error)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the caller got no answer")
	}
	waitLong(t, 5*time.Second, "the call to be cancelled upstream", func() bool { return up.running.Load() == 0 })
}

// A parked call whose client never retries is cancelled upstream when
// its park time ends; its requestState then continues nothing.
func TestParkedCallExpires(t *testing.T) {
	up := newElicitingUpstream(t, nil)
	m := elicitingMux(t, up)
	proxy.SetParkTTLForTest(m.srv, 300*time.Millisecond)
	hdr := map[string]string{"X-Mux-Thread-Id": "expire"}
	_, state := inputRequiredOf(t, modernCallR(t, m, hdr))
	waitLong(t, 10*time.Second, "the expired call to be cancelled upstream", func() bool { return up.running.Load() == 0 })
	if n := up.ended.Load(); n != 1 {
		t.Errorf("%d upstream handlers ended unanswered, want 1", n)
	}
	_, r := modernCall(t, m.ts.URL+"/mcp", hdr, `{"elicitation":{"form":{}}}`, "tools/call", "up_ask",
		`"name":"up_ask","arguments":{},"inputResponses":{},"requestState":`+mustQuote(state))
	if r.Error == nil || !strings.Contains(r.Error.Message, "no longer waiting") {
		t.Errorf("retry after expiry: %s %+v, want no longer waiting", r.Result, r.Error)
	}
}

// A client that answers a parked call and then walks away from the retry
// while the call runs on has the call cancelled upstream.
func TestParkedRoundAbandoned(t *testing.T) {
	up := newElicitingUpstream(t, nil)
	up.hold = make(chan struct{})
	m := elicitingMux(t, up)
	hdr := map[string]string{"X-Mux-Thread-Id": "abandon"}
	reqs, state := inputRequiredOf(t, modernCallR(t, m, hdr))
	var key string
	for k := range reqs {
		key = k
	}
	ctx, cancel := context.WithCancel(context.Background())
	body := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{` + modernMeta(`{"elicitation":{"form":{}}}`) +
		`,"name":"up_ask","arguments":{},"inputResponses":{` + mustQuote(key) + `:{"action":"accept","content":{}}},"requestState":` + mustQuote(state) + `}}`
	h := modernHeaders("tools/call", "up_ask")
	h["X-Mux-Thread-Id"] = "abandon"
	req := mcpRequest(t, ctx, http.MethodPost, m.ts.URL+"/mcp", h, body)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if resp, err := testHTTP.Do(req); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}()
	select {
	case <-up.hold:
	case <-time.After(10 * time.Second):
		t.Fatal("the answer never reached the upstream")
	}
	cancel()
	<-done
	waitLong(t, 5*time.Second, "the abandoned call to be cancelled upstream", func() bool { return up.running.Load() == 0 })
}
