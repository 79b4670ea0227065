package proxy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/redis/go-redis/v9"

	"github.com/mcp-mux/mcp-mux/internal/mcptest"
	"github.com/mcp-mux/mcp-mux/internal/proxy"
	"github.com/mcp-mux/mcp-mux/internal/ratelimit"
	"github.com/mcp-mux/mcp-mux/internal/sessionstore"
)

// countingUpstream is a real HTTP MCP server (mcptest.NewServer plus a
// prompt) that counts the tools/call requests reaching it by tool and the
// most it ran at once.
type countingUpstream struct {
	url            string
	calls          sync.Map // tool name → *atomic.Int64
	cur, peak      atomic.Int64
	prompts, other atomic.Int64
}

func startCountingUpstream(t *testing.T) *countingUpstream {
	t.Helper()
	u := &countingUpstream{}
	s := mcptest.NewServer("web")
	s.AddPrompt(&mcp.Prompt{Name: "greet"}, func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		u.prompts.Add(1)
		return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: "hi"}}}}, nil
	})
	s.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method != "tools/call" {
				return next(ctx, method, req)
			}
			name := req.GetParams().(*mcp.CallToolParamsRaw).Name
			n, _ := u.calls.LoadOrStore(name, new(atomic.Int64))
			n.(*atomic.Int64).Add(1)
			c := u.cur.Add(1)
			for p := u.peak.Load(); c > p && !u.peak.CompareAndSwap(p, c); p = u.peak.Load() {
			}
			defer u.cur.Add(-1)
			return next(ctx, method, req)
		}
	})
	u.url = mcptest.ServeHTTP(t, s).URL + "/mcp"
	return u
}

func (u *countingUpstream) count(tool string) int64 {
	if n, ok := u.calls.Load(tool); ok {
		return n.(*atomic.Int64).Load()
	}
	return 0
}

const (
	limAliceKey = "alice-key-0123456789"
	limBobKey   = "bob-key-0123456789"
)

// limitsConfig is a mux on u with api_keys callers and the given limits.
func limitsConfig(u *countingUpstream, limits string) string {
	return fmt.Sprintf(`{"mcpServers": {"web": {"type": "http", "url": %q}},
	  "inbound": {"auth": {"mode": "api_keys", "keys": {"alice": "$ALICE_KEY", "bob": "$BOB_KEY"}}},
	  "limits": %s}`, u.url, limits)
}

const doneWhenLimits = `{"rules": [
	  {"name": "echo-per-caller", "scope": "caller_tool", "tool": "web_echo", "calls": 100, "per_seconds": 60},
	  {"name": "sleep-in-flight", "scope": "tool", "tool": "web_sleep", "in_flight": 4}]}`

// limitReplicas starts n muxes on cfg; with r, sharing sessions and
// limits through it.
func limitReplicas(t *testing.T, n int, cfg string, r *mcptest.Redis, prefix string) []*mux {
	t.Helper()
	env := map[string]string{"ALICE_KEY": limAliceKey, "BOB_KEY": limBobKey}
	var out []*mux
	for range n {
		opts := proxy.Options{StateKey: testStateKey}
		if r != nil {
			opts.SessionStore = func(o sessionstore.Options) sessionstore.Store {
				return sessionstore.NewRedis(sessionstore.RedisOptions{Options: o, Client: redis.NewClient(&redis.Options{Addr: r.Addr}), KeyPrefix: prefix})
			}
			opts.LimitStore = &ratelimit.Store{Client: redis.NewClient(&redis.Options{Addr: r.Addr, MaxRetries: -1, PoolSize: 64, ContextTimeoutEnabled: true}), KeyPrefix: prefix,
				Timeout: 10 * time.Second} // a burst of 400 under -race on two cores; a timeout would fail open
		}
		m, _ := startMuxEnv(t, cfg, env, opts)
		out = append(out, m)
	}
	return out
}

// limitsHTTP sends the bursts: enough connections for 400 at once.
var limitsHTTP = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 512}, Timeout: time.Minute}

// callResult is one sessionless tools/call's outcome.
type callResult struct {
	text    string
	isError bool
	err     error
}

