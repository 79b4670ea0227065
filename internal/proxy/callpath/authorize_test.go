package callpath

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/mcp-mux/mcp-mux/internal/audit"
	"github.com/mcp-mux/mcp-mux/internal/config"
	"github.com/mcp-mux/mcp-mux/internal/secret"
	"github.com/mcp-mux/mcp-mux/internal/upstream"
	"github.com/mcp-mux/mcp-mux/internal/wire"
)

// policyRuntime is a runtime whose config has policy p, built.
func policyRuntime(t *testing.T, p config.Policy, m *PolicyMetrics) *Runtime {
	t.Helper()
	rt := NewRuntime(&config.Config{Policy: p})
	var err error
	if rt.Authz, err = NewAuthz(rt.Config, nil, m); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if rt.Authz.AuthZEN != nil {
			rt.Authz.AuthZEN.Close()
		}
	})
	return rt
}

// policyCall is testCall on rt with the arguments as the arguments stage
// leaves them, at a server with an (unstarted) upstream.
func policyCall(t *testing.T, rt *Runtime, args string) *Call {
	t.Helper()
	up, err := upstream.New(upstream.Options{Name: "s", Transport: upstream.HTTP, URL: "http://127.0.0.1:1/mcp", Logger: hclog.NewNullLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = up.Close() })
	c := testCall()
	c.Backend.Up = up
	c.Runtime, c.Args, c.Applied = rt, json.RawMessage(args), json.RawMessage(args)
	c.Record = (&audit.Auditor{}).Start(audit.ToolCall)
	return c
}

// spanAttrs runs f under a recording span and returns the attributes it
// set.
func spanAttrs(t *testing.T, f func(ctx context.Context)) map[attribute.Key]attribute.Value {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	ctx, span := tp.Tracer("t").Start(t.Context(), "call")
	f(ctx)
	span.End()
	out := map[attribute.Key]attribute.Value{}
	for _, kv := range rec.Ended()[0].Attributes() {
		out[kv.Key] = kv.Value
	}
	return out
}

