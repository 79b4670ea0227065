package proxy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/redis/go-redis/v9"

	"github.com/mcp-mux/mcp-mux/internal/api"
	"github.com/mcp-mux/mcp-mux/internal/approvals"
	"github.com/mcp-mux/mcp-mux/internal/mcptest"
	"github.com/mcp-mux/mcp-mux/internal/proxy"
	"github.com/mcp-mux/mcp-mux/internal/secret"
	"github.com/mcp-mux/mcp-mux/internal/storeclient"
)

// ledger is an upstream whose tools count their runs by argument:
// "remove" (destructive) and "peek" (read-only).
type ledger struct {
	mu   sync.Mutex
	runs map[string]int // tool/path → runs
}

func newLedger(t *testing.T) (*ledger, string) {
	l := &ledger{runs: map[string]int{}}
	s := mcp.NewServer(&mcp.Implementation{Name: "ledger", Version: "1"}, nil)
	type in struct {
		Path  string `json:"path"`
		Token string `json:"token,omitempty"`
	}
	tool := func(name string, a *mcp.ToolAnnotations) {
		mcp.AddTool(s, &mcp.Tool{Name: name, Annotations: a}, func(_ context.Context, _ *mcp.CallToolRequest, args in) (*mcp.CallToolResult, any, error) {
			l.mu.Lock()
			l.runs[name+"/"+args.Path]++
			l.mu.Unlock()
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: name + " ran on " + args.Path}}}, nil, nil
		})
	}
	yes := true
	tool("remove", &mcp.ToolAnnotations{DestructiveHint: &yes})
	tool("wipe", nil) // destructive by MCP's default
	tool("peek", &mcp.ToolAnnotations{ReadOnlyHint: true})
	return l, mcptest.ServeHTTP(t, s).URL + "/mcp"
}

func (l *ledger) count(key string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.runs[key]
}

// approvalsConfig has an operator rule on up_wipe (first) and a caller
// rule on every destructive tool.
func approvalsConfig(upURL string, wait int) string {
	return fmt.Sprintf(`{"mcpServers": {"up": {"type": "http", "url": %q}},
	  "approvals": {"rules": [
	    {"name": "servers", "tool": "up_wipe", "approver": "operator", "wait_seconds": %d, "expires_seconds": 60},
	    {"name": "big-peeks", "tool": "up_peek", "condition": "args.path.startsWith('/big')", "approver": "caller"},
	    {"name": "destructive", "destructive": true, "approver": "caller"}
	  ]}}`, upURL, wait)
}

// approvalsMux runs a mux on cfg with an approvals store (bbolt, or the
// Redis client rc), its admin API mounted with token "admin-token".
func approvalsMux(t *testing.T, cfg string, rc *storeclient.Client) *mux {
	t.Helper()
	return approvalsMuxWith(t, cfg, nil, rc, proxy.Options{})
}

// approvalsMuxWith is approvalsMux with env and opts.
func approvalsMuxWith(t *testing.T, cfg string, env map[string]string, rc *storeclient.Client, opts proxy.Options) *mux {
	t.Helper()
	dir := t.TempDir()
	open := func() (approvals.Store, error) {
		if rc != nil {
			return approvals.NewRedisStore(approvals.RedisOptions{Client: rc, KeyPrefix: "mux:"}), nil
		}
		return approvals.OpenBoltStore(approvals.BoltOptions{Dir: dir})
	}
	opts.ApprovalStore = open
	m, _ := startMuxEnv(t, cfg, env, opts)
	routes := http.NewServeMux()
	api.MountAdmin(routes, api.AdminOptions{Path: "/nonexistent.json", Token: func() secret.Value { return "admin-token" }, Approvals: m.srv.Approvals()})
	routes.Handle("/", m.srv.Handler())
	m.ts = httptest.NewServer(routes) // the first one stays as startMuxEnv made it (and closes it)
	t.Cleanup(m.ts.Close)
	return m
}

// asker is a go-sdk client whose elicitation handler answers as told and
// records what it was asked.
type asker struct {
	mu      sync.Mutex
	approve bool
	asked   []string
}

