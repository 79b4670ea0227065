package config

import (
	"path"
	"time"
)

// Limit scopes: what one budget of a rule is counted per.
const (
	LimitScopeTool       = "tool"        // one budget per matching tool
	LimitScopeServer     = "server"      // one budget per matching server
	LimitScopeCaller     = "caller"      // one budget per caller
	LimitScopeCallerTool = "caller_tool" // one budget per (caller, tool)
)

// Bounds of a limit rule's numbers.
const (
	MaxLimitCalls      = 1_000_000
	MaxLimitPerSeconds = 86_400
	MaxLimitInFlight   = 100_000
)

// Limits is the "limits" block: rate and concurrency limits on calls,
// enforced before anything is forwarded (package ratelimit). Reloadable.
type Limits struct {
	// FailClosed refuses limited calls while the shared store (Redis) is
	// unreachable; the default ("on_store_error": "open") admits them.
	FailClosed bool
	Rules      []LimitRule
}

// LimitRule is one entry of limits.rules.
type LimitRule struct {
	// Name names the rule in errors, metrics and store keys.
	Name string
	// Scope is one of the LimitScope constants.
	Scope string
	// Server restricts the rule to one server's calls ("": any server).
	Server string
	// Tool restricts the rule to tools whose visible name matches this
	// glob (path.Match syntax; "": any tool, and prompts/get and
	// resources/read too).
	Tool string
	// Calls per Per is the rate (0: no rate limit).
	Calls int
	Per   time.Duration
	// InFlight caps the calls running at once (0: no cap).
	InFlight int
}

// parseLimits reads the "limits" block.
func (c *Config) parseLimits(o *object) {
	mode := o.oneOf("on_store_error", "open", "open", "closed")
	c.Limits.FailClosed = mode == "closed"
	c.Limits.Rules = parseRules(o, 0, func(ro *object) (LimitRule, string, bool) {
		r, ok := parseLimitRule(ro)
		return r, r.Name, ok
	})
}

// parseLimitRule reads one rule; ok is false when it has a problem.
func parseLimitRule(o *object) (r LimitRule, ok bool) {
	before := len(o.f.problems)
	r.Name = o.str("name", "")
	if r.Name == "" {
		o.f.problem(o.field("name"), "is required (it names the rule in errors and metrics)")
	} else if !isLimitName(r.Name) {
		o.f.problem(o.field("name"), "must be 1..64 letters, digits, '-', '_' or '.'")
	}
	if !o.has("scope") {
		o.f.problem(o.field("scope"), "is required: one of %s", quoteList([]string{LimitScopeTool, LimitScopeServer, LimitScopeCaller, LimitScopeCallerTool}))
	}
	r.Scope = o.oneOf("scope", "", LimitScopeTool, LimitScopeServer, LimitScopeCaller, LimitScopeCallerTool)
	r.Server = o.str("server", "")
	r.Tool = o.str("tool", "")
	if _, err := path.Match(r.Tool, ""); err != nil {
		o.f.problem(o.field("tool"), "is not a valid glob: %v", err)
	}
	r.Calls = o.intInRange("calls", 0, 1, MaxLimitCalls)
	per := o.intInRange("per_seconds", 0, 1, MaxLimitPerSeconds)
	r.Per = time.Duration(per) * time.Second
	r.InFlight = o.intInRange("in_flight", 0, 1, MaxLimitInFlight)
	switch {
	case o.has("calls") != o.has("per_seconds"):
		o.f.problem(o.field("per_seconds"), "calls and per_seconds go together: a rate is calls per per_seconds")
	case !o.has("calls") && !o.has("in_flight"):
		o.f.problem(o.field("calls"), "a rule needs calls and per_seconds, in_flight, or both")
	}
	return r, len(o.f.problems) == before
}

// isLimitName reports whether s is a rule name: 1..64 of [A-Za-z0-9_.-].
func isLimitName(s string) bool {
	if len(s) > 64 {
		return false
	}
	for _, c := range s {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '_', c == '.':
		default:
			return false
		}
	}
	return s != ""
}