// TestAuthorizeStage: a rule's denial is a tool error naming the rule and
// never the argument's value, and the call goes no further; an allowed
// call goes on however it ends; the decision is on the span, the record
// and the metric; a prompts/get a rule names is refused with
// CodePolicyDenied; a condition that cannot be evaluated denies.
func TestAuthorizeStage(t *testing.T) {
	s := testRouter(t, Options{})
	m := NewPolicyMetrics()
	rt := policyRuntime(t, config.Policy{Rules: []config.PolicyRule{
		{Name: "no-big-transfers", Server: "s", Tool: "s_*", Condition: `args.amount > 1000`, Effect: config.PolicyDeny},
		{Name: "strict", Tool: "s_t", Condition: `args.limit > 0`, Effect: config.PolicyAllow}, // fails without limit
		{Name: "secret-topics", Methods: []string{"prompts/get"}, Condition: `args.topic == "payroll"`, Effect: config.PolicyDeny},
	}}, m)
	stage := authorizeStage(s)
	forwarded := 0
	next := func(context.Context, *Call) (json.RawMessage, error) {
		forwarded++
		return json.RawMessage(`{"content":[]}`), nil
	}

	c := policyCall(t, rt, `{"amount": 987654, "limit": 1}`)
	var raw json.RawMessage
	var err error
	attrs := spanAttrs(t, func(ctx context.Context) { raw, err = stage.Wrap(next)(ctx, c) })
	if err != nil || !wire.IsToolError(raw) || !strings.Contains(string(raw), `denied by policy rule \"no-big-transfers\"`) || strings.Contains(string(raw), "987654") || forwarded != 0 {
		t.Fatalf("a big transfer: %s, %v, forwarded %d", raw, err, forwarded)
	}
	if c.Record.Denial != `policy: rule "no-big-transfers"` || c.Record.PolicyRule != "no-big-transfers" || c.Record.PolicyEffect != "deny" {
		t.Fatalf("record %+v", c.Record.Record)
	}
	if attrs["mcp_mux.policy.rule"].AsString() != "no-big-transfers" || attrs["mcp_mux.policy.effect"].AsString() != "deny" {
		t.Fatalf("span attributes %v", attrs)
	}
	if n := testutil.ToFloat64(m.decisions.WithLabelValues("no-big-transfers", "deny")); n != 1 {
		t.Fatalf("deny counted %v times", n)
	}

	for _, e := range endings {
		c := policyCall(t, rt, `{"amount": 5, "limit": 1}`)
		raw, err := runEnding(t, stage, e, c)
		if e.name == "success" && (err != nil || wire.IsToolError(raw)) || e.name != "success" && err == nil {
			t.Fatalf("%s: an allowed call: %s, %v", e.name, raw, err)
		}
		if c.Record.PolicyRule != "strict" || c.Record.PolicyEffect != "allow" {
			t.Fatalf("%s: record %+v", e.name, c.Record.Record)
		}
	}
	c = policyCall(t, rt, `{"amount": 5}`)
	if raw, err := stage.Wrap(next)(t.Context(), c); err != nil || !strings.Contains(string(raw), `policy rule \"strict\" could not be evaluated`) {
		t.Fatalf("a condition that fails: %s, %v", raw, err)
	}

	p := testCall()
	p.Runtime, p.Method, p.Name, p.Params = rt, "prompts/get", "brief", &mcp.GetPromptParams{Name: "brief", Arguments: map[string]string{"topic": "payroll"}}
	_, err = stage.Wrap(next)(t.Context(), p)
	var rf refusal
	if !errors.As(err, &rf) || rf.err.Code != CodePolicyDenied || !strings.Contains(rf.err.Message, "secret-topics") || string(rf.err.Data) != `{"rule":"secret-topics"}` {
		t.Fatalf("a denied prompt: %v", err)
	}
	p.Params = &mcp.GetPromptParams{Name: "brief", Arguments: map[string]string{"topic": "cats"}}
	before := forwarded
	if _, err := stage.Wrap(next)(t.Context(), p); err != nil || forwarded != before+1 {
		t.Fatalf("an allowed prompt: %v", err)
	}
	// No rule names resources/read: not decided, not counted.
	r := testCall()
	r.Runtime, r.Method, r.Name = rt, "resources/read", "file:///etc/passwd"
	if _, err := stage.Wrap(next)(t.Context(), r); err != nil || r.Record.PolicyEffect != "" {
		t.Fatalf("a resource no rule names: %v, %+v", err, r.Record.Record)
	}
}

