package proxy_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/internal/audit"
	"github.com/mcp-mux/mcp-mux/internal/config"
	"github.com/mcp-mux/mcp-mux/internal/mcptest"
	"github.com/mcp-mux/mcp-mux/internal/proxy"
)

// bankUpstream serves, in both eras, a "transfer" tool that counts the
// calls it runs and says which account it debited, a "brief" prompt and
// two resources.
type bankUpstream struct {
	url  string
	runs atomic.Int32
	mu   sync.Mutex
	seen []string // the arguments of each call it ran
}

func newBankUpstream(t *testing.T) *bankUpstream {
	t.Helper()
	b := &bankUpstream{}
	s := mcp.NewServer(&mcp.Implementation{Name: "bank", Version: "test"}, nil)
	s.AddTool(&mcp.Tool{Name: "transfer", InputSchema: map[string]any{"type": "object"}},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			b.runs.Add(1)
			b.mu.Lock()
			b.seen = append(b.seen, string(req.Params.Arguments))
			b.mu.Unlock()
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "sent"}}}, nil
		})
	s.AddPrompt(&mcp.Prompt{Name: "brief", Arguments: []*mcp.PromptArgument{{Name: "topic"}}}, func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		b.runs.Add(1)
		return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: "brief"}}}}, nil
	})
	for _, uri := range []string{"test://secret/plans", "test://public/menu"} {
		s.AddResource(&mcp.Resource{URI: uri, Name: uri}, func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			b.runs.Add(1)
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, Text: "doc"}}}, nil
		})
	}
	b.url = mcptest.ServeHTTPBothEras(t, s).URL + "/mcp"
	return b
}

// policyConfig is a config of the bank server, its transfer tool's
// account fixed to "ops", with the policy block policy.
func (b *bankUpstream) policyConfig(policy string) string {
	cfg := fmt.Sprintf(`{"mcpServers": {"bank": {"type": "http", "url": %q, "tools": {"transfer": {"fixed_arguments": {"account": "ops"}}}}}`, b.url)
	if policy != "" {
		cfg += `, "policy": ` + policy
	}
	return cfg + "}"
}