func (a *asker) connect(t *testing.T, url, pv string, canAsk bool) *mcp.ClientSession {
	t.Helper()
	opts := &mcp.ClientOptions{}
	if canAsk {
		opts.ElicitationHandler = func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			a.mu.Lock()
			defer a.mu.Unlock()
			a.asked = append(a.asked, req.Params.Message)
			if req.Params.Mode == "url" {
				return nil, fmt.Errorf("unexpected URL elicitation")
			}
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"approve": a.approve}}, nil
		}
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "approver", Version: "1"}, opts)
	sopts := &mcp.ClientSessionOptions{}
	if pv != "" {
		sopts.ProtocolVersion = pv
	}
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: url + "/mcp", HTTPClient: testHTTP}, sopts)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

func (a *asker) questions() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.asked...)
}

func resultText(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

func callPath(t *testing.T, cs *mcp.ClientSession, name, path string) *mcp.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: map[string]any{"path": path}})
	if err != nil {
		t.Fatalf("call %s(%s): %v", name, path, err)
	}
	return res
}

// TestCallerApprovalGoSDK: a go-sdk client on each era is asked before a
// destructive call runs; yes runs it once, no never; a client that
// cannot be asked is refused; a read-only tool is not asked about.
func TestCallerApprovalGoSDK(t *testing.T) {
	l, upURL := newLedger(t)
	m := approvalsMux(t, approvalsConfig(upURL, 1), nil)
	for _, pv := range []string{"2025-11-25", ""} { // "": the go-sdk default, 2026-07-28
		era := pv
		if era == "" {
			era = "2026-07-28"
		}
		t.Run(era, func(t *testing.T) {
			a := &asker{approve: true}
			cs := a.connect(t, m.ts.URL, pv, true)
			path := "/tmp/" + era
			res := callPath(t, cs, "up_remove", path)
			if res.IsError || l.count("remove/"+path) != 1 {
				t.Fatalf("approved call: %s; upstream ran %d times", resultText(res), l.count("remove/"+path))
			}
			q := a.questions()
			if len(q) != 1 || !strings.Contains(q[0], `"up_remove"`) || !strings.Contains(q[0], `"up"`) || !strings.Contains(q[0], path) {
				t.Fatalf("questions %q: want one naming the tool, the server and the arguments", q)
			}
			a.approve = false
			res = callPath(t, cs, "up_remove", path+"-no")
			if !res.IsError || !strings.Contains(resultText(res), "was not approved") || l.count("remove/"+path+"-no") != 0 {
				t.Fatalf("declined call: %s; upstream ran %d times", resultText(res), l.count("remove/"+path+"-no"))
			}
			if res := callPath(t, cs, "up_peek", path); res.IsError || len(a.questions()) != 2 {
				t.Fatalf("read-only call: %s, asked %d times (want no question)", resultText(res), len(a.questions()))
			}
			a.approve = true
			if res := callPath(t, cs, "up_peek", "/big"+path); res.IsError || len(a.questions()) != 3 || !strings.Contains(a.questions()[2], `"big-peeks"`) {
				t.Fatalf("read-only call the condition matches: %s, asked %q (want the big-peeks rule's question)", resultText(res), a.questions())
			}
			mute := (&asker{}).connect(t, m.ts.URL, pv, false)
			res = callPath(t, mute, "up_remove", path+"-mute")
			if !res.IsError || !strings.Contains(resultText(res), "cannot be asked") || l.count("remove/"+path+"-mute") != 0 {
				t.Fatalf("client without elicitation: %s; upstream ran %d times", resultText(res), l.count("remove/"+path+"-mute"))
			}
		})
	}
}

// adminPost posts a decision to base's admin API.
func adminPost(t *testing.T, base, id, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, base+"/api/approvals/"+id, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer admin-token")
	resp, err := testHTTP.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	_, _ = b.ReadFrom(resp.Body)
	return resp.StatusCode, b.String()
}

// pendingIDs lists base's pending approvals.
func pendingIDs(t *testing.T, base string) []approvals.Record {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, base+"/api/approvals", nil)
	req.Header.Set("Authorization", "Bearer admin-token")
	resp, err := testHTTP.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Approvals []approvals.Record `json:"approvals"`
	}
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&body) != nil {
		t.Fatalf("GET /api/approvals: %d", resp.StatusCode)
	}
	return body.Approvals
}