// TestAuthorizeAuthZEN: the external decision point is asked after the
// rules (not when a rule denied), with the caller, the method, the tool
// and the redacted arguments; its denial, its failure (fail closed) and
// its allowance are obeyed, and its decision and latency are on the span.
func TestAuthorizeAuthZEN(t *testing.T) {
	var asked atomic.Int32
	var last atomic.Value
	answer := atomic.Value{}
	answer.Store(`{"decision": true}`)
	pdp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		b, _ := io.ReadAll(r.Body)
		last.Store(string(b))
		a := answer.Load().(string)
		if a == "500" {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		_, _ = io.WriteString(w, a)
	}))
	defer pdp.Close()
	rt := policyRuntime(t, config.Policy{
		Rules:   []config.PolicyRule{{Name: "no-big", Condition: `args.amount > 1000`, Effect: config.PolicyDeny}},
		AuthZEN: &config.AuthZEN{URL: secret.Value(pdp.URL + "/access/v1/evaluation"), Timeout: 2 * time.Second},
	}, nil)
	s := testRouter(t, Options{})
	stage := authorizeStage(s)
	forwarded := 0
	next := func(context.Context, *Call) (json.RawMessage, error) {
		forwarded++
		return json.RawMessage(`{"content":[]}`), nil
	}

	c := policyCall(t, rt, `{"amount": 5, "password": "hunter2-secret", "note": "carried-secret-0042"}`)
	c.Caller.Secrets = map[string]string{"k": "carried-secret-0042"}
	attrs := spanAttrs(t, func(ctx context.Context) {
		if _, err := stage.Wrap(next)(ctx, c); err != nil || forwarded != 1 {
			t.Fatalf("allowed by both: %v, forwarded %d", err, forwarded)
		}
	})
	if attrs["mcp_mux.authzen.decision"].AsString() != "allow" || attrs["mcp_mux.authzen.duration"].AsFloat64() <= 0 || c.Record.AuthZEN != "allow" {
		t.Fatalf("span %v, record %+v", attrs, c.Record.Record)
	}
	var req map[string]any
	_ = json.Unmarshal([]byte(last.Load().(string)), &req)
	got, _ := json.Marshal(map[string]any{"s": req["subject"], "a": req["action"], "r": req["resource"], "c": req["context"]})
	want := `{"a":{"name":"tools/call"},"c":{"arguments":{"amount":5,"note":"[REDACTED]","password":"[REDACTED]"}},` +
		`"r":{"id":"s/s_t","properties":{"annotations":{"destructiveHint":true,"idempotentHint":false,"openWorldHint":true,"readOnlyHint":false,"title":""},"name":"s_t","raw_name":"t","server":"s"},"type":"mcp_tool"},` +
		`"s":{"id":"alice","properties":{"profile":""},"type":"user"}}`
	if string(got) != want {
		t.Fatalf("the endpoint got %s\nwant %s", got, want)
	}

	// A rule's denial wins: the endpoint is not asked.
	n := asked.Load()
	if raw, _ := stage.Wrap(next)(t.Context(), policyCall(t, rt, `{"amount": 5000}`)); !strings.Contains(string(raw), "no-big") || asked.Load() != n {
		t.Fatalf("a rule's denial: %s, asked %d more", raw, asked.Load()-n)
	}
	for _, tc := range []struct{ answer, want, outcome string }{
		{`{"decision": false}`, "denied by the policy decision point", "deny"},
		{"500", "the policy decision point could not decide", "error"},
	} {
		answer.Store(tc.answer)
		c := policyCall(t, rt, `{"amount": 5}`)
		raw, err := stage.Wrap(next)(t.Context(), c)
		if err != nil || !wire.IsToolError(raw) || !strings.Contains(string(raw), tc.want) || forwarded != 1 || c.Record.AuthZEN != tc.outcome {
			t.Fatalf("%s: %s, %v, forwarded %d, record %+v", tc.answer, raw, err, forwarded, c.Record.Record)
		}
	}
	// A resources/read AuthZEN is not configured for is not asked.
	r := testCall()
	r.Runtime, r.Method, r.Name = rt, "resources/read", "file:///x"
	n = asked.Load()
	if _, err := stage.Wrap(next)(t.Context(), r); err != nil || asked.Load() != n {
		t.Fatalf("resources/read: %v", err)
	}
	// A prompts/get it is configured for is refused with the JSON-RPC error.
	rt2 := policyRuntime(t, config.Policy{AuthZEN: &config.AuthZEN{URL: secret.Value(pdp.URL), Timeout: time.Second, Methods: []string{"prompts/get"}}}, nil)
	p := testCall()
	p.Runtime, p.Method, p.Name, p.Raw, p.Params = rt2, "prompts/get", "brief", "brief", &mcp.GetPromptParams{Name: "brief"}
	answer.Store(`{"decision": false}`)
	_, err := stage.Wrap(next)(t.Context(), p)
	var je refusal
	if !errors.As(err, &je) || je.err.Code != CodePolicyDenied || string(je.err.Data) != `{"rule":"(authzen)"}` {
		t.Fatalf("a denied prompt: %v", err)
	}
	if !strings.Contains(last.Load().(string), `"type":"mcp_prompt"`) {
		t.Fatalf("prompt request %s", last.Load())
	}
}
