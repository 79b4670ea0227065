package config

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestPolicyBlock: the policy block's rules, in order, and its AuthZEN
// endpoint with its defaults; YAML reads the same.
func TestPolicyBlock(t *testing.T) {
	cfg, err := load(t, "c.json", `{"policy": {"rules": [
	  {"name": "no-big-transfers", "server": "bank", "tool": "*_transfer", "condition": "args.amount > 1000", "effect": "deny"},
	  {"name": "read-etc", "methods": ["resources/read"], "condition": "tool.startsWith('file:///etc/')", "effect": "deny"},
	  {"name": "ops", "condition": "caller.profile == 'ops'", "effect": "allow"}],
	  "authzen": {"url": "$PDP", "timeout_ms": 250, "on_error": "allow", "methods": ["tools/call", "prompts/get"]}}}`,
		map[string]string{"PDP": "http://127.0.0.1:8181/access/v1/evaluation"})
	if err != nil {
		t.Fatal(err)
	}
	want := Policy{Rules: []PolicyRule{
		{Name: "no-big-transfers", Server: "bank", Tool: "*_transfer", Condition: "args.amount > 1000", Effect: PolicyDeny},
		{Name: "read-etc", Methods: []string{"resources/read"}, Condition: "tool.startsWith('file:///etc/')", Effect: PolicyDeny},
		{Name: "ops", Condition: "caller.profile == 'ops'", Effect: PolicyAllow},
	}, AuthZEN: &AuthZEN{URL: "http://127.0.0.1:8181/access/v1/evaluation", Timeout: 250 * time.Millisecond, FailOpen: true,
		Methods: []string{"tools/call", "prompts/get"}}}
	if !reflect.DeepEqual(cfg.Policy, want) {
		t.Fatalf("policy = %+v\nwant %+v", cfg.Policy, want)
	}
	cfg, err = load(t, "c.yaml", "policy:\n  authzen:\n    url: https://pdp.example/access/v1/evaluation\n  rules:\n    - name: r\n      condition: args.n > 1\n      effect: deny\n", nil)
	if err != nil {
		t.Fatal(err)
	}
	if a := cfg.Policy.AuthZEN; a == nil || a.Timeout != DefaultAuthZENTimeout || a.FailOpen || len(cfg.Policy.Rules) != 1 {
		t.Fatalf("yaml policy %+v", cfg.Policy)
	}
	if cfg, err := load(t, "c.json", `{}`, nil); err != nil || cfg.Policy.Rules != nil || cfg.Policy.AuthZEN != nil {
		t.Fatalf("no policy: %+v, %v", cfg.Policy, err)
	}
}

// TestPolicyProblems: the block is strict; a condition that does not
// compile fails the load naming the rule and CEL's error; names are
// unique; the URL is never echoed.
func TestPolicyProblems(t *testing.T) {
	tests := []struct {
		content string
		want    []string
	}{
		{`{"policy": {"rule": []}}`, []string{`policy.rule: unknown key; did you mean "rules"?`}},
		{`{"policy": {"rules": {}}}`, []string{"policy.rules: must be a list of rules, not an object"}},
		{`{"policy": {"rules": [{"name": "big", "condition": "args.amount >", "effect": "deny"}]}}`, []string{
			`policy.rules[0].condition: rule "big": the condition does not compile: ERROR: <input>:1:14: Syntax error: mismatched input '<EOF>'`}},
		{`{"policy": {"rules": [{"name": "typo", "condition": "arg.amount > 1", "effect": "deny"}]}}`, []string{
			`policy.rules[0].condition: rule "typo": the condition does not compile: ERROR: <input>:1:1: undeclared reference to 'arg'`}},
		{`{"policy": {"rules": [{"name": "str", "condition": "tool", "effect": "deny"}]}}`, []string{
			`policy.rules[0].condition: rule "str": the condition evaluates to string, not bool`}},
		{`{"policy": {"rules": [{"name": "a b", "tool": "[", "effect": "block", "methods": ["tools/list"], "when": 1}]}}`, []string{
			"policy.rules[0].name: must be 1..64 letters, digits, '-', '_' or '.'",
			"policy.rules[0].tool: is not a valid glob: syntax error in pattern",
			"policy.rules[0].methods[0]: must be one of 'tools/call', 'prompts/get' or 'resources/read'",
			"policy.rules[0].effect: must be one of 'deny' or 'allow'",
			"policy.rules[0].condition: is required",
			"policy.rules[0].when: unknown key"}},
		{`{"policy": {"rules": [{"condition": 5, "methods": []}]}}`, []string{
			"policy.rules[0].name: is required",
			"policy.rules[0].methods: is empty; leave it out for tools/call alone",
			"policy.rules[0].effect: is required: 'deny' or 'allow'",
			"policy.rules[0].condition: must be a string, not a number"}},
		{`{"policy": {"rules": [{"name": "a", "condition": "true", "effect": "deny"}, {"name": "a", "condition": "false", "effect": "allow"}]}}`, []string{
			`policy.rules[1].name: "a" names another rule too; rule names must be unique`}},
		{`{"policy": {"authzen": {"url": "ftp://user:secret-pw@pdp/x", "timeout_ms": 60000, "on_error": "open", "retries": 1}}}`, []string{
			"policy.authzen.url: must be an absolute http or https URL with no credentials or fragment",
			"policy.authzen.timeout_ms: must be between 10 and 10000",
			"policy.authzen.on_error: must be one of 'deny' or 'allow'",
			"policy.authzen.retries: unknown key"}},
		{`{"policy": {"authzen": {}}}`, []string{"policy.authzen.url: is required"}},
		{`{"polcy": {}, "policy": {"authzen": {"url": "https://pdp/x"}}}`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.content, func(t *testing.T) {
			_, err := load(t, "c.json", tt.content, nil)
			got := Problems(err)
			if len(got) != len(tt.want) {
				t.Fatalf("problems = %q\nwant %q", got, tt.want)
			}
			for i, p := range got {
				if !strings.HasPrefix(p.Error(), tt.want[i]) || strings.Contains(p.Error(), "secret-pw") {
					t.Errorf("problem %d = %q\nwant it to start %q", i, p.Error(), tt.want[i])
				}
			}
		})
	}
}
