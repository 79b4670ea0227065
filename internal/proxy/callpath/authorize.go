package callpath

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcp-mux/mcp-mux/internal/authzen"
	"github.com/mcp-mux/mcp-mux/internal/bounds"
	"github.com/mcp-mux/mcp-mux/internal/catalog"
	"github.com/mcp-mux/mcp-mux/internal/config"
	"github.com/mcp-mux/mcp-mux/internal/policy"
	"github.com/mcp-mux/mcp-mux/internal/reqid"
	"github.com/mcp-mux/mcp-mux/internal/secret"
	"github.com/mcp-mux/mcp-mux/internal/wire"
)

// authorizeStage decides whether a call may run on what it asks, before
// anything is forwarded: policy.rules (package policy: CEL conditions
// over the caller, server, tool, the arguments with fixed ones set, and
// the tool's annotations; the first matching rule decides), then
// policy.authzen (package authzen: the external decision point, asked
// unless a rule denied). Both must allow. It runs after the arguments
// stage, so that conditions see the arguments the upstream would get, and
// before the tasks stage, so that a durable task's submit is checked. A
// denial names the rule (never an argument's value): a tool error for
// tools/call, the JSON-RPC error CodePolicyDenied otherwise. The decision
// goes on the span, the audit record and mcp_mux_policy_decisions_total.
// Left out of a runtime with neither.
func authorizeStage(s *Router) Stage {
	return Stage{
		Name:    "authorize",
		Methods: ToolCall | PromptGet | ResourceRead,
		Needed:  func(rt *Runtime) bool { return rt.Authz != nil },
		Wrap: func(next CallFunc) CallFunc {
			return func(ctx context.Context, c *Call) (json.RawMessage, error) {
				a := c.Runtime.Authz
				if a == nil || !a.covers(c.Method) {
					return next(ctx, c)
				}
				if res, denied, err := s.authorize(ctx, c, a); denied {
					return res, err
				}
				return next(ctx, c)
			}
		},
	}
}

// CodePolicyDenied is the JSON-RPC error code of a prompts/get or
// resources/read the policy denies (a tools/call gets a tool error
// result); its data names the rule, or "(authzen)".
const CodePolicyDenied = -32030

// maxAuthZENArgs bounds the redacted arguments an AuthZEN request
// carries; larger ones are left out (context.arguments_omitted).
const maxAuthZENArgs = 64 << 10

// Authz is a runtime's policy block, built: its rules compiled and its
// AuthZEN client. Nil when the config has neither.
type Authz struct {
	Rules   *policy.Rules
	AuthZEN *authzen.Client
	asks    policy.Methods // the methods AuthZEN is asked about
	metrics *PolicyMetrics
}

// NewAuthz builds cfg's policy block; nil when it has no rules and no
// AuthZEN endpoint. The running runtime's AuthZEN client (old, may be
// nil) is kept when its settings are unchanged, with its connections and
// its breaker.
func NewAuthz(cfg *config.Config, old *Authz, m *PolicyMetrics) (*Authz, error) {
	p := cfg.Policy
	if len(p.Rules) == 0 && p.AuthZEN == nil {
		return nil, nil
	}
	rules := make([]policy.Rule, len(p.Rules))
	for i, r := range p.Rules {
		rules[i] = policy.Rule{Name: r.Name, Tool: r.Tool, Server: r.Server, Methods: r.Methods, Condition: r.Condition, Deny: r.Effect == config.PolicyDeny}
	}
	rs, err := policy.NewRules(rules)
	if err != nil {
		return nil, err
	}
	if m == nil {
		m = NewPolicyMetrics()
	}
	a := &Authz{Rules: rs, metrics: m}
	if z := p.AuthZEN; z != nil {
		if a.asks, err = policy.MethodsOf(z.Methods); err != nil {
			return nil, fmt.Errorf("policy.authzen.methods: %w", err)
		}
		o := authzen.Options{URL: z.URL.Reveal(), Timeout: z.Timeout, FailOpen: z.FailOpen, Metrics: m.authzen}
		if old != nil && old.AuthZEN.Same(o) {
			a.AuthZEN = old.AuthZEN
		} else {
			a.AuthZEN = authzen.New(o)
		}
	}
	return a, nil
}