// callTool makes one 2026-07-28 tools/call as the caller with key.
func callTool(ctx context.Context, base, key, tool, args string) callResult {
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{` + modernMeta("{}") + `,"name":"` + tool + `","arguments":` + args + `}}`
	raw, err := postRPC(ctx, base, key, "tools/call", tool, body)
	if err != nil {
		return callResult{err: err}
	}
	var res struct {
		Content []struct{ Text string } `json:"content"`
		IsError bool                    `json:"isError"`
	}
	if err := json.Unmarshal(raw.Result, &res); err != nil || len(res.Content) == 0 {
		return callResult{err: fmt.Errorf("result %s, error %+v", raw.Result, raw.Error)}
	}
	return callResult{text: res.Content[0].Text, isError: res.IsError}
}

// rpcOutcome is a JSON-RPC response with its error's data.
type rpcOutcome struct {
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int             `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	} `json:"error"`
}

// postRPC posts one 2026-07-28 request and decodes its response.
func postRPC(ctx context.Context, base, key, method, name, body string) (rpcOutcome, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/mcp", strings.NewReader(body))
	if err != nil {
		return rpcOutcome{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+key)
	for k, v := range modernHeaders(method, name) {
		req.Header.Set(k, v)
	}
	resp, err := limitsHTTP.Do(req)
	if err != nil {
		return rpcOutcome{}, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(b), "\n") {
		var out rpcOutcome
		if json.Unmarshal([]byte(strings.TrimPrefix(strings.TrimSpace(line), "data: ")), &out) == nil && (out.Result != nil || out.Error != nil) {
			return out, nil
		}
	}
	return rpcOutcome{}, fmt.Errorf("status %d, no response in %q", resp.StatusCode, b)
}

// fire makes n calls at once, spread over muxes in turn, and returns
// their outcomes.
func fire(muxes []*mux, n int, key, tool, args string) []callResult {
	out := make([]callResult, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			out[i] = callTool(context.Background(), muxes[i%len(muxes)].ts.URL, key, tool, args)
		})
	}
	close(start)
	wg.Wait()
	return out
}

// TestLimitsAcrossReplicas is issue 22's test of done: two replicas on one
// redis-server; 400 calls at once by one caller against 100 per minute for
// (caller, tool) admit 100 ± 2 and refuse the rest with the limit's
// message, none of them reaching the upstream; another caller is
// unaffected; a concurrency limit of 4 never lets a 5th call reach the
// upstream; prompts/get past its limit is a JSON-RPC error with retryAfter.
func TestLimitsAcrossReplicas(t *testing.T) {
	u := startCountingUpstream(t)
	r := mcptest.StartRedis(t, false)
	muxes := limitReplicas(t, 2, limitsConfig(u, doneWhenLimits), r, "limits-test:")
	checkLimits(t, u, muxes, 2)
}

// TestLimitsInProcess: the same on one replica without Redis
// (golang.org/x/time/rate and a counter), where the count is exact.
func TestLimitsInProcess(t *testing.T) {
	u := startCountingUpstream(t)
	checkLimits(t, u, limitReplicas(t, 1, limitsConfig(u, doneWhenLimits), nil, ""), 0)
}

func checkLimits(t *testing.T, u *countingUpstream, muxes []*mux, slack int) {
	t.Helper()
	start := time.Now()
	res := fire(muxes, 400, limAliceKey, "web_echo", `{"text":"x"}`)
	// The budget refills one call per 0.6 s meanwhile (a burst of 400
	// takes seconds under -race on two cores).
	refill := int(time.Since(start) / (600 * time.Millisecond))
	admitted, refused := 0, 0
	for _, c := range res {
		switch {
		case c.err != nil:
			t.Fatalf("call failed: %v", c.err)
		case !c.isError && c.text == "x":
			admitted++
		case c.isError && strings.HasPrefix(c.text, `rate limit "echo-per-caller" exceeded: 100 calls per 1m0s for each (caller, tool); retry after `):
			refused++
		default:
			t.Fatalf("unexpected result %+v", c)
		}
	}
	t.Logf("admitted %d, refused %d, upstream saw %d; the burst took %v", admitted, refused, u.count("echo"), time.Since(start))
	if admitted < 100-slack || admitted > 100+slack+refill || admitted+refused != 400 {
		t.Fatalf("admitted %d, refused %d; want 100 ± %d (+%d refilled during the burst) and the rest refused", admitted, refused, slack, refill)
	}
	if got := u.count("echo"); got != int64(admitted) {
		t.Fatalf("the upstream saw %d echo calls, %d were admitted", got, admitted)
	}
	for i, m := range muxes { // another caller, on every replica
		if c := callTool(context.Background(), m.ts.URL, limBobKey, "web_echo", `{"text":"b"}`); c.err != nil || c.isError || c.text != "b" {
			t.Fatalf("bob on replica %d: %+v", i, c)
		}
	}

	res = fire(muxes, 24, limAliceKey, "web_sleep", `{"ms":300}`)
	slept, busy := 0, 0
	for _, c := range res {
		switch {
		case c.err != nil:
			t.Fatalf("call failed: %v", c.err)
		case c.text == "slept":
			slept++
		case c.isError && strings.Contains(c.text, `concurrency limit "sleep-in-flight" exceeded: 4 calls in flight for each tool`):
			busy++
		default:
			t.Fatalf("unexpected result %+v", c)
		}
	}
	t.Logf("sleep: %d ran, %d refused; the upstream ran at most %d at once", slept, busy, u.peak.Load())
	if u.peak.Load() > 4 || slept < 4 || slept+busy != 24 {
		t.Fatalf("the upstream ran %d at once (cap 4); %d ran, %d refused", u.peak.Load(), slept, busy)
	}

	metrics := scrapeLimits(t, muxes[0].ts.URL)
	if !strings.Contains(metrics, `mcp_mux_limit_rejections_total{kind="rate",limit="echo-per-caller"}`) {
		t.Fatalf("no rejections metric in\n%s", metrics)
	}
}

