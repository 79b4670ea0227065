package upstream_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/internal/mcptest"
	"github.com/mcp-mux/mcp-mux/internal/upstream"
	"github.com/mcp-mux/mcp-mux/internal/wire"
)

var (
	alice1 = upstream.Key{User: "alice", Thread: "t1"}
	alice2 = upstream.Key{User: "alice", Thread: "t2"}
	bob1   = upstream.Key{User: "bob", Thread: "t1"}
)

func TestNewValidatesOptions(t *testing.T) {
	for _, o := range []upstream.Options{
		{Transport: upstream.Stdio},
		{Transport: upstream.HTTP},
		{Transport: upstream.SSE},
		{Transport: "websocket", URL: "ws://x"},
	} {
		if u, err := upstream.New(o); err == nil {
			_ = u.Close()
			t.Errorf("New(%+v) accepted invalid options", o)
		}
	}
	u, err := upstream.New(upstream.Options{Name: "n", Transport: upstream.HTTP, URL: "http://127.0.0.1:1/mcp"})
	if err != nil {
		t.Fatal(err)
	}
	if u.Name() != "n" || u.Sessions() != 0 || u.Tools() != nil {
		t.Errorf("fresh upstream: name %q sessions %d tools %v", u.Name(), u.Sessions(), u.Tools())
	}
	if err := u.Close(); err != nil { // Close without Start must not hang
		t.Fatal(err)
	}
}

func TestDiscoveryOverEachTransport(t *testing.T) {
	for _, tg := range targets(t, nil) {
		t.Run(tg.name, func(t *testing.T) {
			t.Parallel()
			var mu sync.Mutex
			var seen [][]upstream.Tool
			var up atomic.Pointer[upstream.Upstream]
			o := tg.opts
			o.OnChange = func() { mu.Lock(); seen = append(seen, up.Load().Tools()); mu.Unlock() }
			u, err := upstream.New(o)
			if err != nil {
				t.Fatal(err)
			}
			up.Store(u) // before Start, so OnChange always finds it
			u.Start()
			t.Cleanup(func() { _ = u.Close() })
			recv(t, u.Discovered(), 20*time.Second, "first discovery")
			if err := u.Err(); err != nil {
				t.Fatalf("discovery failed: %v", err)
			}

			tools := u.Tools()
			byName := map[string]json.RawMessage{}
			for _, tl := range tools {
				byName[tl.Name] = tl.Raw
			}
			for _, want := range []string{"echo", "add", "pid", "headers", "sleep", "fail", "count"} {
				raw, ok := byName[want]
				if !ok {
					t.Errorf("tool %q not discovered; have %d tools", want, len(tools))
					continue
				}
				var v struct {
					Name        string          `json:"name"`
					InputSchema json.RawMessage `json:"inputSchema"`
				}
				if err := json.Unmarshal(raw, &v); err != nil || v.Name != want || len(v.InputSchema) == 0 {
					t.Errorf("raw JSON of %q lacks name or inputSchema: %s", want, raw)
				}
			}
			if !strings.Contains(string(byName["add"]), `"outputSchema"`) {
				t.Errorf("add lost its outputSchema: %s", byName["add"])
			}
			mu.Lock()
			defer mu.Unlock()
			if len(seen) != 1 || len(seen[0]) != len(tools) {
				t.Errorf("OnChange called %d times (want 1 with %d tools)", len(seen), len(tools))
			}
		})
	}
}

// rawServer adds a tool whose structured content the SDK client types
// would reshape (key order, a 20-digit integer, an unknown field).
const rawStructured = `{"z":1,"big":12345678901234567890,"a":{"nested":[1.50,true,null]}}`

func newRawServer() *mcp.Server {
	s := mcptest.NewServer("raw")
	s.AddTool(&mcp.Tool{Name: "raw", InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{
				Content:           []mcp.Content{&mcp.TextContent{Text: "raw"}},
				StructuredContent: json.RawMessage(rawStructured),
			}, nil
		})
	return s
}