// covers reports whether a call of method is decided here.
func (a *Authz) covers(method string) bool {
	return a.Rules.Covers(method) || a.AuthZEN != nil && a.asks.Has(method)
}

// authorize decides c; denied, it returns the caller's answer.
func (s *Router) authorize(ctx context.Context, c *Call, a *Authz) (res json.RawMessage, denied bool, err error) {
	span := trace.SpanFromContext(ctx)
	if a.Rules.Covers(c.Method) {
		v := c.policyVars()
		d := a.Rules.Decide(ctx, v)
		effect := config.PolicyAllow
		if d.Deny {
			effect = config.PolicyDeny
		}
		a.metrics.decided(d.Rule, effect)
		c.Record.PolicyRule, c.Record.PolicyEffect = d.Rule, effect
		if span.IsRecording() {
			span.SetAttributes(attribute.String("mcp_mux.policy.rule", d.Rule), attribute.String("mcp_mux.policy.effect", effect))
		}
		if d.Err != nil {
			if ctx.Err() != nil {
				return nil, true, ctx.Err()
			}
			s.logFor(ctx).Warn("policy rule could not be evaluated; the call is denied", "rule", d.Rule, "server", c.Backend.Name,
				"method", c.Method, "err", bounds.Clip(d.Err.Error(), bounds.Reason))
			c.Record.Deny(fmt.Sprintf("policy: rule %q could not be evaluated", d.Rule))
			res, err := c.denied(fmt.Sprintf("policy rule %q could not be evaluated (the call is denied)", d.Rule), d.Rule)
			return res, true, err
		}
		if d.Deny {
			c.Record.Deny(fmt.Sprintf("policy: rule %q", d.Rule))
			res, err := c.denied(fmt.Sprintf("denied by policy rule %q", d.Rule), d.Rule)
			return res, true, err
		}
	}
	if a.AuthZEN == nil || !a.asks.Has(c.Method) {
		return nil, false, nil
	}
	return s.askAuthZEN(ctx, c, a)
}

// askAuthZEN asks the external decision point about c; denied, it
// returns the caller's answer.
func (s *Router) askAuthZEN(ctx context.Context, c *Call, a *Authz) (res json.RawMessage, denied bool, err error) {
	d := a.AuthZEN.Decide(ctx, c.authzenRequest(ctx))
	c.Record.AuthZEN = d.Outcome
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.SetAttributes(attribute.String("mcp_mux.authzen.decision", d.Outcome), attribute.Float64("mcp_mux.authzen.duration", d.Latency.Seconds()))
	}
	if d.Outcome == authzen.Cancelled {
		return nil, true, ctx.Err()
	}
	effect := config.PolicyDeny
	if d.Allow {
		effect = config.PolicyAllow
	}
	a.metrics.decided(authzenRule, effect)
	switch d.Outcome {
	case authzen.Failed:
		s.logFor(ctx).Warn("the AuthZEN endpoint did not decide", "server", c.Backend.Name, "method", c.Method, "err", d.Err, "on_error_allows", d.Allow)
	case authzen.CircuitOpen:
		s.logFor(ctx).Debug("AuthZEN circuit open", "on_error_allows", d.Allow)
	}
	if d.Allow {
		return nil, false, nil
	}
	why := "denied by the policy decision point"
	if d.Err != nil {
		why = "denied: the policy decision point could not decide"
	}
	c.Record.Deny("authzen: " + d.Outcome)
	res, err = c.denied(why, authzenRule)
	return res, true, err
}

// authzenRule names the AuthZEN decision where a rule's name goes (a
// metric's label, a denial's data): no rule is named so.
const authzenRule = "(authzen)"

// denied is a denial as c's method gets it: a tool error for tools/call,
// else the CodePolicyDenied error naming rule.
func (c *Call) denied(why, rule string) (json.RawMessage, error) {
	if c.Method == "tools/call" {
		return wire.ToolError(fmt.Sprintf("Error: tool %q: %s", c.Route.Name, why)), nil
	}
	data, _ := json.Marshal(map[string]string{"rule": rule})
	return nil, refusal{&jsonrpc.Error{Code: CodePolicyDenied, Message: fmt.Sprintf("%s %q: %s", c.Method, bounds.Clip(c.Name, bounds.Name), why), Data: data}}
}