// TestLimitsPromptsJSONRPCError: a prompts/get past a caller's limit is
// a JSON-RPC error naming the limit, with data.retryAfter; the upstream
// never sees it.
func TestLimitsPromptsJSONRPCError(t *testing.T) {
	u := startCountingUpstream(t)
	muxes := limitReplicas(t, 1, limitsConfig(u, `{"rules": [{"name": "prompts-per-caller", "scope": "caller", "server": "web", "calls": 2, "per_seconds": 60}]}`), nil, "")
	prompt := func(m *mux) rpcOutcome {
		body := `{"jsonrpc":"2.0","id":1,"method":"prompts/get","params":{` + modernMeta("{}") + `,"name":"web_greet"}}`
		out, err := postRPC(context.Background(), m.ts.URL, limAliceKey, "prompts/get", "web_greet", body)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	for i := range 2 {
		if out := prompt(muxes[i%len(muxes)]); out.Error != nil {
			t.Fatalf("prompt %d: %+v", i, out.Error)
		}
	}
	out := prompt(muxes[len(muxes)-1])
	if out.Error == nil || out.Error.Code != -32029 || !strings.Contains(out.Error.Message, `rate limit "prompts-per-caller" exceeded: 2 calls per 1m0s for each caller`) ||
		!strings.Contains(string(out.Error.Data), `"retryAfter":`) {
		t.Fatalf("third prompt: %+v %s", out.Error, out.Result)
	}
	if u.prompts.Load() != 2 {
		t.Fatalf("the upstream served %d prompts, want 2", u.prompts.Load())
	}
}

func scrapeLimits(t *testing.T, base string) string {
	t.Helper()
	resp, err := testHTTP.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// TestLimitsStoreDown: with the limits' Redis stopped, a replica fails
// open or closed as configured and /readyz says so.
func TestLimitsStoreDown(t *testing.T) {
	u := startCountingUpstream(t)
	r := mcptest.StartRedis(t, false)
	for _, mode := range []string{"open", "closed"} {
		t.Run(mode, func(t *testing.T) {
			r.Start()
			cfg := limitsConfig(u, `{"on_store_error": "`+mode+`", "rules": [{"name": "echo-rate", "scope": "caller", "calls": 1000, "per_seconds": 60}]}`)
			m := limitReplicas(t, 1, cfg, r, "down-"+mode+":")[0]
			if got := readyz(t, m.ts.URL); got != "ok (shared)" {
				t.Fatalf("readyz limits %q", got)
			}
			r.Stop()
			c := callTool(context.Background(), m.ts.URL, limAliceKey, "web_echo", `{"text":"x"}`)
			if mode == "open" && (c.isError || c.text != "x") {
				t.Fatalf("failing open: %+v", c)
			}
			if mode == "closed" && (!c.isError || !strings.Contains(c.text, `limit "echo-rate" cannot be checked: the limit store is unreachable`)) {
				t.Fatalf("failing closed: %+v", c)
			}
			if got := readyz(t, m.ts.URL); got != "degraded: store unreachable, failing "+mode {
				t.Fatalf("readyz limits %q", got)
			}
		})
	}
}

// readyz returns /readyz's limits field.
func readyz(t *testing.T, base string) string {
	t.Helper()
	resp, err := testHTTP.Get(base + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Limits string `json:"limits"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	return out.Limits
}
