package proxy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/internal/mcptest"
)

// slotUpstream is a go-sdk server whose tools end every way a call can:
// ok and limited answer, fail is a JSON-RPC error, block runs until it is
// cancelled.
type slotUpstream struct {
	url      string
	blocking atomic.Int64
}

func startSlotUpstream(t *testing.T) *slotUpstream {
	t.Helper()
	u := &slotUpstream{}
	s := mcp.NewServer(&mcp.Implementation{Name: "web", Version: "1"}, nil)
	obj := map[string]any{"type": "object"}
	answer := func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil
	}
	s.AddTool(&mcp.Tool{Name: "ok", InputSchema: obj}, answer)
	s.AddTool(&mcp.Tool{Name: "limited", InputSchema: obj}, answer)
	s.AddTool(&mcp.Tool{Name: "fail", InputSchema: obj}, answer)
	s.AddTool(&mcp.Tool{Name: "block", InputSchema: obj}, func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		u.blocking.Add(1)
		defer u.blocking.Add(-1)
		<-ctx.Done()
		return nil, ctx.Err()
	})
	s.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if p, ok := req.GetParams().(*mcp.CallToolParamsRaw); ok && p.Name == "fail" {
				return nil, &jsonrpc.Error{Code: -32050, Message: "the server failed"}
			}
			return next(ctx, method, req)
		}
	})
	u.url = mcptest.ServeHTTP(t, s).URL + "/mcp"
	return u
}

// slotConfig: one call in flight per caller, and one web_limited per
// caller per hour.
func slotConfig(u *slotUpstream) string {
	return fmt.Sprintf(`{"mcpServers": {"web": {"type": "http", "url": %q}},
	  "inbound": {"auth": {"mode": "trusted_header"}, "user_header": "X-User"},
	  "limits": {"rules": [
	    {"name": "one-at-a-time", "scope": "caller", "in_flight": 1},
	    {"name": "limited-rate", "scope": "caller_tool", "tool": "web_limited", "calls": 1, "per_seconds": 3600}]}}`, u.url)
}

// An in_flight slot is returned however the call ends: it succeeds, fails,
// is cancelled by its client, or its client leaves; and when a rate
// refuses the call after the slot was taken. Each caller may run one call
// at a time, so a slot not returned refuses every later call of its
// caller; each case (a caller of its own) is followed by another call of
// the same caller, on the other replica when there are two, which must be
// admitted.
func TestInFlightSlotReturned(t *testing.T) {
	t.Run("in process", func(t *testing.T) {
		u := startSlotUpstream(t)
		checkSlotReturned(t, u, limitReplicas(t, 1, slotConfig(u), nil, ""))
	})
	t.Run("shared", func(t *testing.T) {
		u := startSlotUpstream(t)
		r := mcptest.StartRedis(t, false)
		checkSlotReturned(t, u, limitReplicas(t, 2, slotConfig(u), r, "slot-returned:"))
	})
}