// policyVars is what the rules' conditions see of c.
func (c *Call) policyVars() *policy.Vars {
	v := &policy.Vars{Caller: policy.Caller{User: c.Caller.User, Profile: c.Caller.Profile}, Method: c.Method, Server: c.Backend.Name, Tool: c.Name}
	switch c.Method {
	case "tools/call":
		v.Tool, v.Args = c.Route.Name, c.Applied
		an := policy.Annotations(c.Route.Annotations())
		v.Annotations = &an
	case "prompts/get":
		v.Args = promptArgs(c.Params)
	}
	return v
}

// promptArgs are a prompts/get's arguments as JSON; nil for none.
func promptArgs(params any) json.RawMessage {
	p, _ := params.(*mcp.GetPromptParams)
	if p == nil || len(p.Arguments) == 0 {
		return nil
	}
	b, _ := json.Marshal(p.Arguments)
	return b
}

// authzenRequest is c as an AuthZEN Access Evaluation request: the
// caller as the subject, the method as the action, the server's tool,
// prompt or resource as the resource, and the arguments (redacted as
// audit records redact them) as the context.
func (c *Call) authzenRequest(ctx context.Context) *authzen.Request {
	name, typ, args := c.Name, "mcp_tool", json.RawMessage(nil)
	props := map[string]any{"server": c.Backend.Name}
	switch c.Method {
	case "tools/call":
		name, args = c.Route.Name, c.Applied
		props["raw_name"], props["annotations"] = c.Raw, annotationsJSON(c.Route.Annotations())
	case "prompts/get":
		typ, args = "mcp_prompt", promptArgs(c.Params)
		props["raw_name"] = c.Raw
	default:
		typ, name = "mcp_resource", secret.RedactURI(name)
	}
	props["name"] = name
	r := &authzen.Request{
		Subject:   authzen.Entity{Type: "user", ID: c.Caller.User, Properties: map[string]any{"profile": c.Caller.Profile}},
		Action:    authzen.Action{Name: c.Method},
		Resource:  authzen.Entity{Type: typ, ID: c.Backend.Name + "/" + name, Properties: props},
		RequestID: reqid.From(ctx),
	}
	if len(args) > 0 {
		red, err := secret.RedactJSON(args, c.scrubber(), maxAuthZENArgs)
		if err != nil {
			r.Context = map[string]any{"arguments_omitted": fmt.Sprintf("%d bytes: %v", len(args), err)}
		} else {
			r.Context = map[string]any{"arguments": red}
		}
	}
	return r
}

// annotationsJSON is a tool's annotations under their MCP names.
func annotationsJSON(a catalog.Annotations) map[string]any {
	return map[string]any{"title": a.Title, "readOnlyHint": a.ReadOnlyHint, "destructiveHint": a.DestructiveHint,
		"idempotentHint": a.IdempotentHint, "openWorldHint": a.OpenWorldHint}
}

// PolicyMetrics count the authorize stage's decisions: by rule and effect
// (mcp_mux_policy_decisions_total; the rule "(none)" when no rule matched,
// "(authzen)" for the external decision point's), and AuthZEN's own.
type PolicyMetrics struct {
	decisions *prometheus.CounterVec
	authzen   *authzen.Metrics
}

// NewPolicyMetrics returns the metrics; register Collectors once.
func NewPolicyMetrics() *PolicyMetrics {
	return &PolicyMetrics{
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "mcp_mux_policy_decisions_total",
			Help: "Calls decided by policy.rules and policy.authzen, by rule (a configured name, (none) when no rule matched, (authzen)) and effect (allow, deny)."},
			[]string{"rule", "effect"}),
		authzen: authzen.NewMetrics(),
	}
}

// Collectors are the metrics to register.
func (m *PolicyMetrics) Collectors() []prometheus.Collector {
	return append([]prometheus.Collector{m.decisions}, m.authzen.Collectors()...)
}

// decided counts one decision.
func (m *PolicyMetrics) decided(rule, effect string) {
	if rule == "" {
		rule = "(none)"
	}
	m.decisions.WithLabelValues(rule, effect).Inc()
}
