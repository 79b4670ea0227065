package proxy_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/internal/audit"
	"github.com/mcp-mux/mcp-mux/internal/mcptest"
	"github.com/mcp-mux/mcp-mux/internal/proxy"
	"github.com/mcp-mux/mcp-mux/internal/secret"
)

// auditRecords closes a and reads the records it wrote to path.
func auditRecords(t *testing.T, a *audit.Auditor, path string) ([]audit.Record, string) {
	t.Helper()
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []audit.Record
	sc := bufio.NewScanner(strings.NewReader(string(raw)))
	for sc.Scan() {
		var r audit.Record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("not one JSON record a line: %q", sc.Text())
		}
		out = append(out, r)
	}
	return out, string(raw)
}

// findRecord returns the one record of kind for target (a tool, prompt or
// URI) and protocol.
func findRecord(t *testing.T, recs []audit.Record, kind, target, protocol string) audit.Record {
	t.Helper()
	var found []audit.Record
	for _, r := range recs {
		if r.Kind == kind && r.Tool+r.Prompt+r.URI == target && (protocol == "" || r.Protocol == protocol) {
			found = append(found, r)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d records of %s %s (%s), want 1: %+v", len(found), kind, target, protocol, recs)
	}
	return found[0]
}

// Every tools/call, prompts/get and resources/read of both eras gets one
// record saying who did what where and how it ended: ok, a tool error, a
// guardrail denial, an unknown tool. Arguments appear only for the server
// that opted in, redacted; the caller is hashed.
func TestAuditRecords(t *testing.T) {
	web := mcptest.NewServer("web")
	web.AddPrompt(&mcp.Prompt{Name: "greet"}, func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: "hi"}}}}, nil
	})
	web.AddTool(&mcp.Tool{Name: "login", InputSchema: map[string]any{"type": "object"}}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "welcome"}}}, nil
	})
	const docURI = "test://doc?token=uri-token-55aa01"
	web.AddResource(&mcp.Resource{URI: docURI, Name: "doc"}, func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: docURI, Text: "doc"}}}, nil
	})
	up := mcptest.ServeHTTPBothEras(t, web)
	other := mcptest.ServeHTTP(t, mcptest.NewServer("other"))
	const (
		apiKey   = "api-key-audit-0123456789"
		password = "pw-value-8e2f11"
		otherArg = "other-argument-4d0c"
	)
	cfg := fmt.Sprintf(`{"mcpServers": {
		"web": {"type": "http", "url": %q, "telemetry": {"arguments": true}},
		"other": {"type": "http", "url": %q}},
		"guardrails": {"enabled": true, "denied_tools": ["web_count"]},
		"inbound": {"auth": {"mode": "api_keys", "keys": {"alice-the-user": %q}}}}`, up.URL+"/mcp", other.URL+"/mcp", apiKey)
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	ids := secret.NewIDHash("audit-test-shared-key")
	a, err := audit.New(audit.Options{Enabled: true, Output: path, Detail: audit.DetailFull, IDs: ids})
	if err != nil {
		t.Fatal(err)
	}
	m := startMux(t, cfg, proxy.Options{Audit: a})

	c := mcp.NewClient(&mcp.Implementation{Name: "audit", Version: "1"}, nil)
	hc := &http.Client{Transport: headerRT{"Authorization": "Bearer " + apiKey}}
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: m.ts.URL + "/mcp", HTTPClient: hc},
		&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	ctx := context.Background()
	for name, args := range map[string]any{"web_login": map[string]any{"user": "hello", "password": password}, "web_fail": nil,
		"web_count": nil, "other_echo": map[string]any{"text": otherArg}} {
		if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args}); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "no_such_tool"}); err == nil {
		t.Fatal("an unknown tool was called")
	}
	if _, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "web_greet"}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: docURI}); err != nil {
		t.Fatal(err)
	}
	h := modernHeaders("tools/call", "web_login")
	h["Authorization"] = "Bearer " + apiKey
	body := modernBody("tools/call", `"name":"web_login","arguments":{"user":"modern","client_secret":"`+password+`"}`)
	if status, _, out := postModern(t, m.ts.URL+"/mcp", h, body); status != 200 || reply(t, out).Error != nil {
		t.Fatalf("modern call: %d %s", status, out)
	}
	h = modernHeaders("prompts/get", "web_greet")
	h["Authorization"] = "Bearer " + apiKey
	if status, _, out := postModern(t, m.ts.URL+"/mcp", h, modernBody("prompts/get", `"name":"web_greet"`)); status != 200 || reply(t, out).Error != nil {
		t.Fatalf("modern prompt: %d %s", status, out)
	}

	snap := m.srv.Status()
	recs, raw := auditRecords(t, a, path)
	alice := ids.Of("alice-the-user")
	for _, r := range recs {
		if r.Caller != alice || r.Time.IsZero() || r.Outcome == "" {
			t.Errorf("record without its caller, time or outcome: %+v", r)
		}
	}
	echo := findRecord(t, recs, "tools/call", "web_login", "2025-11-25")
	if echo.Server != "web" || echo.RawTool != "login" || echo.Outcome != "ok" || echo.Session == "" || echo.Thread == "" ||
		echo.RequestID == "" || echo.BytesIn == 0 || echo.BytesOut == 0 || !sameJSON(echo.Arguments, `{"user":"hello","password":"[REDACTED]"}`) {
		t.Errorf("echo record = %+v (arguments %s)", echo, echo.Arguments)
	}
	modern := findRecord(t, recs, "tools/call", "web_login", "2026-07-28")
	if modern.Outcome != "ok" || modern.Session != "" || !sameJSON(modern.Arguments, `{"user":"modern","client_secret":"[REDACTED]"}`) {
		t.Errorf("2026-07-28 echo record = %+v (arguments %s)", modern, modern.Arguments)
	}
	if r := findRecord(t, recs, "tools/call", "web_fail", ""); r.Outcome != "tool_error" {
		t.Errorf("fail record = %+v", r)
	}
	if r := findRecord(t, recs, "tools/call", "web_count", ""); r.Outcome != "denied" || r.Denial != "guardrail" || r.Server != "web" {
		t.Errorf("denied record = %+v", r)
	}
	if r := findRecord(t, recs, "tools/call", "other_echo", ""); r.Server != "other" || r.Arguments != nil {
		t.Errorf("a server that did not opt in has its arguments recorded: %+v", r)
	}
	if r := findRecord(t, recs, "tools/call", "no_such_tool", ""); r.Outcome != "error" || r.ErrorType != "-32602" {
		t.Errorf("unknown tool record = %+v", r)
	}
	for _, era := range []string{"2025-11-25", "2026-07-28"} {
		if r := findRecord(t, recs, "prompts/get", "web_greet", era); r.Server != "web" || r.Outcome != "ok" || r.BytesOut == 0 {
			t.Errorf("%s prompt record = %+v", era, r)
		}
	}
	read := findRecord(t, recs, "resources/read", "test://doc?token=[REDACTED]", "")
	if read.Server != "web" || read.Outcome != "ok" {
		t.Errorf("read record = %+v", read)
	}
	for _, s := range []string{password, otherArg, apiKey, "alice-the-user", "uri-token-55aa01"} {
		if strings.Contains(raw, s) {
			t.Errorf("%q is in the audit records:\n%s", s, grepLines(raw, s))
		}
	}
	failed := map[string]string{}
	for _, c := range snap.FailedCalls {
		failed[c.Target] = c.Outcome
	}
	if failed["web_fail"] != "tool_error" || failed["web_count"] != "denied" || failed["no_such_tool"] != "error" || len(failed) != 3 {
		t.Errorf("the status snapshot's failed calls = %+v", snap.FailedCalls)
	}
}

// sameJSON reports whether raw and want are equal JSON values.
func sameJSON(raw json.RawMessage, want string) bool {
	var a, b any
	if json.Unmarshal(raw, &a) != nil || json.Unmarshal([]byte(want), &b) != nil {
		return false
	}
	return fmt.Sprint(a) == fmt.Sprint(b)
}