// waitPending waits until base lists n pending approvals.
func waitPending(t *testing.T, base string, n int) []approvals.Record {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		recs := pendingIDs(t, base)
		if len(recs) == n {
			return recs
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d pending approvals, want %d", len(recs), n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestOperatorApprovalAcrossReplicas: two replicas share Redis; a call
// waits on A, the approval is posted to B, the call completes on A; the
// approval is used once; other arguments need their own; a denial and
// an expiry are tool errors; a replica gone while a call waits loses no
// record.
func TestOperatorApprovalAcrossReplicas(t *testing.T) {
	l, upURL := newLedger(t)
	rs := mcptest.StartRedis(t, false)
	rc := storeclient.Wrap(redis.NewClient(&redis.Options{Addr: rs.Addr}))
	t.Cleanup(func() { _ = rc.Close() })
	a := approvalsMux(t, approvalsConfig(upURL, 20), rc)
	b := approvalsMux(t, approvalsConfig(upURL, 20), rc)
	csA := (&asker{}).connect(t, a.ts.URL, "2025-11-25", false)

	// Waits on A, approved on B, completes on A.
	done := make(chan *mcp.CallToolResult, 1)
	go func() { done <- callPath(t, csA, "up_wipe", "/srv/a") }()
	recs := waitPending(t, b.ts.URL, 1)
	if r := recs[0]; r.Rule != "servers" || r.Tool != "up_wipe" || r.Server != "up" || !strings.Contains(r.Preview, "/srv/a") {
		t.Fatalf("pending record %+v", r)
	}
	if code, body := adminPost(t, b.ts.URL, recs[0].ID, `{"decision": "approve", "by": "oncall"}`); code != http.StatusOK {
		t.Fatalf("approve on B: %d %s", code, body)
	}
	if res := <-done; res.IsError || l.count("wipe//srv/a") != 1 {
		t.Fatalf("approved call on A: %s; ran %d", resultText(res), l.count("wipe//srv/a"))
	}
	// Replaying the decision, or forging an id: refused.
	if code, _ := adminPost(t, b.ts.URL, recs[0].ID, `{"decision": "approve"}`); code != http.StatusConflict {
		t.Fatalf("second decision: %d, want 409", code)
	}
	if code, _ := adminPost(t, b.ts.URL, "appr-00112233445566778899aabbccddeeff", `{"decision": "approve"}`); code != http.StatusNotFound {
		t.Fatalf("forged id: %d, want 404", code)
	}

	// Single use: the identical call needs a new approval (its wait is
	// cut short by its context).
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	_, err := csA.CallTool(ctx, &mcp.CallToolParams{Name: "up_wipe", Arguments: map[string]any{"path": "/srv/a"}})
	cancel()
	if err == nil || l.count("wipe//srv/a") != 1 {
		t.Fatalf("identical call after use: err %v, ran %d (want a new approval, no run)", err, l.count("wipe//srv/a"))
	}
	second := waitPending(t, b.ts.URL, 1)
	if second[0].ID == recs[0].ID {
		t.Fatal("the used approval is pending again")
	}
	// Two identical calls wait for that request, one on each replica; it
	// is approved: exactly one of them runs.
	var wg sync.WaitGroup
	var ran, refused atomic.Int32
	for _, m := range []*mux{a, b} {
		cs := (&asker{}).connect(t, m.ts.URL, "2025-11-25", false)
		wg.Go(func() {
			res := callPath(t, cs, "up_wipe", "/srv/a")
			if res.IsError && strings.Contains(resultText(res), "used already") {
				refused.Add(1)
			} else if !res.IsError {
				ran.Add(1)
			} else {
				t.Errorf("racing call: %s", resultText(res))
			}
		})
	}
	time.Sleep(300 * time.Millisecond) // both wait (the request is the same: still one pending)
	if got := waitPending(t, a.ts.URL, 1); got[0].ID != second[0].ID {
		t.Fatalf("identical waiting calls made another request: %s", got[0].ID)
	}
	if code, body := adminPost(t, a.ts.URL, second[0].ID, `{"decision": "approve"}`); code != http.StatusOK {
		t.Fatalf("approve: %d %s", code, body)
	}
	wg.Wait()
	if ran.Load() != 1 || refused.Load() != 1 || l.count("wipe//srv/a") != 2 {
		t.Fatalf("racing calls: %d ran, %d refused as used, upstream ran %d in all (want 1, 1, 2)", ran.Load(), refused.Load(), l.count("wipe//srv/a"))
	}

	// A denial is a tool error naming the reason; nothing runs.
	go func() { done <- callPath(t, csA, "up_wipe", "/srv/b") }()
	recs = waitPending(t, a.ts.URL, 1)
	if code, _ := adminPost(t, b.ts.URL, recs[0].ID, `{"decision": "deny", "reason": "not today"}`); code != http.StatusOK {
		t.Fatal("deny")
	}
	if res := <-done; !res.IsError || !strings.Contains(resultText(res), "not today") || l.count("wipe//srv/b") != 0 {
		t.Fatalf("denied call: %s, ran %d", resultText(res), l.count("wipe//srv/b"))
	}

	// A replica closed while its call waits: the record stays, the
	// approval lets the identical retry run on the other replica.
	gone := approvalsMux(t, approvalsConfig(upURL, 20), rc)
	csGone := (&asker{}).connect(t, gone.ts.URL, "2025-11-25", false)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		_, _ = csGone.CallTool(ctx, &mcp.CallToolParams{Name: "up_wipe", Arguments: map[string]any{"path": "/srv/c"}})
	}()
	recs = waitPending(t, b.ts.URL, 1)
	closeCtx, closeCancel := context.WithTimeout(context.Background(), 2*time.Second)
	_ = gone.srv.Close(closeCtx)
	closeCancel()
	gone.ts.CloseClientConnections()
	if got := waitPending(t, b.ts.URL, 1); got[0].ID != recs[0].ID {
		t.Fatal("the record changed when its replica went away")
	}
	if code, _ := adminPost(t, b.ts.URL, recs[0].ID, `{"decision": "approve"}`); code != http.StatusOK {
		t.Fatal("approve after the replica went")
	}
	if res := callPath(t, csA, "up_wipe", "/srv/c"); res.IsError || l.count("wipe//srv/c") != 1 {
		t.Fatalf("retry on another replica: %s, ran %d", resultText(res), l.count("wipe//srv/c"))
	}
}

// TestOperatorApprovalPendingAndExpiry: past wait_seconds the caller is
// told the approval id and that the identical retry runs once approved;
// an approval that expires runs nothing.
func TestOperatorApprovalPendingAndExpiry(t *testing.T) {
	l, upURL := newLedger(t)
	m := approvalsMux(t, strings.Replace(approvalsConfig(upURL, 1), `"expires_seconds": 60`, `"expires_seconds": 3`, 1), nil)
	cs := (&asker{}).connect(t, m.ts.URL, "", false)
	res := callPath(t, cs, "up_wipe", "/srv/x")
	recs := pendingIDs(t, m.ts.URL)
	if !res.IsError || len(recs) != 1 || !strings.Contains(resultText(res), recs[0].ID) || !strings.Contains(resultText(res), "call it again with the same arguments") {
		t.Fatalf("unapproved call: %s (pending %+v)", resultText(res), recs)
	}
	if code, _ := adminPost(t, m.ts.URL, recs[0].ID, `{"decision": "approve"}`); code != http.StatusOK {
		t.Fatal("approve")
	}
	if res := callPath(t, cs, "up_wipe", "/srv/other"); !res.IsError || l.count("wipe//srv/other") != 0 {
		t.Fatalf("other arguments ran under the approval: %s", resultText(res))
	}
	if res := callPath(t, cs, "up_wipe", "/srv/x"); res.IsError || l.count("wipe//srv/x") != 1 {
		t.Fatalf("approved retry: %s, ran %d", resultText(res), l.count("wipe//srv/x"))
	}
	// /srv/other is pending now; approved, then left to expire.
	recs = pendingIDs(t, m.ts.URL)
	if len(recs) != 1 {
		t.Fatalf("pending %+v", recs)
	}
	if code, _ := adminPost(t, m.ts.URL, recs[0].ID, `{"decision": "approve"}`); code != http.StatusOK {
		t.Fatal("approve")
	}
	time.Sleep(time.Until(recs[0].Expires) + 100*time.Millisecond)
	if res := callPath(t, cs, "up_wipe", "/srv/other"); !res.IsError || l.count("wipe//srv/other") != 0 {
		t.Fatalf("expired approval ran: %s", resultText(res))
	}
}