func TestCallToolOverEachTransport(t *testing.T) {
	for _, tg := range targets(t, newRawServer) {
		t.Run(tg.name, func(t *testing.T) {
			t.Parallel()
			u := start(t, tg.opts)
			if got := callText(t, u, alice1, "echo", `{"text":"hi \"there\" ü"}`); got != `hi "there" ü` {
				t.Errorf("echo = %q", got)
			}
			raw, err := call(context.Background(), u, alice1, "add", `{"a":2,"b":40}`)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(raw), `"structuredContent":{"sum":42}`) {
				t.Errorf("add result lacks structuredContent: %s", raw)
			}
			raw, err = call(context.Background(), u, alice1, "fail", "")
			if err != nil {
				t.Fatalf("isError result surfaced as error: %v", err)
			}
			if !strings.Contains(string(raw), `"isError":true`) || !strings.Contains(string(raw), "it failed") {
				t.Errorf("fail result = %s", raw)
			}
			if tg.name != upstream.Stdio { // the stdio server has no raw tool
				raw, err = call(context.Background(), u, alice1, "raw", "")
				if err != nil {
					t.Fatal(err)
				}
				if !strings.Contains(string(raw), `"structuredContent":`+rawStructured) {
					t.Errorf("structuredContent not byte-exact:\n got %s\nwant %s", raw, rawStructured)
				}
			}
			// An unknown tool is a JSON-RPC error carrying the upstream's code.
			_, err = call(context.Background(), u, alice1, "nope", "")
			var rpcErr *wire.Error
			if !errors.As(err, &rpcErr) {
				t.Fatalf("unknown tool: err = %v (%T), want *wire.Error", err, err)
			}
			if rpcErr.Code != -32602 || !strings.Contains(rpcErr.Message, `unknown tool "nope"`) {
				t.Errorf("unknown tool error = %d %q", rpcErr.Code, rpcErr.Message)
			}
			// The session survives a JSON-RPC error.
			if got := callText(t, u, alice1, "count", ""); got != "1" {
				t.Errorf("count after error = %s", got)
			}
			if n := u.Sessions(); n != 1 {
				t.Errorf("Sessions() = %d, want 1", n)
			}
		})
	}
}

func TestCallToolMeta(t *testing.T) {
	for _, tg := range targets(t, nil) {
		t.Run(tg.name, func(t *testing.T) {
			t.Parallel()
			u := start(t, tg.opts)
			params := wire.AppendCallParams(nil, "echo", json.RawMessage(`{"text":"m"}`), json.RawMessage(`{"progressToken":"p1","x-trace":"abc"}`))
			raw, err := u.CallTool(context.Background(), upstream.Call{Key: alice1, Params: params})
			if err != nil {
				t.Fatal(err)
			}
			if got := resultText(t, raw); got != "m" {
				t.Errorf("echo with _meta = %q", got)
			}
		})
	}
}

func TestStaticAndPerCallHeaders(t *testing.T) {
	for _, tr := range []string{upstream.HTTP, upstream.SSE} {
		t.Run(tr, func(t *testing.T) {
			t.Parallel()
			// Record what reaches the server: the SSE handler does not expose
			// request headers to tools.
			var mu sync.Mutex
			static := 0
			srv := mcptest.NewServer("h")
			var h http.Handler = streamable(srv)
			path := "/mcp"
			if tr == upstream.SSE {
				h, path = mcp.NewSSEHandler(func(*http.Request) *mcp.Server { return srv }, nil), "/sse"
			}
			_, ts := serveSwap(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Header.Get("X-Static") == "s1" {
					mu.Lock()
					static++
					mu.Unlock()
				}
				h.ServeHTTP(w, r)
			}))
			u := start(t, upstream.Options{Name: "h", Transport: tr, URL: ts.URL + path, Header: http.Header{"X-Static": {"s1"}}})
			mu.Lock()
			n := static
			mu.Unlock()
			if n == 0 {
				t.Error("static header not sent during discovery")
			}
			raw, err := u.CallTool(context.Background(), upstream.Call{Key: alice1, Params: wire.AppendCallParams(nil, "headers", nil, nil),
				Header: http.Header{"X-Static": {"s1"}, "X-Per-Call": {"c1"}}}) // the caller's complete header set
			if err != nil {
				t.Fatal(err)
			}
			// Per-call headers only travel on the Streamable HTTP fast path.
			if got := resultText(t, raw); tr == upstream.HTTP && (!strings.Contains(got, "X-Static: s1") || !strings.Contains(got, "X-Per-Call: c1")) {
				t.Errorf("headers seen by the tool:\n%s", got)
			}
		})
	}
}

