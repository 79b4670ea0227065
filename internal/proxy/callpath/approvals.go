package callpath

// The approvals stage: a call an approvals rule matches runs only once a
// human said yes — its caller, asked in their own client (a form
// elicitation/create live on a 2025-11-25 session, an input_required
// round on 2026-07-28), or an operator through /api/approvals while the
// call waits (wait_seconds) or, past that, on its identical retry. Each
// approval binds the caller, server, tool, arguments digest and rule,
// expires, and is taken once (package approvals).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/attribute"

	"github.com/mcp-mux/mcp-mux/internal/approvals"
	"github.com/mcp-mux/mcp-mux/internal/audit"
	"github.com/mcp-mux/mcp-mux/internal/config"
	"github.com/mcp-mux/mcp-mux/internal/policy"
	"github.com/mcp-mux/mcp-mux/internal/reqid"
	"github.com/mcp-mux/mcp-mux/internal/seal"
	"github.com/mcp-mux/mcp-mux/internal/secret"
	"github.com/mcp-mux/mcp-mux/internal/telemetry"
	"github.com/mcp-mux/mcp-mux/internal/wire"
)

const (
	// approvalPrefix starts the requestState of mcp-mux's own approval
	// question; the approval id follows.
	approvalPrefix = "mcp-mux.approval."
	// approvalInput is the key of the question in inputRequests.
	approvalInput = "mcp-mux.approve"
	// approvalField is the form's one boolean field.
	approvalField = "approve"
	// maxQuestionArgs bounds the redacted arguments a question shows.
	maxQuestionArgs = 600
)

// approvalGate runs the approvals rules' questions and waits on the
// Router's approvals Manager.
type approvalGate struct {
	m     *approvals.Manager
	audit *audit.Auditor
	log   hclog.Logger
}

// approvalGate is the Router's gate.
func (s *Router) approvalGate() *approvalGate {
	return &approvalGate{m: s.approvals, audit: s.audit, log: s.log}
}

// approvalsStage holds a call an approvals rule matches until it is
// approved (approvals.go). Left out when there are no approvals rules.
func approvalsStage(s *Router) Stage {
	return Stage{
		Name:    "approvals",
		Methods: ToolCall | PromptGet | ResourceRead,
		Needed:  func(rt *Runtime) bool { return rt.Config != nil && len(rt.Config.Approvals.Rules) > 0 },
		Wrap: func(next CallFunc) CallFunc {
			return func(ctx context.Context, c *Call) (json.RawMessage, error) {
				rule, err := c.approvalRule(ctx)
				if err != nil { // a condition that fails to evaluate: the safe side
					return c.notApproved(rule, fmt.Sprintf("%s on MCP server %q: the condition of approval rule %q could not be evaluated (%v). Nothing was sent to the server.", c.what(), c.Backend.Name, rule.Name, err))
				}
				if rule == nil {
					return next(ctx, c)
				}
				if s.approvals == nil { // never a silent run
					return c.notApproved(rule, fmt.Sprintf("%s on MCP server %q needs approval (rule %q), and this mcp-mux has no approvals store. Nothing was sent to the server.", c.what(), c.Backend.Name, rule.Name))
				}
				telemetry.Event(ctx, "mcp_mux.approval", attribute.String("mcp_mux.approval.rule", rule.Name),
					attribute.String("mcp_mux.approval.approver", rule.Approver))
				g := s.approvalGate()
				if rule.Approver == config.ApproverCaller {
					return g.askCaller(ctx, c, rule, next)
				}
				return g.askOperator(ctx, c, rule, next)
			}
		},
	}
}

// approvalRule is the first approvals rule of c's runtime that matches c;
// a condition that fails to evaluate returns its rule and the error.
func (c *Call) approvalRule(ctx context.Context) (*config.ApprovalRule, error) {
	rules := c.Runtime.Config.Approvals.Rules
	var vars *policy.Vars // built for the first condition, shared by the rest
	for i := range rules {
		r := &rules[i]
		switch {
		case !slices.Contains(r.Methods, c.Method):
		case r.Server != "" && r.Server != c.Backend.Name:
		case r.Tool != "" && !policy.Glob(r.Tool, c.Name):
		case r.Destructive && !c.destructive():
		case r.Cond == nil:
			return r, nil
		default:
			if vars == nil {
				vars = c.policyVars()
			}
			ok, err := r.Cond.Eval(ctx, vars)
			if err != nil || ok {
				return r, err
			}
		}
	}
	return nil, nil
}

