package callpath

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/internal/config"
	"github.com/mcp-mux/mcp-mux/internal/mcptest"
	"github.com/mcp-mux/mcp-mux/internal/secret"
	"github.com/mcp-mux/mcp-mux/internal/taskpoll"
	"github.com/mcp-mux/mcp-mux/internal/upstream"
)

// TestTaskCallerUsesTheSubmittersAccount: a durable task's poll of a
// connected-account server goes out with the submitting user's own token
// (renewed once after a 401), and fails naming connect_account when that
// user has none any more — never with another user's.
func TestTaskCallerUsesTheSubmittersAccount(t *testing.T) {
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return mcptest.NewServer("tasks") }, nil)
	var seen atomic.Value
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth := r.Header.Get("Authorization")
		seen.Store(auth)
		if auth != "Bearer tok-alice-2" {
			w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	up, err := upstream.New(upstream.Options{Name: "s", Transport: upstream.HTTP, URL: ts.URL, Logger: hclog.NewNullLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = up.Close() })
	rt := NewRuntime(&config.Config{})
	rt.Add(&Backend{Name: "s", Up: up, PerUser: true})
	var p atomic.Pointer[Runtime]
	p.Store(rt)
	acc := newFakeAccounts()
	acc.tokens["alice/s"] = "tok-alice-1"
	acc.tokens["bob/s"] = "tok-bob"
	acc.renew = Renewal{Again: true}
	tc := &TaskCaller{Runtime: &p, Accounts: &renewing{acc}}
	call := taskpoll.Call{Server: "s", User: "alice", Thread: "t", Tool: "echo", Args: json.RawMessage(`{"text":"hi"}`)}
	raw, err := tc.CallTool(t.Context(), call)
	if err != nil || !strings.Contains(string(raw), "hi") || acc.rejected != 1 {
		t.Fatalf("alice's poll: %s, %v, rejected %d", raw, err, acc.rejected)
	}
	delete(acc.tokens, "alice/s")
	_, err = tc.CallTool(t.Context(), call)
	if err == nil || !strings.Contains(err.Error(), "connect_account") || seen.Load() == "Bearer tok-bob" {
		t.Fatalf("alice without an account: %v (sent %v)", err, seen.Load())
	}
}

// renewing is fakeAccounts whose Rejected renews alice's token.
type renewing struct{ *fakeAccounts }

func (r *renewing) Rejected(ctx context.Context, user, server string, sent secret.Value, se *upstream.StatusError) (Renewal, error) {
	ren, err := r.fakeAccounts.Rejected(ctx, user, server, sent, se)
	r.mu.Lock()
	r.tokens[user+"/"+server] = "tok-alice-2"
	r.mu.Unlock()
	return ren, err
}
