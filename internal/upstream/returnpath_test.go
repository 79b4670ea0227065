package upstream_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/internal/upstream"
	"github.com/mcp-mux/mcp-mux/internal/wire"
)

// recSink is a call's CallSink: it records what reaches it and answers
// sampling with its own name.
type recSink struct {
	name string
	mu   sync.Mutex
	got  []string
}

func (k *recSink) Notify(method string, params json.RawMessage) {
	var p struct {
		Token string `json:"progressToken"`
	}
	_ = json.Unmarshal(params, &p)
	k.add(method + " " + p.Token)
}

func (k *recSink) Request(_ context.Context, method string, _ json.RawMessage) (json.RawMessage, error) {
	k.add(method)
	return json.RawMessage(`{"role":"assistant","model":"m","content":{"type":"text","text":"` + k.name + `"}}`), nil
}

func (k *recSink) add(s string) {
	k.mu.Lock()
	k.got = append(k.got, s)
	k.mu.Unlock()
}

func (k *recSink) take() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	got := slices.Clone(k.got)
	slices.Sort(got)
	return got
}

// returnServer has two tools that talk back while they run. hold asks for
// a completion, reports progress under its own token, says on held that it
// is in flight and waits for release; poke reports progress under its own
// token and under each of the tokens in others, then asks for a completion.
// Both return the completion they got.
func returnServer(held chan<- string, release <-chan struct{}) *mcp.Server {
	type args struct {
		Tag    string   `json:"tag"`
		Others []string `json:"others,omitempty"`
	}
	sample := func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, any, error) {
		res, err := req.Session.CreateMessage(ctx, &mcp.CreateMessageParams{MaxTokens: 1,
			Messages: []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: "hi"}}}})
		if err != nil {
			return nil, nil, err
		}
		tc, _ := res.Content.(*mcp.TextContent)
		if tc == nil {
			return nil, nil, fmt.Errorf("sampling returned no text")
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "sampled " + tc.Text}}}, nil, nil
	}
	progress := func(ctx context.Context, req *mcp.CallToolRequest, tok any) {
		_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: 1})
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "talker", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "hold"}, func(ctx context.Context, req *mcp.CallToolRequest, in args) (*mcp.CallToolResult, any, error) {
		res, _, err := sample(ctx, req)
		if err != nil {
			return nil, nil, err
		}
		progress(ctx, req, req.Params.GetProgressToken())
		held <- in.Tag
		select {
		case <-release:
		case <-ctx.Done():
		}
		return res, nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "poke"}, func(ctx context.Context, req *mcp.CallToolRequest, in args) (*mcp.CallToolResult, any, error) {
		progress(ctx, req, req.Params.GetProgressToken())
		for _, tok := range in.Others {
			progress(ctx, req, tok)
		}
		return sample(ctx, req)
	})
	return s
}

// What a server sends while serving a call reaches exactly the CallSink
// passed with that call: its progress (by token, on the session carrying
// the call, while the call is in flight) and its request to the client.
// Two calls in flight on one session keep their sinks apart; progress
// naming a call on another session, or a call that has ended, is dropped;
// none of it reaches the Handler.
func TestCallSinkGetsItsCallsTraffic(t *testing.T) {
	serve := map[string]func(testing.TB, *mcp.Server) upstream.Options{upstream.HTTP: httpOptions, upstream.SSE: sseOptions}
	for _, transport := range []string{upstream.HTTP, upstream.SSE} {
		t.Run(transport, func(t *testing.T) {
			release, held := make(chan struct{}), make(chan string, 4)
			handler := make(notes, 16)
			o := serve[transport](t, returnServer(held, release))
			o.Handler = handler
			u := start(t, o)
			caps := upstream.Capabilities(&mcp.ClientCapabilities{Sampling: &mcp.SamplingCapabilities{}})
			alice := upstream.Key{User: "alice", Thread: "t1", Caps: caps}
			bob := upstream.Key{User: "bob", Thread: "t1", Caps: caps}
			run := func(key upstream.Key, k *recSink, tool string, others ...string) string {
				tok := "tok-" + k.name
				a, _ := json.Marshal(map[string]any{"tag": k.name, "others": others})
				params := wire.AppendCallParams(nil, tool, a, json.RawMessage(`{"progressToken":"`+tok+`"}`))
				raw, err := u.CallTool(context.Background(), upstream.Call{Key: key, Params: params, Sink: k, ProgressToken: tok})
				if err != nil {
					return err.Error()
				}
				var r struct {
					Content []struct{ Text string } `json:"content"`
				}
				if json.Unmarshal(raw, &r) != nil || len(r.Content) != 1 {
					return string(raw)
				}
				return r.Content[0].Text
			}
			a, b, c, d := &recSink{name: "a"}, &recSink{name: "b"}, &recSink{name: "c"}, &recSink{name: "d"}
			results := make(chan string, 2)
			go func() { results <- "a: " + run(alice, a, "hold") }()
			waitHeld(t, held, "a")
			go func() { results <- "c: " + run(bob, c, "hold") }() // on bob's session
			waitHeld(t, held, "c")
			// b runs on alice's session while a is in flight there.
			if got := run(alice, b, "poke", "tok-a", "tok-c", "tok-none"); got != "sampled b" {
				t.Errorf("b: %q", got)
			}
			close(release)
			got := []string{<-results, <-results}
			slices.Sort(got)
			if want := []string{"a: sampled a", "c: sampled c"}; !slices.Equal(got, want) {
				t.Errorf("held calls: %q, want %q", got, want)
			}
			// d runs after a and b have ended.
			if got := run(alice, d, "poke", "tok-a", "tok-b"); got != "sampled d" {
				t.Errorf("d: %q", got)
			}
			for _, w := range []struct {
				k    *recSink
				want []string
			}{
				{a, []string{"notifications/progress tok-a", "notifications/progress tok-a", "sampling/createMessage"}},
				{b, []string{"notifications/progress tok-b", "sampling/createMessage"}},
				{c, []string{"notifications/progress tok-c", "sampling/createMessage"}},
				{d, []string{"notifications/progress tok-d", "sampling/createMessage"}},
			} {
				if got := w.k.take(); !slices.Equal(got, w.want) {
					t.Errorf("sink %s got %q, want %q", w.k.name, got, w.want)
				}
			}
			select {
			case n := <-handler:
				t.Errorf("the Handler got a call's traffic: %s", n)
			default:
			}
		})
	}
}

func waitHeld(t *testing.T, held <-chan string, tag string) {
	t.Helper()
	select {
	case got := <-held:
		if got != tag {
			t.Fatalf("held %q, want %q", got, tag)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("call %s is not in flight", tag)
	}
}
