package config

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestApprovalsBlock: the approvals rules, in order, with their defaults.
func TestApprovalsBlock(t *testing.T) {
	cfg, err := load(t, "c.json", `{"approvals": {"rules": [
	  {"name": "forget", "tool": "openviking_forget", "approver": "caller"},
	  {"name": "prod-deletes", "server": "db", "destructive": true, "methods": ["tools/call", "resources/read"], "approver": "operator", "wait_seconds": 120, "expires_seconds": 600}]}}`, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := Approvals{Rules: []ApprovalRule{
		{Name: "forget", Tool: "openviking_forget", Methods: []string{"tools/call"}, Approver: ApproverCaller, Wait: DefaultApprovalWait, Expires: DefaultApprovalExpires},
		{Name: "prod-deletes", Server: "db", Destructive: true, Methods: []string{"tools/call", "resources/read"}, Approver: ApproverOperator, Wait: 2 * time.Minute, Expires: 10 * time.Minute},
	}}
	if !reflect.DeepEqual(cfg.Approvals, want) {
		t.Fatalf("approvals = %+v\nwant %+v", cfg.Approvals, want)
	}
	if _, ok := cfg.Extra["approvals"]; ok {
		t.Fatal("the approvals block is kept as an unknown top-level key")
	}
}

// TestApprovalsProblems: an approvals rule is checked strictly, each
// problem naming its field.
func TestApprovalsProblems(t *testing.T) {
	tests := []struct {
		content string
		want    []string
	}{
		{`{"approvals": {"rules": [{"tool": "x"}]}}`, []string{
			"approvals.rules[0].name: is required (it names the rule in errors, records and metrics)",
			"approvals.rules[0].approver: is required: one of 'caller' or 'operator'"}},
		{`{"approvals": {"rules": [{"name": "a", "approver": "boss", "tool": "[", "methods": ["tools/list"]}]}}`, []string{
			"approvals.rules[0].tool: is not a valid glob: syntax error in pattern",
			`approvals.rules[0].methods: "tools/list" is not tools/call, prompts/get or resources/read`,
			"approvals.rules[0].approver: must be one of 'caller' or 'operator'"}},
		{`{"approvals": {"rules": [{"name": "a", "approver": "operator", "wait_seconds": 601, "expires_seconds": 0}]}}`, []string{
			"approvals.rules[0].wait_seconds: must be between 1 and 600 seconds",
			"approvals.rules[0].expires_seconds: must be between 1 and 604800 seconds"}},
		{`{"approvals": {"rules": [{"name": "a", "approver": "caller", "wait_seconds": 5}, {"name": "a", "approver": "operator", "approve": true}]}}`, []string{
			`approvals.rules[0].wait_seconds: applies to approver "operator" only: a caller is asked in the call itself`,
			`approvals.rules[1].approve: unknown key; did you mean "approver"?`,
			`approvals.rules[1].name: "a" names another rule too; rule names must be unique`}},
		{`{"approvals": {"rules": [{"name": "c", "approver": "caller", "condition": "args.path +"}]}}`, []string{
			"approvals.rules[0].condition: rule \"c\": "}},
		{`{"approval": {}}`, []string{}},
	}
	for _, tt := range tests {
		t.Run(tt.content, func(t *testing.T) {
			cfg, err := load(t, "c.json", tt.content, nil)
			got := []string{}
			for _, p := range Problems(err) {
				got = append(got, p.Error())
			}
			if len(got) == 1 && len(tt.want) == 1 && strings.HasSuffix(tt.want[0], ": ") && strings.HasPrefix(got[0], tt.want[0]) {
				got = tt.want // a compile error: its text is CEL's
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("problems = %q\nwant %q", got, tt.want)
			}
			if strings.Contains(tt.content, `"approval"`) && (cfg == nil || len(cfg.Warnings) == 0 || !strings.Contains(cfg.Warnings[0].Error(), `"approvals"`)) {
				t.Errorf("a near miss of approvals gives no warning: %+v", cfg)
			}
		})
	}
}
