package upstream_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/internal/upstream"
	"github.com/mcp-mux/mcp-mux/internal/wire"
)

// progressNotes records the progress that reaches the sinks it makes,
// with the tag of the call whose sink got it, and (as the Handler, untagged)
// any progress that reaches the Handler.
type progressNotes struct {
	mu  sync.Mutex
	got []string
}

func (n *progressNotes) ServerRequest(context.Context, upstream.Key, string, json.RawMessage) (json.RawMessage, error) {
	return nil, errors.New("no requests expected")
}

func (n *progressNotes) ServerNotification(_ context.Context, _ upstream.Key, method string, params json.RawMessage) {
	n.record("", method, params)
}

func (n *progressNotes) record(tag, method string, params json.RawMessage) {
	if method != "notifications/progress" {
		return
	}
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

// sink returns the CallSink of the call tagged tag.
func (n *progressNotes) sink(tag string) upstream.CallSink { return tagSink{n, tag} }

type tagSink struct {
	n   *progressNotes
	tag string
}

func (k tagSink) Notify(method string, params json.RawMessage) { k.n.record(k.tag, method, params) }

func (k tagSink) Request(context.Context, string, json.RawMessage) (json.RawMessage, error) {
	return nil, errors.New("no requests expected")
}

// progressCall calls the progress tool (three notifications under tok) as
// key, with the sink tagged tag; bound, when non-empty, is the token the
// call registers.
func progressCall(t *testing.T, u *upstream.Upstream, notes *progressNotes, key upstream.Key, tag, tok, bound string) {
	t.Helper()
	params := wire.AppendCallParams(nil, "progress", json.RawMessage(`{"tag":"x"}`), json.RawMessage(`{"progressToken":`+mustJSON(tok)+`}`))
	if _, err := u.CallTool(context.Background(), upstream.Call{Key: key, Params: params, Sink: notes.sink(tag), ProgressToken: bound}); err != nil {
		t.Fatalf("progress call: %v", err)
	}
}

func mustJSON(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// Progress reaches only the sink of the call whose token it names, and only
// from the session that carries that call: a token another session's call
// holds, or none holds, is dropped.
func TestProgressOnlyForCallsTheSessionCarries(t *testing.T) {
	for _, tg := range targets(t, nil) {
		t.Run(tg.name, func(t *testing.T) {
			t.Parallel()
			notes := &progressNotes{}
			o := tg.opts
			o.Handler = notes
			u := start(t, o)

			progressCall(t, u, notes, alice1, "a", "tok-a", "tok-a")
			if got := notes.take(); len(got) != 3 || got[0] != "a tok-a" || got[2] != "a tok-a" {
				t.Fatalf("the call's own progress: %q", got)
			}
			progressCall(t, u, notes, alice1, "a", "tok-none", "")
			if got := notes.take(); len(got) != 0 {
				t.Fatalf("progress under a token no call holds was delivered: %q", got)
			}

			// Bob's call holds tok-b on bob's session; alice's server names it.
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() {
				defer close(done)
				_, _ = u.CallTool(ctx, upstream.Call{Key: bob1, Params: wire.AppendCallParams(nil, "sleep", json.RawMessage(`{"ms":20000}`), nil),
					Sink: notes.sink("b"), ProgressToken: "tok-b"})
			}()
			for deadline := time.Now().Add(20 * time.Second); u.Sessions() < 2 && time.Now().Before(deadline); {
				time.Sleep(10 * time.Millisecond)
			}
			time.Sleep(50 * time.Millisecond) // bob's call is in flight on its session
			progressCall(t, u, notes, alice1, "a", "tok-b", "")
			cancel()
			<-done
			if got := notes.take(); len(got) != 0 {
				t.Fatalf("another session's progress reached bob's call: %q", got)
			}
		})
	}
}

// A server that gives up on its own request to the client (its sampling
// timed out) cancels it with notifications/cancelled, which ends the
// Handler's answering: the id is looked up among that session's requests.
func TestServerCancelsItsOwnRequest(t *testing.T) {
	newServer := func() *mcp.Server {
		s := mcp.NewServer(&mcp.Implementation{Name: "asker", Version: "1"}, nil)
		s.AddTool(&mcp.Tool{Name: "ask", InputSchema: map[string]any{"type": "object"}},
			func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				ctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
				defer cancel()
				_, err := req.Session.CreateMessage(ctx, &mcp.CreateMessageParams{MaxTokens: 1,
					Messages: []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: "hi"}}}})
				time.Sleep(300 * time.Millisecond) // the SDK sends the cancellation in the background
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprint(err)}}}, nil
			})
		return s
	}
	for _, tg := range []target{{upstream.HTTP, httpOptions(t, newServer())}, {upstream.SSE, sseOptions(t, newServer())}} {
		t.Run(tg.name, func(t *testing.T) {
			t.Parallel()
			h := &waitingHandler{ended: make(chan error, 1)}
			o := tg.opts
			o.Handler = h
			u := start(t, o)
			key := upstream.Key{User: "alice", Thread: "t1", Caps: upstream.Capabilities(&mcp.ClientCapabilities{Sampling: &mcp.SamplingCapabilities{}})}
			if _, err := call(context.Background(), u, key, "ask", `{}`); err != nil {
				t.Fatal(err)
			}
			if err := <-h.ended; err == nil {
				t.Fatal("the server's cancellation did not end the answering of its request")
			}
		})
	}
}

// waitingHandler answers a server request only when its context ends, or
// after 5 s, and reports which (ctx.Err(), or nil).
type waitingHandler struct{ ended chan error }

func (h *waitingHandler) ServerRequest(ctx context.Context, _ upstream.Key, _ string, _ json.RawMessage) (json.RawMessage, error) {
	select {
	case <-ctx.Done():
		h.ended <- ctx.Err()
		return nil, ctx.Err()
	case <-time.After(5 * time.Second):
		h.ended <- nil
		return nil, errors.New("not cancelled")
	}
}

func (h *waitingHandler) ServerNotification(context.Context, upstream.Key, string, json.RawMessage) {}
