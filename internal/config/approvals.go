package config

import (
	"path"
	"time"

	"github.com/mcp-mux/mcp-mux/internal/policy"
)

// Approvers: who says yes to a call an approvals rule matches.
const (
	ApproverCaller   = "caller"   // the calling user, asked in their client
	ApproverOperator = "operator" // an operator, through /api/approvals
)

// Bounds and defaults of an approvals rule.
const (
	DefaultApprovalWait    = 30 * time.Second
	MaxApprovalWait        = 600 * time.Second
	DefaultApprovalExpires = time.Hour
	MaxApprovalExpires     = 7 * 24 * time.Hour
	MaxApprovalRules       = 256
)

// Approvals is the "approvals" block: calls a human must approve before
// they are forwarded (package approvals). Reloadable.
type Approvals struct {
	Rules []ApprovalRule
}

// ApprovalRule is one entry of approvals.rules; the first rule that
// matches a call decides who approves it.
type ApprovalRule struct {
	// Name names the rule in errors, records, metrics and audit records.
	Name string
	// Tool restricts the rule to tools whose visible name matches this
	// glob (path.Match syntax; "": any tool).
	Tool string
	// Server restricts the rule to one server's tools ("": any server).
	Server string
	// Methods are the requests the rule applies to: tools/call (the
	// default), prompts/get (Tool globs the prompt's name) and
	// resources/read (Tool globs the URI).
	Methods []string
	// Destructive restricts the rule to tools whose effective
	// destructiveHint (after overrides) is true.
	Destructive bool
	// Condition is a CEL expression over the call (package policy); ""
	// matches every call the other fields match. Cond is it compiled.
	Condition string
	Cond      *policy.Expr
	// Approver is ApproverCaller or ApproverOperator.
	Approver string
	// Wait is how long an operator-approved call waits for the decision.
	Wait time.Duration
	// Expires is how long an approval request lives: an operator's
	// decision must come within it, and an approved call's identical
	// retry runs within it (once).
	Expires time.Duration
}

// parseApprovals reads the "approvals" block.
func (c *Config) parseApprovals(o *object) {
	c.Approvals.Rules = parseRules(o, MaxApprovalRules, func(ro *object) (ApprovalRule, string, bool) {
		r, ok := parseApprovalRule(ro)
		return r, r.Name, ok
	})
}

// parseApprovalRule reads one rule; ok is false when it has a problem.
func parseApprovalRule(o *object) (r ApprovalRule, ok bool) {
	before := len(o.f.problems)
	r.Name = o.str("name", "")
	if r.Name == "" {
		o.f.problem(o.field("name"), "is required (it names the rule in errors, records and metrics)")
	} else if !isLimitName(r.Name) {
		o.f.problem(o.field("name"), "must be 1..64 letters, digits, '-', '_' or '.'")
	}
	r.Tool = o.str("tool", "")
	if _, err := path.Match(r.Tool, ""); err != nil {
		o.f.problem(o.field("tool"), "is not a valid glob: %v", err)
	}
	r.Server = o.str("server", "")
	r.Methods = o.strList("methods")
	for _, m := range r.Methods {
		if m != "tools/call" && m != "prompts/get" && m != "resources/read" {
			o.f.problem(o.field("methods"), "%q is not tools/call, prompts/get or resources/read", m)
		}
	}
	if len(r.Methods) == 0 {
		r.Methods = []string{"tools/call"}
	}
	r.Destructive = o.boolean("destructive", false)
	r.Condition = o.str("condition", "")
	if r.Condition != "" {
		var err error
		if r.Cond, err = policy.Compile(r.Condition); err != nil {
			o.f.problem(o.field("condition"), "rule %q: %v", r.Name, err)
		}
	}
	if !o.has("approver") {
		o.f.problem(o.field("approver"), "is required: one of %s", quoteList([]string{ApproverCaller, ApproverOperator}))
	}
	r.Approver = o.oneOf("approver", "", ApproverCaller, ApproverOperator)
	r.Wait = o.secondsInRange("wait_seconds", DefaultApprovalWait, 1, MaxApprovalWait.Seconds())
	if o.has("wait_seconds") && r.Approver == ApproverCaller {
		o.f.problem(o.field("wait_seconds"), "applies to approver %q only: a caller is asked in the call itself", ApproverOperator)
	}
	r.Expires = o.secondsInRange("expires_seconds", DefaultApprovalExpires, 1, MaxApprovalExpires.Seconds())
	return r, len(o.f.problems) == before
}