func TestSessionScopes(t *testing.T) {
	for _, tg := range targets(t, nil) {
		t.Run(tg.name, func(t *testing.T) {
			t.Parallel()
			t.Run(upstream.ScopeThread, func(t *testing.T) {
				t.Parallel()
				o := tg.opts // default scope
				u := start(t, o)
				if a, b := callText(t, u, alice1, "count", ""), callText(t, u, alice2, "count", ""); a != "1" || b != "1" {
					t.Errorf("two threads: counts %s, %s; want 1, 1", a, b)
				}
				if got := callText(t, u, alice1, "count", ""); got != "2" {
					t.Errorf("same thread again: count %s, want 2", got)
				}
				if got := callText(t, u, bob1, "count", ""); got != "1" {
					t.Errorf("same thread id, other user: count %s, want 1", got)
				}
				if n := u.Sessions(); n != 3 {
					t.Errorf("Sessions() = %d, want 3", n)
				}
			})
			t.Run(upstream.ScopeUser, func(t *testing.T) {
				t.Parallel()
				o := tg.opts
				o.Scope = upstream.ScopeUser
				u := start(t, o)
				if a, b := callText(t, u, alice1, "count", ""), callText(t, u, alice2, "count", ""); a != "1" || b != "2" {
					t.Errorf("two threads of one user: counts %s, %s; want 1, 2", a, b)
				}
				if got := callText(t, u, bob1, "count", ""); got != "1" {
					t.Errorf("other user: count %s, want 1", got)
				}
				if n := u.Sessions(); n != 2 {
					t.Errorf("Sessions() = %d, want 2", n)
				}
			})
			t.Run(upstream.ScopeShared, func(t *testing.T) {
				t.Parallel()
				o := tg.opts
				o.Scope = upstream.ScopeShared
				u := start(t, o)
				if a, b := callText(t, u, alice1, "count", ""), callText(t, u, bob1, "count", ""); a != "1" || b != "2" {
					t.Errorf("two users: counts %s, %s; want 1, 2", a, b)
				}
				if n := u.Sessions(); n != 1 {
					t.Errorf("Sessions() = %d, want 1", n)
				}
			})
		})
	}
}