func mustParse(t *testing.T, cfgJSON string) *config.Config {
	t.Helper()
	cfg, err := config.Parse([]byte(cfgJSON), config.LoadOptions{Filename: "test.json", LookupEnv: func(string) (string, bool) { return "", false }})
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// toolResult calls name and returns its text and whether it is a tool
// error.
func toolResult(t *testing.T, cs *mcp.ClientSession, name string, args any) (string, bool) {
	t.Helper()
	text, res := callText(t, cs, name, args)
	return text, res.IsError
}

const bankPolicy = `{"rules": [
	{"name": "no-big-transfers", "tool": "bank_transfer", "condition": "args.amount > 1000", "effect": "deny"},
	{"name": "ops-account-cap", "server": "bank", "tool": "bank_*", "condition": "args.account == 'ops' && args.amount > 500", "effect": "deny"},
	{"name": "no-payroll-brief", "methods": ["prompts/get"], "condition": "args.topic == 'payroll'", "effect": "deny"},
	{"name": "no-secret-docs", "methods": ["resources/read"], "condition": "tool.startsWith('test://secret/')", "effect": "deny"}]}`

// TestPolicyRulesEndToEnd: through the mux, with a go-sdk client on
// 2025-11-25 and raw 2026-07-28 requests, a rule's denial is a tool error
// naming the rule (never the value) and the upstream never runs (counted
// by the upstream); conditions see the fixed arguments, not the caller's
// attempt to set them; prompts and resources a rule names are refused
// with -32030; decisions are counted in /metrics; a reload changes the
// rules, and one without a policy block allows everything.
func TestPolicyRulesEndToEnd(t *testing.T) {
	bank := newBankUpstream(t)
	m := startMux(t, bank.policyConfig(bankPolicy), proxy.Options{})
	cs := connect(t, m.ts.URL, nil)

	if text, isErr := toolResult(t, cs, "bank_transfer", map[string]any{"amount": 10}); isErr || text != "sent" || bank.runs.Load() != 1 {
		t.Fatalf("a small transfer: %q (error %v), runs %d", text, isErr, bank.runs.Load())
	}
	for _, tc := range []struct {
		args map[string]any
		rule string
	}{
		{map[string]any{"amount": 98765}, "no-big-transfers"},
		{map[string]any{"amount": 600}, "ops-account-cap"},
		{map[string]any{"amount": 600, "account": "personal"}, "ops-account-cap"}, // the fixed account counts
		{map[string]any{"amount": 600, "ACCOUNT": "personal"}, "ops-account-cap"},
	} {
		text, isErr := toolResult(t, cs, "bank_transfer", tc.args)
		if !isErr || !strings.Contains(text, `denied by policy rule "`+tc.rule+`"`) || strings.Contains(text, "98765") || strings.Contains(text, "personal") {
			t.Fatalf("%v: %q (error %v), want a denial naming %s and no value", tc.args, text, isErr, tc.rule)
		}
	}
	if n := bank.runs.Load(); n != 1 {
		t.Fatalf("the upstream ran %d times; denied calls must not run", n)
	}
	bank.mu.Lock()
	if len(bank.seen) != 1 || !strings.Contains(bank.seen[0], `"account":"ops"`) {
		t.Fatalf("the upstream saw %q", bank.seen)
	}
	bank.mu.Unlock()

	// The 2026-07-28 fast path goes through the same stage.
	_, _, body := postModern(t, m.ts.URL+"/mcp", modernHeaders("tools/call", "bank_transfer"), modernCallBody("{}", "bank_transfer", `{"amount": 98765}`))
	if r := reply(t, body); r.Error != nil || !strings.Contains(string(r.Result), `no-big-transfers`) || !strings.Contains(string(r.Result), `"isError":true`) {
		t.Fatalf("2026-07-28: %s", body)
	}

	ctx := context.Background()
	_, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "bank_brief", Arguments: map[string]string{"topic": "payroll"}})
	if je, ok := errors.AsType[*jsonrpc.Error](err); !ok || je.Code != -32030 || !strings.Contains(je.Message, "no-payroll-brief") {
		t.Fatalf("a denied prompt: %v", err)
	}
	if _, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "bank_brief", Arguments: map[string]string{"topic": "cats"}}); err != nil {
		t.Fatalf("an allowed prompt: %v", err)
	}
	_, err = cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "test://secret/plans"})
	if je, ok := errors.AsType[*jsonrpc.Error](err); !ok || je.Code != -32030 || !strings.Contains(je.Message, "no-secret-docs") {
		t.Fatalf("a denied resource: %v", err)
	}
	if _, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "test://public/menu"}); err != nil {
		t.Fatalf("an allowed resource: %v", err)
	}
	if n := bank.runs.Load(); n != 3 {
		t.Fatalf("the upstream ran %d times, want 3 (one call, one prompt, one resource)", n)
	}
	metrics := scrape(t, m.ts.URL)
	for _, want := range []string{`mcp_mux_policy_decisions_total{effect="deny",rule="no-big-transfers"} 2`,
		`mcp_mux_policy_decisions_total{effect="deny",rule="ops-account-cap"} 3`, `mcp_mux_policy_decisions_total{effect="allow",rule="(none)"} 3`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}

	// A reload tightens the rule: the same small transfer is denied.
	if err := m.srv.Apply(mustParse(t, bank.policyConfig(strings.Replace(bankPolicy, "args.amount > 1000", "args.amount > 5", 1)))); err != nil {
		t.Fatal(err)
	}
	if text, isErr := toolResult(t, cs, "bank_transfer", map[string]any{"amount": 10}); !isErr || !strings.Contains(text, "no-big-transfers") {
		t.Fatalf("after the reload: %q (error %v)", text, isErr)
	}
	// One without a policy block allows what was denied.
	if err := m.srv.Apply(mustParse(t, bank.policyConfig(""))); err != nil {
		t.Fatal(err)
	}
	if text, isErr := toolResult(t, cs, "bank_transfer", map[string]any{"amount": 98765}); isErr || text != "sent" || bank.runs.Load() != 4 {
		t.Fatalf("without a policy: %q (error %v), runs %d", text, isErr, bank.runs.Load())
	}
}

