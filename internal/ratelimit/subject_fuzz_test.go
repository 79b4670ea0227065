package ratelimit

import (
	"strings"
	"testing"

	"github.com/mcp-mux/mcp-mux/internal/config"
)

// FuzzSubject: the budgets of two different callers, tools or methods
// never share a key, whatever a caller picks for its name (a trusted
// header or JWT claim is the caller's choice): a (caller, tool) budget is
// its own, and a request that names no tool never counts against a tool's
// budget (tool names have no "/", every method has one).
func FuzzSubject(f *testing.F) {
	f.Add("alice", "web_search", "bob", "web_search", "completion/complete")
	f.Add("a:b", "c", "a", "b:c", "prompts/get")
	f.Add("1:a", "b", "1", "a:b", "resources/subscribe")
	f.Fuzz(func(t *testing.T, c1, t1, c2, t2, method string) {
		if strings.Contains(t1, "/") || strings.Contains(t2, "/") || !strings.Contains(method, "/") {
			t.Skip() // not a tool name, not a method
		}
		ct := Rule{LimitRule: config.LimitRule{Scope: config.LimitScopeCallerTool}}
		tool := Rule{LimitRule: config.LimitRule{Scope: config.LimitScopeTool}}
		a, b := Call{Caller: c1, Tool: t1}, Call{Caller: c2, Tool: t2}
		if (c1 != c2 || t1 != t2) && ct.subject(a) == ct.subject(b) {
			t.Fatalf("(%q, %q) and (%q, %q) share the budget %q", c1, t1, c2, t2, ct.subject(a))
		}
		m := Call{Caller: c1, Method: method}
		if tool.subject(m) == tool.subject(a) || ct.subject(m) == ct.subject(b) {
			t.Fatalf("method %q shares a tool's budget", method)
		}
	})
}
