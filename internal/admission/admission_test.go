package admission

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/mcp-mux/mcp-mux/internal/config"
	"github.com/mcp-mux/mcp-mux/internal/wire"
)

// Of applies the defaults, a quarter of each cap per caller by default,
// and the whole cap when auth mode none makes every request one caller.
func TestOf(t *testing.T) {
	tests := []struct {
		name                      string
		in                        config.Inbound
		sessions, listens, parked Bound
	}{
		{"defaults, no auth", config.Inbound{},
			Bound{10000, 10000, "inbound.max_sessions", "inbound.max_sessions_per_user"},
			Bound{10000, 10000, "inbound.max_sessions", "inbound.max_listens_per_user"},
			Bound{1024, 1024, "inbound.max_parked_calls", "inbound.max_parked_calls_per_user"}},
		{"shares by default", config.Inbound{Auth: config.InboundAuth{Mode: "api_keys"}, MaxSessions: 8, MaxParkedCalls: 2},
			Bound{8, 2, "inbound.max_sessions", "inbound.max_sessions_per_user"},
			Bound{8, 2, "inbound.max_sessions", "inbound.max_listens_per_user"},
			Bound{2, 1, "inbound.max_parked_calls", "inbound.max_parked_calls_per_user"}},
		{"shares set, capped", config.Inbound{Auth: config.InboundAuth{Mode: "jwt"}, MaxSessions: 8, MaxSessionsPerUser: 3, MaxListensPerUser: 20, MaxParkedCallsPerUser: 5},
			Bound{8, 3, "inbound.max_sessions", "inbound.max_sessions_per_user"},
			Bound{8, 8, "inbound.max_sessions", "inbound.max_listens_per_user"},
			Bound{1024, 5, "inbound.max_parked_calls", "inbound.max_parked_calls_per_user"}},
	}
	for _, tt := range tests {
		b := Of(&tt.in)
		if b.Sessions != tt.sessions || b.Listens != tt.listens || b.Parked != tt.parked {
			t.Errorf("%s: %+v", tt.name, b)
		}
	}
}

// Refusal names the cap first, then the share; Counts keep no entry for a
// caller holding nothing.
func TestRefusalAndCounts(t *testing.T) {
	b := Bound{Limit: 4, Share: 2, Key: "cap", ShareKey: "share"}
	for _, c := range []struct {
		total, mine int
		want        string
	}{{0, 0, ""}, {3, 1, ""}, {3, 2, "share"}, {4, 0, "cap"}, {4, 2, "cap"}} {
		if got := b.Refusal(c.total, c.mine); got != c.want {
			t.Errorf("Refusal(%d, %d) = %q, want %q", c.total, c.mine, got, c.want)
		}
	}
	var c Counts
	c.Add("a")
	c.Add("a")
	c.Done("a")
	if c["a"] != 1 {
		t.Errorf("a: %d", c["a"])
	}
	c.Done("a")
	if _, ok := c["a"]; ok || len(c) != 0 {
		t.Errorf("an entry left: %v", c)
	}
}

// Calls admits at most limit requests at once, each cancelled when its
// session ends (and so is every later one), and holds nothing when idle.
func TestCalls(t *testing.T) {
	var c Calls
	ctx, done, err := c.Admit(context.Background(), 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Admit(context.Background(), 1); err == nil || !strings.Contains(err.Error(), "this session already has 1 requests in flight") {
		t.Fatalf("past the limit: %v", err)
	}
	done()
	if c.calls != nil || c.Active() != 0 {
		t.Fatalf("an idle Calls holds %d calls, %d active", len(c.calls), c.Active())
	}
	ctx, done, err = c.Admit(context.Background(), 1)
	if err != nil {
		t.Fatalf("after the first ended: %v", err)
	}
	c.End()
	select {
	case <-ctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the request outlived its session")
	}
	done()
	later, done, err := c.Admit(context.Background(), 1)
	if err != nil {
		t.Fatal(err)
	}
	defer done()
	if later.Err() == nil {
		t.Fatal("a request admitted after the session ended is not cancelled")
	}
}

// Read refuses a body too large, malformed or nested too deep, and a batch
// too long, each with its JSON-RPC error; a good body is returned.
func TestBodiesRead(t *testing.T) {
	var bufs wire.Buffers
	tests := []struct {
		name, body string
		max        int64
		status     int
		msg        string
	}{
		{"ok", `{"jsonrpc":"2.0","id":1,"method":"ping"}`, 64, http.StatusOK, ""},
		{"too large", strings.Repeat(" ", 65), 64, http.StatusRequestEntityTooLarge, "request body exceeds 64 bytes"},
		{"batch", "[" + strings.Repeat("{},", wire.MaxBatch) + "{}]", 1 << 20, http.StatusBadRequest, "batch of 33 messages exceeds the limit of 32"},
		{"deep", strings.Repeat("[", wire.MaxDepth+1) + strings.Repeat("]", wire.MaxDepth+1), 1 << 20, http.StatusBadRequest, "request refused: "},
	}
	for _, tt := range tests {
		b := NewBodies(BodyOptions{Max: tt.max, Timeout: time.Second, Buffers: &bufs, Log: hclog.NewNullLogger()})
		w := httptest.NewRecorder()
		bp, _ := b.Read(w, httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(tt.body)))
		if tt.status == http.StatusOK {
			if bp == nil || string(*bp) != tt.body {
				t.Errorf("%s: not read: HTTP %d %s", tt.name, w.Code, w.Body)
			}
			continue
		}
		if bp != nil || w.Code != tt.status || !strings.Contains(w.Body.String(), tt.msg) {
			t.Errorf("%s: HTTP %d %s, want %d %q", tt.name, w.Code, w.Body, tt.status, tt.msg)
		}
	}
}