// TestPolicyCostLimitEndToEnd: a rule whose condition runs into the cost
// limit on what a caller sent denies the call (fail closed), naming the
// rule, and the upstream never runs.
func TestPolicyCostLimitEndToEnd(t *testing.T) {
	bank := newBankUpstream(t)
	m := startMux(t, bank.policyConfig(`{"rules": [{"name": "quadratic", "condition": "args.xs.all(a, args.xs.all(b, a <= b || a > b))", "effect": "allow"}]}`), proxy.Options{})
	cs := connect(t, m.ts.URL, nil)
	if text, isErr := toolResult(t, cs, "bank_transfer", map[string]any{"xs": []int{1, 2, 3}}); isErr || text != "sent" {
		t.Fatalf("a small list: %q", text)
	}
	start := time.Now()
	text, isErr := toolResult(t, cs, "bank_transfer", map[string]any{"xs": make([]int, 4000)})
	if !isErr || !strings.Contains(text, `policy rule "quadratic" could not be evaluated`) || bank.runs.Load() != 1 {
		t.Fatalf("a big list: %q (error %v), runs %d", text, isErr, bank.runs.Load())
	}
	t.Logf("denied after %v", time.Since(start))
	if !strings.Contains(m.logs.String(), "CEL cost limit exceeded") {
		t.Fatalf("the log does not say why:\n%s", m.logs.String())
	}
}

// TestAuthZENEndToEnd: the external decision point decides through the
// mux: it gets the authenticated user, the tool and the redacted
// arguments; its denial stops the call before the upstream; slow or
// failing, the call is denied (fail closed) unless on_error allows; the
// audit record has the decision.
func TestAuthZENEndToEnd(t *testing.T) {
	bank := newBankUpstream(t)
	var mu sync.Mutex
	var got []map[string]any
	var slow atomic.Bool
	release := make(chan struct{})
	defer close(release)
	pdp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req map[string]any
		_ = json.NewDecoder(r.Body).Decode(&req)
		mu.Lock()
		got = append(got, req)
		mu.Unlock()
		if slow.Load() {
			select {
			case <-release:
			case <-r.Context().Done():
			}
			return
		}
		args, _ := req["context"].(map[string]any)["arguments"].(map[string]any)
		amount, _ := args["amount"].(float64)
		fmt.Fprintf(w, `{"decision": %v}`, amount <= 100)
	}))
	defer pdp.Close()
	const key = "api-key-authzen-0123456789"
	cfgOf := func(onError string) string {
		return fmt.Sprintf(`{"mcpServers": {"bank": {"type": "http", "url": %q}},
			"inbound": {"auth": {"mode": "api_keys", "keys": {"alice": %q}}},
			"policy": {"rules": [{"name": "cap", "condition": "args.amount > 1000", "effect": "deny"}],
			  "authzen": {"url": %q, "timeout_ms": 100, "on_error": %q}}}`, bank.url, key, pdp.URL+"/access/v1/evaluation", onError)
	}
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	a, err := audit.New(audit.Options{Enabled: true, Output: path, UserID: "plain"})
	if err != nil {
		t.Fatal(err)
	}
	m := startMux(t, cfgOf("deny"), proxy.Options{Audit: a})
	c := mcp.NewClient(&mcp.Implementation{Name: "authzen", Version: "1"}, nil)
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: m.ts.URL + "/mcp",
		HTTPClient: &http.Client{Transport: headerRT{"Authorization": "Bearer " + key}}}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()

	if text, isErr := toolResult(t, cs, "bank_transfer", map[string]any{"amount": 50, "token": "tok-secret-77"}); isErr || text != "sent" {
		t.Fatalf("allowed: %q", text)
	}
	if text, isErr := toolResult(t, cs, "bank_transfer", map[string]any{"amount": 500}); !isErr || !strings.Contains(text, "denied by the policy decision point") {
		t.Fatalf("denied by the PDP: %q", text)
	}
	if text, _ := toolResult(t, cs, "bank_transfer", map[string]any{"amount": 5000}); !strings.Contains(text, `policy rule "cap"`) {
		t.Fatalf("denied by the rule: %q", text)
	}
	mu.Lock()
	asked := len(got)
	first, _ := json.Marshal(got[0])
	mu.Unlock()
	if asked != 2 {
		t.Fatalf("the PDP was asked %d times, want 2 (not after the rule denied)", asked)
	}
	for _, want := range []string{`"subject":{"id":"alice"`, `"action":{"name":"tools/call"}`, `"id":"bank/bank_transfer"`, `"token":"[REDACTED]"`} {
		if !strings.Contains(string(first), want) || strings.Contains(string(first), "tok-secret-77") {
			t.Fatalf("the PDP got %s; want %s and no secret", first, want)
		}
	}
	slow.Store(true)
	if text, isErr := toolResult(t, cs, "bank_transfer", map[string]any{"amount": 1}); !isErr || !strings.Contains(text, "could not decide") {
		t.Fatalf("a slow PDP: %q, want a denial", text)
	}
	if n := bank.runs.Load(); n != 1 {
		t.Fatalf("the upstream ran %d times, want 1", n)
	}
	if err := m.srv.Apply(mustParse(t, cfgOf("allow"))); err != nil {
		t.Fatal(err)
	}
	if text, isErr := toolResult(t, cs, "bank_transfer", map[string]any{"amount": 1}); isErr || text != "sent" {
		t.Fatalf("a slow PDP with on_error allow: %q", text)
	}
	recs, _ := auditRecords(t, a, path)
	var outcomes []string
	for _, r := range recs {
		outcomes = append(outcomes, r.PolicyEffect+"/"+r.PolicyRule+"/"+r.AuthZEN+"/"+r.Outcome)
	}
	want := "allow//allow/ok allow//deny/denied deny/cap//denied allow//error/denied allow//error/ok"
	if strings.Join(outcomes, " ") != want {
		t.Fatalf("audit records %q\nwant %q", strings.Join(outcomes, " "), want)
	}
}

