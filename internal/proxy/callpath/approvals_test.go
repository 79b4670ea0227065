package callpath

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/internal/approvals"
	"github.com/mcp-mux/mcp-mux/internal/config"
	"github.com/mcp-mux/mcp-mux/internal/wire"
)

// approvalCall is a tools/call of s_t by user, under a caller rule.
func approvalCall(user, args string) *Call {
	c := testCall()
	c.Caller, c.Session.User, c.Args = NewCaller(user, ""), user, json.RawMessage(args)
	c.Upward = json.RawMessage(`{"name":"t","arguments":` + args + `}`)
	c.Session.ClientCaps = &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{Form: &mcp.FormElicitationCapabilities{}}}
	c.Runtime = NewRuntime(&config.Config{Approvals: config.Approvals{Rules: []config.ApprovalRule{
		{Name: "ask", Approver: config.ApproverCaller, Methods: []string{"tools/call"}, Expires: 60e9}}}})
	return c
}

// answered turns c into a 2026-07-28 retry answering approval id.
func answered(c *Call, id string, yes bool) *Call {
	resp, _ := json.Marshal(map[string]any{approvalInput: map[string]any{"action": "accept", "content": map[string]any{approvalField: yes}}})
	era := &modernRetry{responses: resp, state: approvalPrefix + id}
	c.Era = era
	c.Upward = era.Retry(c.Upward)
	return c
}

// TestApprovalsStageAnswers: a 2026-07-28 caller's retry runs the call
// once when it approves its own question for this very call; an answer
// naming another user's approval, or given for other arguments, or
// replayed, runs nothing; the answer never goes upstream.
func TestApprovalsStageAnswers(t *testing.T) {
	st, err := approvals.OpenBoltStore(approvals.BoltOptions{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	m := approvals.New(approvals.Options{Store: st})
	t.Cleanup(func() { _ = m.Close() })
	s := testRouter(t, Options{Approvals: m})
	var upward []json.RawMessage
	next := func(_ context.Context, c *Call) (json.RawMessage, error) {
		upward = append(upward, c.Upward)
		return json.RawMessage(`{"content":[]}`), nil
	}
	run := approvalsStage(s).Wrap(next)

	// The first round asks: an input_required naming the approval.
	c := approvalCall("alice", `{"q":1}`)
	c.Era = &modernRetry{}
	raw, err := run(t.Context(), c)
	ir, ok := AsInputRequired(raw)
	if err != nil || !ok || !strings.HasPrefix(ir.RequestState, approvalPrefix) || len(upward) != 0 {
		t.Fatalf("first round: %s, %v", raw, err)
	}
	if !strings.Contains(string(ir.InputRequests[approvalInput]), `\"s_t\"`) {
		t.Fatalf("the question does not name the tool: %s", ir.InputRequests[approvalInput])
	}
	id := strings.TrimPrefix(ir.RequestState, approvalPrefix)

	for _, bad := range []struct {
		name string
		c    *Call
	}{
		{"another user", answered(approvalCall("mallory", `{"q":1}`), id, true)},
		{"other arguments", answered(approvalCall("alice", `{"q":2}`), id, true)},
		{"a forged id", answered(approvalCall("alice", `{"q":1}`), "appr-00112233445566778899aabbccddeeff", true)},
	} {
		raw, err := run(t.Context(), bad.c)
		if err != nil || !wire.IsToolError(raw) || len(upward) != 0 {
			t.Fatalf("%s: %s, %v; sent %d", bad.name, raw, err, len(upward))
		}
	}
	raw, err = run(t.Context(), answered(approvalCall("alice", `{"q":1}`), id, true))
	if err != nil || wire.IsToolError(raw) || len(upward) != 1 {
		t.Fatalf("approved retry: %s, %v; sent %d", raw, err, len(upward))
	}
	if strings.Contains(string(upward[0]), "requestState") || strings.Contains(string(upward[0]), "inputResponses") {
		t.Fatalf("the answer went upstream: %s", upward[0])
	}
	raw, err = run(t.Context(), answered(approvalCall("alice", `{"q":1}`), id, true))
	if err != nil || !wire.IsToolError(raw) || len(upward) != 1 {
		t.Fatalf("replayed answer: %s, %v; sent %d", raw, err, len(upward))
	}

	// No store: refused, never run.
	bare := approvalsStage(testRouter(t, Options{})).Wrap(next)
	if raw, _ := bare(t.Context(), approvalCall("alice", `{"q":3}`)); !wire.IsToolError(raw) || len(upward) != 1 {
		t.Fatalf("without a store: %s", raw)
	}
}