// destructive reports whether c calls a tool whose effective
// destructiveHint is true (catalog.Route.Annotations: after overrides,
// MCP's default true where unset) and that is not read-only (MCP: the
// hint means something only when readOnlyHint is false).
func (c *Call) destructive() bool {
	if c.Method != "tools/call" || c.Route == nil {
		return false
	}
	a := c.Route.Annotations()
	return a.DestructiveHint && !a.ReadOnlyHint
}

// approvalRequest is what c asks approval for under rule.
func (c *Call) approvalRequest(rule *config.ApprovalRule) approvals.Request {
	args := c.Args
	if c.Method != "tools/call" {
		args, _ = json.Marshal(c.Params)
	}
	preview := "{}"
	var sc *secret.Scrubber
	if c.Backend.Up != nil {
		sc = c.scrubber()
	}
	if len(args) > 0 {
		if red, err := secret.RedactJSON(args, sc, approvals.MaxPreview); err == nil {
			preview = string(red)
		} else {
			preview = "(arguments too large to show)"
		}
	}
	return approvals.Request{User: c.Caller.User, Profile: c.Caller.Profile, Server: c.Backend.Name, Tool: c.Name,
		Method: c.Method, Rule: rule.Name, Args: args, Preview: preview, Expires: rule.Expires}
}

// askCaller asks c's caller to approve c: live on a 2025-11-25 session, as
// an input_required round on 2026-07-28 whose retry carries the answer.
func (g *approvalGate) askCaller(ctx context.Context, c *Call, rule *config.ApprovalRule, next CallFunc) (json.RawMessage, error) {
	if id, approved, ok := approvalAnswer(c.Upward); ok {
		c.Upward = RetryParams(c.Upward, nil, "")
		return g.callerAnswered(ctx, c, rule, id, approved, next)
	}
	if !supportsForm(c.Session) {
		g.m.Count(rule.Name, "unaskable")
		return c.notApproved(rule, fmt.Sprintf("%s on MCP server %q needs your approval (rule %q), and this client cannot be asked: it declared no form elicitation capability. Nothing was sent to the server.",
			c.what(), c.Backend.Name, rule.Name))
	}
	q := c.approvalRequest(rule)
	q.Once, q.Expires = true, min(q.Expires, seal.StateTTL) // a question lives as long as its requestState
	rec, _, err := g.m.Ask(ctx, q)
	if err != nil {
		return c.notApproved(rule, g.approvalTrouble(ctx, err))
	}
	answered := false
	ir := approvalInputRequired(c.question(rule, rec), rec.ID)
	raw, err := c.Era.Fulfil(ctx, c.Sink, c.Upward, ir, func(ctx context.Context, params json.RawMessage) (json.RawMessage, error) {
		answered = true
		id, approved, ok := approvalAnswer(params)
		if !ok {
			id, approved = rec.ID, false
		}
		return g.callerAnswered(ctx, c, rule, id, approved, next)
	})
	if err != nil && !answered {
		// A live question that failed (the client went away, or could
		// not answer): the request no longer counts as pending.
		_, _ = g.m.Decide(context.WithoutCancel(ctx), rec.ID, approvals.Deny, "caller", "not answered")
	}
	return raw, err
}

// callerAnswered runs c once when its caller approved the request id —
// theirs, for this very call — and refuses it otherwise.
func (g *approvalGate) callerAnswered(ctx context.Context, c *Call, rule *config.ApprovalRule, id string, approved bool, next CallFunc) (json.RawMessage, error) {
	rec, err := g.m.Get(ctx, id)
	if err != nil {
		return c.notApproved(rule, g.approvalTrouble(ctx, err))
	}
	q := c.approvalRequest(rule)
	if rec.User != q.User || rec.Server != q.Server || rec.Tool != q.Tool || rec.Method != q.Method || rec.Rule != q.Rule || rec.Digest != approvals.Digest(q.Args) {
		return c.notApproved(rule, fmt.Sprintf("approval %s was given for another call; %s needs its own.", id, c.what()))
	}
	decision := approvals.Deny
	if approved {
		decision = approvals.Approve
	}
	if _, err := g.m.Decide(ctx, id, decision, "caller", ""); err != nil {
		return c.notApproved(rule, g.approvalTrouble(ctx, err))
	}
	g.note(ctx, rec, decision, "caller")
	if !approved {
		return c.notApproved(rule, fmt.Sprintf("%s on MCP server %q was not approved; nothing was sent to the server.", c.what(), c.Backend.Name))
	}
	return g.runApproved(ctx, c, rule, id, next)
}

