package upstream_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/mcp-mux/mcp-mux/internal/wire"
	"github.com/mcp-mux/mcp-mux/upstream"
)

type callTag struct{}

// progressNotes is a Handler that records the progress it gets with the
// tag of the call context it came with.
type progressNotes struct {
	mu  sync.Mutex
	got []string
}

func (n *progressNotes) ServerRequest(context.Context, upstream.Key, string, json.RawMessage) (json.RawMessage, error) {
	return nil, errors.New("no requests expected")
}

func (n *progressNotes) ServerNotification(ctx context.Context, _ upstream.Key, method string, params json.RawMessage) {
	if method != "notifications/progress" {
		return
	}
	tag, _ := ctx.Value(callTag{}).(string)
	var p struct {
		Token string `json:"progressToken"`
	}
	_ = json.Unmarshal(params, &p)
	n.mu.Lock()
	n.got = append(n.got, tag+" "+p.Token)
	n.mu.Unlock()
}

func (n *progressNotes) take() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	got := n.got
	n.got = nil
	return got
}

// progressCall calls the progress tool (three notifications under tok) as
// key; bound, when non-empty, is the token the call registers.
func progressCall(t *testing.T, u *upstream.Upstream, key upstream.Key, tag, tok, bound string) {
	t.Helper()
	ctx := context.WithValue(context.Background(), callTag{}, tag)
	if bound != "" {
		ctx = upstream.WithProgressToken(ctx, bound)
	}
	params := wire.AppendCallParams(nil, "progress", json.RawMessage(`{"tag":"x"}`), json.RawMessage(`{"progressToken":`+mustJSON(tok)+`}`))
	if _, err := u.CallTool(ctx, key, params, nil); err != nil {
		t.Fatalf("progress call: %v", err)
	}
}

func mustJSON(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// Progress reaches the Handler only with the context of the call whose
// token it names, and only from the session that carries that call: a
// token another session's call holds, or none holds, is dropped.
func TestProgressOnlyForCallsTheSessionCarries(t *testing.T) {
	for _, tg := range targets(t, nil) {
		t.Run(tg.name, func(t *testing.T) {
			t.Parallel()
			notes := &progressNotes{}
			o := tg.opts
			o.Handler = notes
			u := start(t, o)

			progressCall(t, u, alice1, "a", "tok-a", "tok-a")
			if got := notes.take(); len(got) != 3 || got[0] != "a tok-a" || got[2] != "a tok-a" {
				t.Fatalf("the call's own progress: %q", got)
			}
			progressCall(t, u, alice1, "a", "tok-none", "")
			if got := notes.take(); len(got) != 0 {
				t.Fatalf("progress under a token no call holds was delivered: %q", got)
			}

			// Bob's call holds tok-b on bob's session; alice's server names it.
			ctx, cancel := context.WithCancel(context.WithValue(context.Background(), callTag{}, "b"))
			done := make(chan struct{})
			go func() {
				defer close(done)
				_, _ = call(upstream.WithProgressToken(ctx, "tok-b"), u, bob1, "sleep", `{"ms":20000}`)
			}()
			for deadline := time.Now().Add(20 * time.Second); u.Sessions() < 2 && time.Now().Before(deadline); {
				time.Sleep(10 * time.Millisecond)
			}
			time.Sleep(50 * time.Millisecond) // bob's call is in flight on its session
			progressCall(t, u, alice1, "a", "tok-b", "")
			cancel()
			<-done
			if got := notes.take(); len(got) != 0 {
				t.Fatalf("another session's progress reached bob's call: %q", got)
			}
		})
	}
}
