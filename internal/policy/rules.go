package policy

import (
	"context"
	"fmt"
	"path"
)

// The methods a rule may name.
const (
	ToolCall     = "tools/call"
	PromptGet    = "prompts/get"
	ResourceRead = "resources/read"
)

// Methods is a set of the methods a rule applies to.
type Methods uint8

// The bits of Methods.
const (
	MethodToolCall Methods = 1 << iota
	MethodPromptGet
	MethodResourceRead
)

// MethodsOf is the set of the named methods; nil or empty is tools/call
// alone. A name that is none of ToolCall, PromptGet and ResourceRead is
// an error naming it.
func MethodsOf(names []string) (Methods, error) {
	if len(names) == 0 {
		return MethodToolCall, nil
	}
	var m Methods
	for _, n := range names {
		b := methodBit(n)
		if b == 0 {
			return 0, fmt.Errorf("%q is not a method a rule can name (%s, %s or %s)", n, ToolCall, PromptGet, ResourceRead)
		}
		m |= b
	}
	return m, nil
}

// Has reports whether m holds method (an MCP method name).
func (m Methods) Has(method string) bool { return m&methodBit(method) != 0 }

// methodBit is method's bit; 0 for a method rules cannot name.
func methodBit(method string) Methods {
	switch method {
	case ToolCall:
		return MethodToolCall
	case PromptGet:
		return MethodPromptGet
	case ResourceRead:
		return MethodResourceRead
	}
	return 0
}

// Rule is one policy rule as configured (config.PolicyRule).
type Rule struct {
	Name string
	// Tool is a path.Match glob on the visible name (a prompt's name, a
	// resource's URI); "" matches any.
	Tool string
	// Server is the configured server's name; "" matches any.
	Server string
	// Methods are the methods the rule applies to; empty: tools/call.
	Methods []string
	// Condition is the CEL condition (Compile).
	Condition string
	// Deny is the rule's effect: true "deny", false "allow".
	Deny bool
}

// Rules are policy rules compiled, in order. Immutable, safe for
// concurrent use; a nil *Rules has none.
type Rules struct {
	rules   []compiled
	methods Methods // every method some rule names
}

type compiled struct {
	Rule
	methods Methods
	cond    *Expr
}

// NewRules compiles rules; the error names the first rule that does not
// compile (config validated them at load, so this fails only for rules
// built elsewhere).
func NewRules(rules []Rule) (*Rules, error) {
	rs := &Rules{rules: make([]compiled, 0, len(rules))}
	for _, r := range rules {
		m, err := MethodsOf(r.Methods)
		if err != nil {
			return nil, fmt.Errorf("policy rule %q: methods: %w", r.Name, err)
		}
		if _, err := path.Match(r.Tool, ""); err != nil {
			return nil, fmt.Errorf("policy rule %q: tool: %w", r.Name, err)
		}
		cond, err := Compile(r.Condition)
		if err != nil {
			return nil, fmt.Errorf("policy rule %q: condition %w", r.Name, err)
		}
		rs.rules = append(rs.rules, compiled{Rule: r, methods: m, cond: cond})
		rs.methods |= m
	}
	return rs, nil
}

// Len is how many rules there are.
func (rs *Rules) Len() int {
	if rs == nil {
		return 0
	}
	return len(rs.rules)
}

// Covers reports whether some rule applies to method.
func (rs *Rules) Covers(method string) bool { return rs != nil && rs.methods.Has(method) }

// Decision is what the rules decided of one call.
type Decision struct {
	// Rule names the rule that decided; "" when none matched (allowed).
	Rule string
	// Deny is the decision: the matching rule's effect, or true when its
	// condition failed (Err).
	Deny bool
	// Err is why the deciding rule's condition could not be evaluated
	// (ErrCostLimit, ErrInterrupted, ErrArgs, a runtime error): the call
	// is denied, whatever the rule's effect.
	Err error
}

// Decide runs the rules over v, in order: the first rule whose methods,
// server and tool glob match v and whose condition is true decides; one
// whose condition fails to evaluate decides too, as a denial. No match
// allows.
func (rs *Rules) Decide(ctx context.Context, v *Vars) Decision {
	if rs == nil {
		return Decision{}
	}
	for i := range rs.rules {
		r := &rs.rules[i]
		if !r.matches(v.Method, v.Server, v.Tool) {
			continue
		}
		ok, err := r.cond.Eval(ctx, v)
		if err != nil {
			return Decision{Rule: r.Name, Deny: true, Err: err}
		}
		if ok {
			return Decision{Rule: r.Name, Deny: r.Deny}
		}
	}
	return Decision{}
}

// matches reports whether the rule applies to a call of method to tool
// at server, its condition aside.
func (r *compiled) matches(method, server, tool string) bool {
	if !r.methods.Has(method) || r.Server != "" && r.Server != server {
		return false
	}
	return Glob(r.Tool, tool)
}

// Glob reports whether name matches the glob pattern: path.Match, the
// syntax of every tool glob in the config; "" matches any name.
func Glob(pattern, name string) bool {
	if pattern == "" {
		return true
	}
	ok, _ := path.Match(pattern, name)
	return ok
}
