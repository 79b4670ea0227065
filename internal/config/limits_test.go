package config

import (
	"reflect"
	"testing"
	"time"
)

// TestLimitsBlock: the limits block's rules, in order, with their numbers.
func TestLimitsBlock(t *testing.T) {
	cfg, err := load(t, "c.json", `{"limits": {"on_store_error": "closed", "rules": [
	  {"name": "search-per-caller", "scope": "caller_tool", "tool": "web_search*", "calls": 100, "per_seconds": 60},
	  {"name": "db.slow", "scope": "server", "server": "db", "in_flight": 4, "calls": 10, "per_seconds": 1}]}}`, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := Limits{FailClosed: true, Rules: []LimitRule{
		{Name: "search-per-caller", Scope: LimitScopeCallerTool, Tool: "web_search*", Calls: 100, Per: time.Minute},
		{Name: "db.slow", Scope: LimitScopeServer, Server: "db", InFlight: 4, Calls: 10, Per: time.Second},
	}}
	if !reflect.DeepEqual(cfg.Limits, want) {
		t.Fatalf("limits = %+v\nwant %+v", cfg.Limits, want)
	}
	if cfg, err := load(t, "c.json", `{}`, nil); err != nil || cfg.Limits.FailClosed || cfg.Limits.Rules != nil {
		t.Fatalf("default limits %+v, %v", cfg.Limits, err)
	}
}

// TestLimitsProblems: a limits rule is checked strictly, each problem
// naming its field.
func TestLimitsProblems(t *testing.T) {
	tests := []struct {
		content string
		want    []string
	}{
		{`{"limits": {"on_store_error": "maybe", "rule": []}}`, []string{
			"limits.on_store_error: must be one of 'open' or 'closed'", `limits.rule: unknown key; did you mean "rules"?`}},
		{`{"limits": {"rules": {}}}`, []string{"limits.rules: must be a list of rules, not an object"}},
		{`{"limits": {"rules": [{"scope": "tool", "calls": 1, "per_seconds": 1}]}}`, []string{
			"limits.rules[0].name: is required (it names the rule in errors and metrics)"}},
		{`{"limits": {"rules": [{"name": "a b", "scope": "user", "in_flight": 1}]}}`, []string{
			"limits.rules[0].name: must be 1..64 letters, digits, '-', '_' or '.'",
			"limits.rules[0].scope: must be one of 'tool', 'server', 'caller' or 'caller_tool'"}},
		{`{"limits": {"rules": [{"name": "a", "in_flight": 1}]}}`, []string{
			"limits.rules[0].scope: is required: one of 'tool', 'server', 'caller' or 'caller_tool'"}},
		{`{"limits": {"rules": [{"name": "a", "scope": "tool", "tool": "[", "calls": 0, "per_seconds": 90000, "in_flight": 100001}]}}`, []string{
			"limits.rules[0].tool: is not a valid glob: syntax error in pattern",
			"limits.rules[0].calls: must be between 1 and 1000000",
			"limits.rules[0].per_seconds: must be between 1 and 86400",
			"limits.rules[0].in_flight: must be between 1 and 100000"}},
		{`{"limits": {"rules": [{"name": "a", "scope": "tool", "calls": 5}]}}`, []string{
			"limits.rules[0].per_seconds: calls and per_seconds go together: a rate is calls per per_seconds"}},
		{`{"limits": {"rules": [{"name": "a", "scope": "tool", "server": "x"}]}}`, []string{
			"limits.rules[0].calls: a rule needs calls and per_seconds, in_flight, or both"}},
		{`{"limits": {"rules": [{"name": "a", "scope": "tool", "in_flight": 1, "burst": 3}, {"name": "a", "scope": "caller", "in_flight": 2}]}}`, []string{
			"limits.rules[0].burst: unknown key",
			`limits.rules[1].name: "a" names another rule too; rule names must be unique`}},
	}
	for _, tt := range tests {
		t.Run(tt.content, func(t *testing.T) {
			_, err := load(t, "c.json", tt.content, nil)
			var got []string
			for _, p := range Problems(err) {
				got = append(got, p.Error())
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("problems = %q\nwant %q", got, tt.want)
			}
		})
	}
}
