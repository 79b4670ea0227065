package proxy_test

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/internal/audit"
	"github.com/mcp-mux/mcp-mux/internal/mcptest"
	"github.com/mcp-mux/mcp-mux/internal/proxy"
	"github.com/mcp-mux/mcp-mux/internal/secret"
)

// TestCallLogFollowsAuditUserID: with audit records and the "audit"
// interceptor both on, the interceptor's line shows the caller as the
// records do (hashed under the same key), so the plain user appears
// nowhere in the mux's log nor in the records (issue 39: the line said
// user=alice while the records hashed it).
func TestCallLogFollowsAuditUserID(t *testing.T) {
	const (
		user   = "alice-plain-user-77"
		apiKey = "api-key-calllog-0123456789"
	)
	up := mcptest.ServeHTTP(t, mcptest.NewServer("web"))
	cfg := fmt.Sprintf(`{"mcpServers": {"web": {"type": "http", "url": %q}}, "mcpInterceptors": ["audit"],
		"inbound": {"auth": {"mode": "api_keys", "keys": {%q: %q}}}}`, up.URL+"/mcp", user, apiKey)
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	ids := secret.NewIDHash("calllog-shared-key")
	a, err := audit.New(audit.Options{Enabled: true, Output: path, IDs: ids})
	if err != nil {
		t.Fatal(err)
	}
	m := startMux(t, cfg, proxy.Options{Audit: a})
	c := mcp.NewClient(&mcp.Implementation{Name: "calllog", Version: "1"}, nil)
	hc := &http.Client{Transport: headerRT{"Authorization": "Bearer " + apiKey}}
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: m.ts.URL + "/mcp", HTTPClient: hc},
		&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if _, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "web_echo", Arguments: map[string]any{"text": "x"}}); err != nil {
		t.Fatal(err)
	}
	recs, raw := auditRecords(t, a, path)
	rec := findRecord(t, recs, "tools/call", "web_echo", "")
	var line map[string]any
	for _, l := range mcptest.LogLines(m.logs.String()) {
		if l["@message"] == "tool call" && l["@module"] == "audit" {
			line = l
		}
	}
	if line == nil {
		t.Fatalf("no call log line:\n%s", m.logs)
	}
	if line["user"] != rec.Caller || rec.Caller != ids.Of(user) {
		t.Errorf("call log user %v, record caller %q; want both %q", line["user"], rec.Caller, ids.Of(user))
	}
	if strings.Contains(m.logs.String(), user) || strings.Contains(raw, user) {
		t.Errorf("the plain user is in the log or the records:\n%s%s", grepLines(m.logs.String(), user), grepLines(raw, user))
	}
}
