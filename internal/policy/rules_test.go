package policy

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// TestRulesDecide: the first rule whose method, server, tool glob and
// condition match decides; no match allows; a condition that fails
// denies whatever its rule's effect.
func TestRulesDecide(t *testing.T) {
	rs, err := NewRules([]Rule{
		{Name: "trusted-bypass", Condition: `caller.user == "root"`},
		{Name: "no-big-transfers", Server: "bank", Tool: "*_transfer", Condition: `args.amount > 1000`, Deny: true},
		{Name: "strict-count", Tool: "count", Condition: `args.n > 1`, Deny: true}, // no has(): a missing n fails
		{Name: "prompts", Methods: []string{PromptGet}, Condition: `args.topic == "secrets"`, Deny: true},
		{Name: "etc", Methods: []string{ResourceRead}, Condition: `tool.startsWith("file:///etc/")`, Deny: true},
		{Name: "all-methods", Methods: []string{ToolCall, PromptGet, ResourceRead}, Server: "off", Condition: `true`, Deny: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	if rs.Len() != 6 || !rs.Covers(ToolCall) || !rs.Covers(PromptGet) || !rs.Covers(ResourceRead) || rs.Covers("completion/complete") {
		t.Fatalf("Len %d, covers wrong", rs.Len())
	}
	tests := []struct {
		name                    string
		user, method, srv, tool string
		args                    string
		rule                    string
		deny, err               bool
	}{
		{name: "big transfer", user: "alice", srv: "bank", tool: "bank_transfer", args: `{"amount": 5000}`, rule: "no-big-transfers", deny: true},
		{name: "small transfer", user: "alice", srv: "bank", tool: "bank_transfer", args: `{"amount": 5}`},
		{name: "root first", user: "root", srv: "bank", tool: "bank_transfer", args: `{"amount": 5000}`, rule: "trusted-bypass"},
		{name: "other server", user: "alice", srv: "shop", tool: "bank_transfer", args: `{"amount": 5000}`},
		{name: "glob misses", user: "alice", srv: "bank", tool: "bank_balance", args: `{"amount": 5000}`},
		{name: "missing field fails closed", user: "alice", srv: "x", tool: "count", args: `{}`, rule: "strict-count", deny: true, err: true},
		{name: "prompt", user: "alice", method: PromptGet, srv: "p", tool: "brief", args: `{"topic":"secrets"}`, rule: "prompts", deny: true},
		{name: "prompt ok", user: "alice", method: PromptGet, srv: "p", tool: "brief", args: `{"topic":"cats"}`},
		{name: "a tool rule skips prompts", user: "alice", method: PromptGet, srv: "bank", tool: "x_transfer", args: `{"amount": 5000, "topic": "x"}`},
		{name: "resource", user: "alice", method: ResourceRead, srv: "fs", tool: "file:///etc/passwd", rule: "etc", deny: true},
		{name: "resource ok", user: "alice", method: ResourceRead, srv: "fs", tool: "file:///home/a"},
		{name: "any method", user: "alice", method: ResourceRead, srv: "off", tool: "x", rule: "all-methods", deny: true},
	}
	for _, tt := range tests {
		method := tt.method
		if method == "" {
			method = ToolCall
		}
		v := &Vars{Caller: Caller{User: tt.user}, Method: method, Server: tt.srv, Tool: tt.tool, Args: json.RawMessage(tt.args)}
		d := rs.Decide(t.Context(), v)
		if d.Rule != tt.rule || d.Deny != tt.deny || (d.Err != nil) != tt.err {
			t.Errorf("%s: %+v, want rule %q deny %v error %v", tt.name, d, tt.rule, tt.deny, tt.err)
		}
	}
	var none *Rules
	if d := none.Decide(t.Context(), &Vars{}); d.Deny || d.Rule != "" || none.Len() != 0 || none.Covers(ToolCall) {
		t.Fatalf("no rules: %+v", d)
	}
}

// TestNewRulesErrors: a rule that does not compile is named.
func TestNewRulesErrors(t *testing.T) {
	for _, r := range []Rule{
		{Name: "bad-cel", Condition: `args.amount >`},
		{Name: "bad-glob", Tool: "[", Condition: `true`},
		{Name: "bad-method", Methods: []string{"tools/list"}, Condition: `true`},
	} {
		_, err := NewRules([]Rule{{Name: "fine", Condition: "true"}, r})
		if err == nil || !strings.Contains(err.Error(), `"`+r.Name+`"`) || strings.Contains(err.Error(), `"fine"`) {
			t.Errorf("%s: %v", r.Name, err)
		}
	}
}

// TestCostLimitDenies: a rule whose condition runs past the cost limit
// denies, naming the rule, even when its effect is allow.
func TestCostLimitDenies(t *testing.T) {
	rs, err := NewRules([]Rule{{Name: "expensive", Condition: `args.xs.all(a, args.xs.all(b, a <= b || a > b))`}})
	if err != nil {
		t.Fatal(err)
	}
	xs := make([]int, 3000)
	args, _ := json.Marshal(map[string]any{"xs": xs})
	d := rs.Decide(t.Context(), &Vars{Method: ToolCall, Args: args})
	if !d.Deny || d.Rule != "expensive" || !errors.Is(d.Err, ErrCostLimit) {
		t.Fatalf("%+v: want a denial by expensive with ErrCostLimit", d)
	}
}

// TestMethodsOf: nothing named is tools/call alone.
func TestMethodsOf(t *testing.T) {
	m, err := MethodsOf(nil)
	if err != nil || m != MethodToolCall {
		t.Fatal(m, err)
	}
	if _, err := MethodsOf([]string{"completion/complete"}); err == nil || !strings.Contains(err.Error(), "completion/complete") {
		t.Fatal(err)
	}
	if !Glob("", "x") || !Glob("a*", "ab") || Glob("a*", "b") || Glob("[", "[") {
		t.Fatal("Glob")
	}
}