// askOperator records c as waiting for an operator and runs it once
// approved: while it waits (rule.Wait), or on its identical retry.
func (g *approvalGate) askOperator(ctx context.Context, c *Call, rule *config.ApprovalRule, next CallFunc) (json.RawMessage, error) {
	rec, fresh, err := g.m.Ask(ctx, c.approvalRequest(rule))
	if err != nil {
		return c.notApproved(rule, g.approvalTrouble(ctx, err))
	}
	if fresh {
		reqid.Logger(ctx, g.log).Info("call waits for an operator's approval", "approval", rec.ID, "rule", rule.Name, "server", rec.Server, "tool", rec.Tool)
	}
	if rec.State == approvals.Pending {
		wctx, cancel := context.WithTimeout(ctx, rule.Wait)
		rec, err = g.m.Wait(wctx, rec.ID)
		cancel()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if err != nil {
			return c.notApproved(rule, g.approvalTrouble(ctx, err))
		}
	}
	switch rec.State {
	case approvals.Approved:
		return g.runApproved(ctx, c, rule, rec.ID, next)
	case approvals.Used: // approved, and taken by an identical call first
		return c.notApproved(rule, fmt.Sprintf("approval %s was used already (an approval runs one call); call again to ask for a new one.", rec.ID))
	case approvals.Denied:
		msg := fmt.Sprintf("%s on MCP server %q was denied by an operator (approval %s)", c.what(), c.Backend.Name, rec.ID)
		if rec.Reason != "" {
			msg += ": " + rec.Reason
		}
		return c.notApproved(rule, msg+". Nothing was sent to the server.")
	}
	return c.notApproved(rule, fmt.Sprintf("%s on MCP server %q waits for an operator's approval (approval %s, rule %q). Nothing was sent to the server. Once it is approved, call it again with the same arguments within %s: that call runs, once.",
		c.what(), c.Backend.Name, rec.ID, rule.Name, until(rec.Expires)))
}

// runApproved takes the approval id and runs c; a taken one is refused.
func (g *approvalGate) runApproved(ctx context.Context, c *Call, rule *config.ApprovalRule, id string, next CallFunc) (json.RawMessage, error) {
	ok, err := g.m.Take(ctx, id)
	if err != nil {
		return c.notApproved(rule, g.approvalTrouble(ctx, err))
	}
	if !ok {
		return c.notApproved(rule, fmt.Sprintf("approval %s was used already (an approval runs one call); call again to ask for a new one.", id))
	}
	g.m.Count(rule.Name, "ran")
	c.Record.Approval = &audit.Approval{ID: id, Rule: rule.Name, Decision: approvals.Approve}
	telemetry.Event(ctx, "mcp_mux.approval.granted", attribute.String("mcp_mux.approval.id", id))
	return next(ctx, c)
}

// NoteApprovalDecision audits a decision on rec (an operator's, from the admin API) and counts it.
func (s *Router) NoteApprovalDecision(ctx context.Context, rec *approvals.Record, decision, by string) {
	s.approvalGate().note(ctx, rec, decision, by)
}

// note audits a decision on rec and counts it.
func (g *approvalGate) note(ctx context.Context, rec *approvals.Record, decision, by string) {
	g.m.Count(rec.Rule, decision)
	if g.audit == nil {
		return
	}
	e := g.audit.Start("approval")
	e.Server, e.Tool = rec.Server, rec.Tool
	e.Approval = &audit.Approval{ID: rec.ID, Rule: rec.Rule, Decision: decision, By: by}
	g.audit.Finish(ctx, &e, audit.Caller{User: rec.User}, nil, nil)
}