// Concurrent first calls on one key share one new session (single flight).
func TestConcurrentFirstCallsShareSession(t *testing.T) {
	for _, tg := range targets(t, nil) {
		t.Run(tg.name, func(t *testing.T) {
			t.Parallel()
			u := start(t, tg.opts)
			const n = 8
			var wg sync.WaitGroup
			errs := make(chan error, n)
			for range n {
				wg.Go(func() {
					_, err := call(context.Background(), u, alice1, "count", "")
					errs <- err
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				if err != nil {
					t.Fatal(err)
				}
			}
			if got := callText(t, u, alice1, "count", ""); got != "9" {
				t.Errorf("count after %d concurrent calls = %s, want 9 (one session)", n, got)
			}
			if s := u.Sessions(); s != 1 {
				t.Errorf("Sessions() = %d, want 1", s)
			}
		})
	}
}

func TestLRUCap(t *testing.T) {
	for _, tg := range targets(t, nil) {
		t.Run(tg.name, func(t *testing.T) {
			t.Parallel()
			o := tg.opts
			o.MaxSessions = 2
			u := start(t, o)
			keys := []upstream.Key{{User: "u", Thread: "a"}, {User: "u", Thread: "b"}, {User: "u", Thread: "c"}}
			var pidA int
			if tg.name == upstream.Stdio {
				pidA = pidOf(t, u, keys[0])
			}
			for _, k := range keys {
				if got := callText(t, u, k, "count", ""); got != "1" {
					t.Errorf("first count on %s = %s", k.Thread, got)
				}
				if n := u.Sessions(); n > 2 {
					t.Errorf("Sessions() = %d above MaxSessions 2", n)
				}
			}
			if pidA != 0 {
				waitGone(t, pidA) // evicted stdio session: its process ends
			}
			// b is now least recently used; a comes back on a fresh session.
			if got := callText(t, u, keys[0], "count", ""); got != "1" {
				t.Errorf("evicted key: count %s, want a fresh session (1)", got)
			}
			if got := callText(t, u, keys[2], "count", ""); got != "2" {
				t.Errorf("recently used key: count %s, want its session kept (2)", got)
			}
			if n := u.Sessions(); n != 2 {
				t.Errorf("Sessions() = %d, want 2", n)
			}
		})
	}
}

// A session with a call in flight is not the LRU victim: evicting it would
// kill the running call.
func TestLRUSparesInFlightSession(t *testing.T) {
	bs := newBlockingServer()
	o := httpOptions(t, bs.Server)
	o.MaxSessions = 2
	u := start(t, o)
	a, b, c := upstream.Key{Thread: "a"}, upstream.Key{Thread: "b"}, upstream.Key{Thread: "c"}
	callText(t, u, a, "count", "")
	done := make(chan error, 1)
	go func() {
		raw, err := call(context.Background(), u, a, "block", "")
		if err == nil && !strings.Contains(string(raw), "released") {
			err = errors.New("unexpected result " + string(raw))
		}
		done <- err
	}()
	recv(t, bs.entered, 10*time.Second, "block call to start")
	callText(t, u, b, "count", "") // a is the least recently used now
	callText(t, u, c, "count", "") // over the cap: b must go, not busy a
	close(bs.release)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("in-flight call on an evicted session failed: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("in-flight call did not return")
	}
	if got := callText(t, u, a, "count", ""); got != "2" {
		t.Errorf("busy key lost its session: count %s, want 2", got)
	}
	waitFor(t, 5*time.Second, "pool back under the cap", func() bool { return u.Sessions() <= 2 })
}

func TestIdleTimeout(t *testing.T) {
	for _, tg := range targets(t, nil) {
		t.Run(tg.name, func(t *testing.T) {
			t.Parallel()
			o := tg.opts
			o.IdleTimeout = 200 * time.Millisecond
			u := start(t, o)
			var pid int
			if tg.name == upstream.Stdio {
				pid = pidOf(t, u, alice1)
			} else {
				callText(t, u, alice1, "count", "")
			}
			if n := u.Sessions(); n != 1 {
				t.Fatalf("Sessions() = %d, want 1", n)
			}
			waitFor(t, 5*time.Second, "idle session to be closed", func() bool { return u.Sessions() == 0 })
			if pid != 0 {
				waitGone(t, pid)
			}
			// A call running longer than the idle timeout is not reaped.
			got := callText(t, u, alice1, "sleep", `{"ms":700}`)
			if got != "slept" {
				t.Errorf("sleep = %q", got)
			}
			if n := u.Sessions(); n != 1 {
				t.Errorf("Sessions() right after a long call = %d, want 1", n)
			}
			if got := callText(t, u, alice1, "count", ""); got != "1" {
				t.Errorf("count after long call = %s, want the same fresh session (1)", got)
			}
			waitFor(t, 5*time.Second, "idle session to be closed again", func() bool { return u.Sessions() == 0 })
		})
	}
}

func TestReleaseThread(t *testing.T) {
	for _, tg := range targets(t, nil) {
		t.Run(tg.name, func(t *testing.T) {
			t.Parallel()
			u := start(t, tg.opts)
			callText(t, u, alice1, "count", "")
			callText(t, u, alice2, "count", "")
			var pid1 int
			if tg.name == upstream.Stdio {
				pid1 = pidOf(t, u, alice1)
			}
			u.ReleaseThread(alice1.Thread + "-other") // no such thread
			if n := u.Sessions(); n != 2 {
				t.Fatalf("Sessions() = %d after releasing an unknown thread, want 2", n)
			}
			u.ReleaseThread(alice1.Thread)
			if n := u.Sessions(); n != 1 {
				t.Errorf("Sessions() = %d after ReleaseThread, want 1", n)
			}
			if pid1 != 0 { // ReleaseThread waits for the process to end
				if _, _, alive := mcptest.ProcStat(pid1); alive {
					t.Errorf("released thread's process %d still running", pid1)
				}
			}
			if got := callText(t, u, alice2, "count", ""); got != "2" {
				t.Errorf("other thread: count %s, want 2 (kept)", got)
			}
			if got := callText(t, u, alice1, "count", ""); got != "1" {
				t.Errorf("released thread: count %s, want 1 (fresh)", got)
			}
		})
	}
}

// DropServerInfo: an upstream's serverInfo leaves a result (the rest of
// _meta and of the result stays, byte for byte outside _meta); a result
// without it, or a non-object, passes untouched.
func TestDropServerInfo(t *testing.T) {
	info := `"io.modelcontextprotocol/serverInfo":{"name":"upstream-name","version":"9"}`
	got := string(upstream.DropServerInfo(json.RawMessage(`{"content":[{"type":"text","text":"x"}],"_meta":{` + info + `,"k":1}}`)))
	if strings.Contains(got, "upstream-name") || !strings.Contains(got, `"_meta":{"k":1}`) || !strings.Contains(got, `"text":"x"`) {
		t.Errorf("with other _meta: %s", got)
	}
	if got := string(upstream.DropServerInfo(json.RawMessage(`{"_meta":{` + info + `},"isError":false}`))); got != `{"_meta":{},"isError":false}` {
		t.Errorf("only member: %s", got)
	}
	// A repeated _meta: the last one is what a decoder reads.
	if got := string(upstream.DropServerInfo(json.RawMessage(`{"_meta":{"a":1}, "content":[], "_meta":{` + info + `}}`))); got != `{"_meta":{"a":1}, "content":[], "_meta":{}}` {
		t.Errorf("repeated _meta: %s", got)
	}
	for _, raw := range []string{`{"content":[],"_meta":{"k":"io.modelcontextprotocol/serverInfo"}}`, `{"content":[]}`, `[1]`, `not json io.modelcontextprotocol/serverInfo`} {
		if got := string(upstream.DropServerInfo(json.RawMessage(raw))); got != raw {
			t.Errorf("%s changed to %s", raw, got)
		}
	}
}

// A list's TTL asks for a relist once it passed, but never more often
// than MinRelist: ttlMs 0 is not a relist per client list. Lists without
// a hint are never stale.
func TestListsStale(t *testing.T) {
	at := time.Now()
	zero := upstream.Lists{At: at, Hints: map[string]upstream.CacheHint{"tools/list": upstream.HintOf(json.RawMessage(`0`), nil)}}
	if zero.Stale(at.Add(upstream.MinRelist / 2)) {
		t.Error("ttlMs 0 is stale before MinRelist")
	}
	if !zero.Stale(at.Add(upstream.MinRelist + time.Millisecond)) {
		t.Error("ttlMs 0 is not stale after MinRelist")
	}
	long := upstream.Lists{At: at, Hints: map[string]upstream.CacheHint{"tools/list": upstream.HintOf(json.RawMessage(`5000`), json.RawMessage(`"public"`))}}
	if long.Stale(at.Add(4*time.Second)) || !long.Stale(at.Add(6*time.Second)) {
		t.Error("a 5 s TTL is not stale exactly after 5 s")
	}
	if (&upstream.Lists{At: at}).Stale(at.Add(time.Hour)) {
		t.Error("lists without a hint are stale")
	}
}