func checkSlotReturned(t *testing.T, u *slotUpstream, muxes []*mux) {
	t.Helper()
	here, there := muxes[0].ts.URL+"/mcp", muxes[len(muxes)-1].ts.URL+"/mcp"
	ctx := context.Background()
	call := func(url, user, tool string) rpcReply {
		_, r := doRPC(mcpRequest(t, ctx, http.MethodPost, url, asUser(user, "tools/call", tool), toolCallBody(tool)))
		return r
	}
	// admitted reports whether user's next call is admitted now.
	admitted := func(user string) (bool, string) {
		r := call(there, user, "web_ok")
		return r.Error == nil && strings.Contains(string(r.Result), `"text":"ok"`) && !strings.Contains(string(r.Result), `"isError":true`),
			fmt.Sprintf("%s %+v", r.Result, r.Error)
	}
	slotFree := func(t *testing.T, user, after string) {
		t.Helper()
		if ok, got := admitted(user); !ok {
			t.Fatalf("after a call that %s, the caller's next call: %s; want it admitted (the slot returned)", after, got)
		}
	}
	// slotFreed waits for a call that ended asynchronously to return its slot.
	slotFreed := func(t *testing.T, user, after string) {
		t.Helper()
		waitLong(t, 10*time.Second, "the upstream call to end", func() bool { return u.blocking.Load() == 0 })
		waitLong(t, 10*time.Second, "the slot of a call that "+after+" to be returned", func() bool { ok, _ := admitted(user); return ok })
	}

	t.Run("success", func(t *testing.T) {
		if r := call(here, "succeeds", "web_ok"); r.Error != nil || !strings.Contains(string(r.Result), `"text":"ok"`) {
			t.Fatalf("call: %s %+v", r.Result, r.Error)
		}
		slotFree(t, "succeeds", "succeeded")
	})
	t.Run("error", func(t *testing.T) {
		if r := call(here, "fails", "web_fail"); r.Error == nil || r.Error.Code != -32050 {
			t.Fatalf("failing call: %s %+v, want the server's error", r.Result, r.Error)
		}
		slotFree(t, "fails", "failed")
	})
	t.Run("cancelled", func(t *testing.T) {
		cs := sessionAs(t, here, "cancels")
		cctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() {
			_, err := cs.CallTool(cctx, &mcp.CallToolParams{Name: "web_block", Arguments: map[string]any{}})
			done <- err
		}()
		waitLong(t, 10*time.Second, "the call to run upstream", func() bool { return u.blocking.Load() == 1 })
		cancel() // notifications/cancelled
		if err := <-done; err == nil {
			t.Fatal("a cancelled call succeeded")
		}
		slotFreed(t, "cancels", "was cancelled")
	})
	t.Run("client leaves", func(t *testing.T) {
		cctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		req := mcpRequest(t, cctx, http.MethodPost, here, asUser("leaves", "tools/call", "web_block"), toolCallBody("web_block"))
		go func() {
			defer close(done)
			if resp, err := testHTTP.Do(req); err == nil {
				resp.Body.Close()
			}
		}()
		waitLong(t, 10*time.Second, "the call to run upstream", func() bool { return u.blocking.Load() == 1 })
		cancel() // the connection closes mid-call
		<-done
		slotFreed(t, "leaves", "lost its client")
	})
	t.Run("refused by a rate", func(t *testing.T) {
		if r := call(here, "rated", "web_limited"); r.Error != nil || !strings.Contains(string(r.Result), `"text":"ok"`) {
			t.Fatalf("first limited call: %s %+v", r.Result, r.Error)
		}
		if r := call(here, "rated", "web_limited"); !strings.Contains(string(r.Result), `rate limit \"limited-rate\" exceeded`) {
			t.Fatalf("second limited call: %s %+v, want the rate's refusal", r.Result, r.Error)
		}
		slotFree(t, "rated", "a rate refused after its slot was taken")
	})
}

// asUser are the headers of a 2026-07-28 request as user.
func asUser(user, method, name string) map[string]string {
	h := modernHeaders(method, name)
	h["X-User"] = user
	return h
}

// toolCallBody is a 2026-07-28 tools/call of tool without arguments.
func toolCallBody(tool string) string {
	return `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{` + modernMeta("{}") + `,"name":"` + tool + `","arguments":{}}}`
}

// sessionAs opens a 2025-11-25 session at url as user (trusted header).
func sessionAs(t *testing.T, url, user string) *mcp.ClientSession {
	t.Helper()
	rt := &clientRT{base: testHTTP.Transport, static: http.Header{"X-User": {user}}}
	c := mcp.NewClient(&mcp.Implementation{Name: "limits-client", Version: "1"}, nil)
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: rt}},
		&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// doRPC sends req and decodes its JSON-RPC response (JSON or one event of
// a stream); a failure is the reply's error.
func doRPC(req *http.Request) (int, rpcReply) {
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
			return resp.StatusCode, r
		}
	}
	r.Error = &struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}{Message: fmt.Sprintf("HTTP %d, no response in %q", resp.StatusCode, b)}
	return resp.StatusCode, r
}