// notApproved answers c with msg: a tool error for a tools/call, an
// invalid-params error otherwise.
func (c *Call) notApproved(rule *config.ApprovalRule, msg string) (json.RawMessage, error) {
	c.Record.Deny("approval: " + rule.Name)
	if c.Method == "tools/call" {
		return wire.ToolError(msg), nil
	}
	return nil, refusal{&jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: msg}}
}

// what names what c calls, for a message.
func (c *Call) what() string {
	switch c.Method {
	case "prompts/get":
		return fmt.Sprintf("Prompt %q", c.Name)
	case "resources/read":
		return fmt.Sprintf("Reading %q", c.Name)
	}
	return fmt.Sprintf("Tool %q", c.Name)
}

// approvalTrouble is the message of a failed step; a store error is
// logged, not shown (it may name the store).
func (g *approvalGate) approvalTrouble(ctx context.Context, err error) string {
	switch {
	case errors.Is(err, approvals.ErrTooManyUser):
		return "You have too many calls waiting for approval; wait for them to be decided or to expire. Nothing was sent to the server."
	case errors.Is(err, approvals.ErrTooMany):
		return "Too many calls are waiting for approval; try again later. Nothing was sent to the server."
	case errors.Is(err, approvals.ErrNotFound), errors.Is(err, approvals.ErrExpired):
		return "The approval expired or does not exist; call again to ask for a new one. Nothing was sent to the server."
	case errors.Is(err, approvals.ErrDecided):
		return "That approval was answered already; call again to ask for a new one. Nothing was sent to the server."
	}
	reqid.Logger(ctx, g.log).Error("approvals store", "err", err)
	return "The approval could not be checked (the store is unreachable); nothing was sent to the server. Try again later."
}

func until(t time.Time) string {
	return time.Until(t).Round(time.Second).String()
}

// supportsForm reports whether st's client can answer a form
// elicitation: it declared elicitation, and form mode or no mode at all.
func supportsForm(st *Session) bool {
	c := st.ClientCaps
	if c == nil || c.Elicitation == nil {
		return false
	}
	return c.Elicitation.Form != nil || c.Elicitation.URL == nil
}

// question is the form elicitation asking c's caller about rec.
func (c *Call) question(rule *config.ApprovalRule, rec *approvals.Record) *mcp.ElicitParams {
	args := rec.Preview
	if len(args) > maxQuestionArgs {
		args = args[:maxQuestionArgs] + "…"
	}
	msg := fmt.Sprintf("Approve this call? %s on MCP server %q with arguments %s (approval rule %q). Nothing is sent until you approve.",
		c.what(), c.Backend.Name, args, rule.Name)
	return &mcp.ElicitParams{Mode: "form", Message: msg, RequestedSchema: map[string]any{
		"type": "object",
		"properties": map[string]any{approvalField: map[string]any{
			"type": "boolean", "title": "Approve", "description": "Run " + strings.ToLower(c.what()[:1]) + c.what()[1:] + " once", "default": false}},
		"required": []string{approvalField},
	}}
}

// approvalInputRequired is the input_required result asking ask, its
// requestState naming approval id.
func approvalInputRequired(ask *mcp.ElicitParams, id string) json.RawMessage {
	params, _ := json.Marshal(ask)
	b, _ := json.Marshal(map[string]any{
		"resultType":    "input_required",
		"inputRequests": map[string]any{approvalInput: map[string]any{"method": "elicitation/create", "params": json.RawMessage(params)}},
		"requestState":  approvalPrefix + id,
	})
	return b
}

// approvalAnswer returns the approval id a retry's requestState names and
// whether the caller's answer approves it.
func approvalAnswer(params json.RawMessage) (id string, approved, ok bool) {
	if !strings.Contains(string(params), approvalPrefix) {
		return "", false, false
	}
	var p struct {
		State     string `json:"requestState"`
		Responses map[string]struct {
			Action  string         `json:"action"`
			Content map[string]any `json:"content"`
		} `json:"inputResponses"`
	}
	if json.Unmarshal(params, &p) != nil {
		return "", false, false
	}
	id, ok = strings.CutPrefix(p.State, approvalPrefix)
	if !ok || !approvals.ValidID(id) {
		return "", false, false
	}
	a := p.Responses[approvalInput]
	yes, _ := a.Content[approvalField].(bool)
	return id, a.Action == "accept" && yes, true
}
