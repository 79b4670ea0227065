package config

import (
	"fmt"
	"net/url"
	"path"
	"time"

	"github.com/mcp-mux/mcp-mux/internal/policy"
	"github.com/mcp-mux/mcp-mux/internal/secret"
)

// Policy effects.
const (
	PolicyDeny  = "deny"
	PolicyAllow = "allow"
)

// Bounds of the policy block.
const (
	// MaxPolicyRules bounds policy.rules: each is evaluated in order on
	// every call it may apply to.
	MaxPolicyRules = 256
	// DefaultAuthZENTimeout and MaxAuthZENTimeout bound one decision
	// request (timeout_ms).
	DefaultAuthZENTimeout = time.Second
	MaxAuthZENTimeout     = 10 * time.Second
)

// Policy is the "policy" block: rules on what a call asks (CEL conditions
// over its caller, server, tool, arguments and annotations) and an
// optional external decision point. Reloadable.
type Policy struct {
	Rules []PolicyRule
	// AuthZEN is the OpenID AuthZEN Access Evaluation endpoint asked after
	// the rules; nil: none.
	AuthZEN *AuthZEN
}

// PolicyRule is one entry of policy.rules.
type PolicyRule struct {
	// Name names the rule in denials, audit records, spans and metrics.
	Name string
	// Tool is a path.Match glob on the visible name ("": any): the tool's,
	// the prompt's for prompts/get, the URI for resources/read.
	Tool string
	// Server restricts the rule to one server's calls ("": any).
	Server string
	// Methods are the methods the rule applies to (policy.ToolCall,
	// PromptGet, ResourceRead); nil: tools/call.
	Methods []string
	// Condition is a CEL expression (package policy), checked at load.
	Condition string
	// Effect is PolicyDeny or PolicyAllow.
	Effect string
}

// AuthZEN is "policy.authzen".
type AuthZEN struct {
	// URL is the Access Evaluation endpoint the decisions are POSTed to
	// (…/access/v1/evaluation); never echoed.
	URL secret.Value
	// Timeout bounds one decision (timeout_ms; default 1 s, at most 10 s).
	Timeout time.Duration
	// FailOpen allows a call when the endpoint cannot decide
	// ("on_error": "allow"); the default denies it.
	FailOpen bool
	// Methods are the methods it is asked about; nil: tools/call.
	Methods []string
}

// parsePolicy reads the "policy" block.
func (c *Config) parsePolicy(o *object) {
	c.Policy.Rules = parsePolicyRules(o)
	if a := objectAt(o.take("authzen"), o.field("authzen"), o.f); a != nil {
		c.Policy.AuthZEN = parseAuthZEN(a)
		a.rejectUnknown()
	}
}

// parsePolicyRules reads policy.rules: names unique, every condition
// compiled.
func parsePolicyRules(o *object) []PolicyRule {
	return parseRules(o, MaxPolicyRules, func(ro *object) (PolicyRule, string, bool) {
		r, ok := parsePolicyRule(ro)
		return r, r.Name, ok
	})
}

// parsePolicyRule reads one rule; ok is false when it has a problem.
func parsePolicyRule(o *object) (r PolicyRule, ok bool) {
	before := len(o.f.problems)
	r.Name = o.str("name", "")
	if r.Name == "" {
		o.f.problem(o.field("name"), "is required (it names the rule in denials, audit records and metrics)")
	} else if !isLimitName(r.Name) {
		o.f.problem(o.field("name"), "must be 1..64 letters, digits, '-', '_' or '.'")
	}
	r.Server = o.str("server", "")
	r.Tool = o.str("tool", "")
	if _, err := path.Match(r.Tool, ""); err != nil {
		o.f.problem(o.field("tool"), "is not a valid glob: %v", err)
	}
	r.Methods = policyMethods(o)
	if !o.has("effect") {
		o.f.problem(o.field("effect"), "is required: %s", quoteList([]string{PolicyDeny, PolicyAllow}))
	}
	r.Effect = o.oneOf("effect", "", PolicyDeny, PolicyAllow)
	typed := len(o.f.problems)
	r.Condition = o.str("condition", "")
	switch {
	case !o.has("condition"):
		o.f.problem(o.field("condition"), "is required: a CEL expression over caller, method, server, tool, args and annotations (\"true\" for every call the rule matches)")
	case len(o.f.problems) > typed: // not a string
	default:
		if _, err := policy.Compile(r.Condition); err != nil {
			o.f.problem(o.field("condition"), "rule %q: the condition %v", r.Name, err)
		}
	}
	return r, len(o.f.problems) == before
}

// policyMethods reads a rule's or authzen's "methods".
func policyMethods(o *object) []string {
	methods := o.strList("methods")
	if methods == nil {
		return nil
	}
	if len(methods) == 0 {
		o.f.problem(o.field("methods"), "is empty; leave it out for tools/call alone")
	}
	for i, m := range methods {
		if _, err := policy.MethodsOf([]string{m}); err != nil {
			o.f.problem(fmt.Sprintf("%s[%d]", o.field("methods"), i), "must be one of %s", quoteList([]string{policy.ToolCall, policy.PromptGet, policy.ResourceRead}))
		}
	}
	return methods
}

// parseAuthZEN reads policy.authzen.
func parseAuthZEN(o *object) *AuthZEN {
	a := &AuthZEN{URL: o.secret("url")}
	if a.URL.IsZero() {
		o.f.problem(o.field("url"), "is required: the AuthZEN Access Evaluation endpoint (https://pdp.example/access/v1/evaluation)")
	} else if u, err := url.Parse(a.URL.Reveal()); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.Fragment != "" {
		o.f.problem(o.field("url"), "must be an absolute http or https URL with no credentials or fragment")
	}
	ms := o.intInRange("timeout_ms", int(DefaultAuthZENTimeout/time.Millisecond), 10, int(MaxAuthZENTimeout/time.Millisecond))
	a.Timeout = time.Duration(ms) * time.Millisecond
	a.FailOpen = o.oneOf("on_error", PolicyDeny, PolicyDeny, PolicyAllow) == PolicyAllow
	a.Methods = policyMethods(o)
	return a
}