// TestPolicyChecksTaskSubmit: a durable task's submit is checked when it
// is submitted: denied, no task is created and the server's submit tool
// never runs; allowed, the task is submitted.
func TestPolicyChecksTaskSubmit(t *testing.T) {
	up := &mcptest.TaskServer{PollsToComplete: 1 << 30}
	upTS := mcptest.ServeHTTP(t, up.MCP())
	_, ts := taskMux(t, `{"mcpServers": {"jobs": `+mcptest.TaskServerJSON(upTS.URL+"/mcp", "")+`}, "mcp_tasks": {"enabled": true},
		"policy": {"rules": [{"name": "no-prod-jobs", "tool": "jobs_submit_*", "condition": "args.input.startsWith('prod-')", "effect": "deny"}]}}`, boltStore(t))
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "c", Version: "1"}, nil).Connect(context.Background(),
		&mcp.StreamableClientTransport{Endpoint: ts.URL + "/mcp", HTTPClient: testHTTP}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	text, isErr := toolResult(t, cs, "jobs_submit_job", map[string]any{"input": "prod-drop-tables"})
	if !isErr || !strings.Contains(text, `denied by policy rule "no-prod-jobs"`) || up.Submits() != 0 {
		t.Fatalf("a denied submit: %q (error %v), %d submits", text, isErr, up.Submits())
	}
	if tasks, _ := toolResult(t, cs, "list_background_tasks", map[string]any{}); strings.Contains(tasks, "prod-") {
		t.Fatalf("a denied submit left a task: %s", tasks)
	}
	if text, isErr := toolResult(t, cs, "jobs_submit_job", map[string]any{"input": "staging-report"}); isErr || up.Submits() != 1 {
		t.Fatalf("an allowed submit: %q (error %v), %d submits", text, isErr, up.Submits())
	}
}
