package proxy_test

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/internal/approvals"
	"github.com/mcp-mux/mcp-mux/internal/audit"
	"github.com/mcp-mux/mcp-mux/internal/proxy"
	"github.com/mcp-mux/mcp-mux/internal/secret"
)

const (
	apprAliceKey   = "alice-key-0123456789abcdef"
	apprMalloryKey = "mallory-key-0123456789abcdef"
	apprSecret     = "sk-live-APPROVALSECRET-4242"
)

// keyed connects a go-sdk client (2025-11-25) with api key key.
func keyed(t *testing.T, base, key string) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "keyed", Version: "1"}, nil)
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: base + "/mcp",
		HTTPClient: &http.Client{Transport: headerRT{"Authorization": "Bearer " + key}}}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// TestApprovalsAttacksAndRecords: only the admin token decides; a
// caller's flood of pending approvals stops at its share and leaves
// others theirs; decisions are audit records and metrics; the status
// page lists pending approvals with the caller hashed and the arguments
// redacted; no secret an argument carried shows anywhere.
func TestApprovalsAttacksAndRecords(t *testing.T) {
	l, upURL := newLedger(t)
	cfg := fmt.Sprintf(`{"mcpServers": {"up": {"type": "http", "url": %q}},
	  "inbound": {"auth": {"mode": "api_keys", "keys": {"alice": "$ALICE", "mallory": "$MALLORY"}}},
	  "approvals": {"rules": [{"name": "wipes", "tool": "up_wipe", "approver": "operator", "wait_seconds": 1}]}}`, upURL)
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	a, err := audit.New(audit.Options{Enabled: true, Output: path, IDs: secret.NewIDHash("approvals-test")})
	if err != nil {
		t.Fatal(err)
	}
	m := approvalsMuxWith(t, cfg, map[string]string{"ALICE": apprAliceKey, "MALLORY": apprMalloryKey}, nil, proxy.Options{Audit: a})
	alice, mallory := keyed(t, m.ts.URL, apprAliceKey), keyed(t, m.ts.URL, apprMalloryKey)

	ctx := context.Background()
	res, err := alice.CallTool(ctx, &mcp.CallToolParams{Name: "up_wipe", Arguments: map[string]any{"path": "/a", "token": apprSecret}})
	if err != nil || !res.IsError {
		t.Fatalf("unapproved call: %v %+v", err, res)
	}
	recs := pendingIDs(t, m.ts.URL)
	if len(recs) != 1 || recs[0].User != "alice" {
		t.Fatalf("pending %+v", recs)
	}
	id := recs[0].ID

	// Only the admin token decides: none, a caller's api key, a wrong one.
	for _, auth := range []string{"", "Bearer " + apprMalloryKey, "Bearer admin-token-not"} {
		req, _ := http.NewRequest(http.MethodPost, m.ts.URL+"/api/approvals/"+id, strings.NewReader(`{"decision": "approve"}`))
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := testHTTP.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("decision with %q: %d, want 401", auth, resp.StatusCode)
		}
	}
	// Malformed decisions.
	for _, body := range []string{`{"decision": "yes"}`, `{"decision": "approve", "extra": 1}`, `not json`, `{"decision": "approve", "reason": "` + strings.Repeat("x", 300) + `"}`} {
		if code, _ := adminPost(t, m.ts.URL, id, body); code != http.StatusBadRequest {
			t.Errorf("decision %.40s: %d, want 400", body, code)
		}
	}

	// The status page lists it: caller hashed, arguments redacted.
	st := m.srv.Status()
	if st.PendingApprovals != 1 || len(st.Approvals) != 1 || st.Approvals[0].Caller == "alice" || st.Approvals[0].Caller == "" ||
		!strings.Contains(st.Approvals[0].Preview, "/a") {
		t.Fatalf("status approvals %d %+v", st.PendingApprovals, st.Approvals)
	}

	// Mallory floods: her share is DefaultMaxPerCaller pending requests.
	var wg sync.WaitGroup
	var mu sync.Mutex
	tooMany := 0
	for i := range approvals.DefaultMaxPerCaller + 2 {
		wg.Go(func() {
			res, err := mallory.CallTool(ctx, &mcp.CallToolParams{Name: "up_wipe", Arguments: map[string]any{"path": fmt.Sprint("/m/", i)}})
			if err == nil && strings.Contains(resultText(res), "too many calls waiting") {
				mu.Lock()
				tooMany++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if tooMany != 2 {
		t.Errorf("%d of mallory's calls refused as too many, want 2", tooMany)
	}
	res, err = alice.CallTool(ctx, &mcp.CallToolParams{Name: "up_wipe", Arguments: map[string]any{"path": "/b"}})
	if err != nil || strings.Contains(resultText(res), "too many") {
		t.Fatalf("alice after mallory's flood: %v %s", err, resultText(res))
	}

	// Approved, the retry runs once: a decision record and a run.
	if code, body := adminPost(t, m.ts.URL, id, `{"decision": "approve", "by": "oncall", "reason": "ticket 7"}`); code != http.StatusOK {
		t.Fatalf("approve: %d %s", code, body)
	}
	res, err = alice.CallTool(ctx, &mcp.CallToolParams{Name: "up_wipe", Arguments: map[string]any{"path": "/a", "token": apprSecret}})
	if err != nil || res.IsError || l.count("wipe//a") != 1 {
		t.Fatalf("approved retry: %v %s", err, resultText(res))
	}
	body := scrape(t, m.ts.URL)
	for _, series := range []string{`mcp_mux_approvals_total{event="requested",rule="wipes"}`, `mcp_mux_approvals_total{event="approve",rule="wipes"}`, `mcp_mux_approvals_total{event="ran",rule="wipes"}`} {
		if metricValue(body, series) < 1 {
			t.Errorf("%s not counted", series)
		}
	}
	pending := fmt.Sprint(pendingIDs(t, m.ts.URL))
	time.Sleep(50 * time.Millisecond)
	_ = m.srv.Close(ctx)
	all, raw := auditRecords(t, a, path)
	var decided, ran bool
	for _, r := range all {
		switch {
		case r.Kind == "approval" && r.Approval != nil && r.Approval.ID == id:
			decided = r.Approval.By == "operator:oncall" && r.Approval.Rule == "wipes" && r.Approval.Decision == "approve" && r.Caller != "alice" && r.Tool == "up_wipe"
		case r.Kind == "tools/call" && r.Approval != nil && r.Approval.ID == id:
			ran = true
		}
	}
	if !decided || !ran {
		t.Errorf("audit: decision record %v, call record %v:\n%s", decided, ran, raw)
	}
	for where, text := range map[string]string{"audit": raw, "logs": m.logs.String(), "pending": pending, "status": fmt.Sprint(st)} {
		if strings.Contains(text, apprSecret) || strings.Contains(text, apprAliceKey) {
			t.Errorf("a secret shows in the %s", where)
		}
	}
}
