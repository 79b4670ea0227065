package proxy_test

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/internal/mcptest"
	"github.com/mcp-mux/mcp-mux/internal/proxy"
)

// recorder is one downstream client that records what reaches it.
type recorder struct {
	tag string
	mu  sync.Mutex
	got []string
}

func (r *recorder) add(s string) {
	r.mu.Lock()
	r.got = append(r.got, s)
	r.mu.Unlock()
}

func (r *recorder) all() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.got...)
}

func (r *recorder) options() *mcp.ClientOptions {
	return &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			r.add("progress:" + req.Params.Message)
		},
		LoggingMessageHandler: func(_ context.Context, req *mcp.LoggingMessageRequest) {
			r.add(fmt.Sprint("log:", req.Params.Data))
		},
		CreateMessageHandler: func(_ context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			r.add("sampling:" + req.Params.Messages[0].Content.(*mcp.TextContent).Text)
			return &mcp.CreateMessageResult{Model: "m", Role: "assistant", Content: &mcp.TextContent{Text: "model-" + r.tag}}, nil
		},
		ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			r.add("elicit:" + req.Params.Message)
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"answer": r.tag}}, nil
		},
	}
}

// TestTwoSessionsSeeOnlyTheirOwnTraffic runs two downstream sessions that
// call the same interactive tools concurrently, with the same progress
// token, and checks that progress, logs, sampling and elicitation reach only
// the session whose call caused them — over each upstream transport.
func TestTwoSessionsSeeOnlyTheirOwnTraffic(t *testing.T) {
	web := mcptest.ServeHTTP(t, mcptest.NewServer("web"))
	old := mcptest.ServeSSE(t, mcptest.NewServer("old"))
	cfg := fmt.Sprintf(`{"mcpServers": {
		%s,
		"web": {"type": "http", "url": %q},
		"old": {"type": "sse", "url": %q}
	}}`, stdioServerJSON(t, "local", mcptest.StdioOptions{}, `, "protocol_version": "2025-11-25"`), web.URL+"/mcp", old.URL+"/sse")
	// (The stdio server would negotiate 2026-07-28, where its sample and
	// elicit tools, which send live requests, cannot work: pinned legacy, as
	// the http one is by being stateful.)
	m := startMux(t, cfg, proxy.Options{})

	recs := []*recorder{{tag: "A"}, {tag: "B"}}
	sessions := make([]*mcp.ClientSession, len(recs))
	for i, r := range recs {
		sessions[i] = connect(t, m.ts.URL, r.options())
		if err := sessions[i].SetLoggingLevel(context.Background(), &mcp.SetLoggingLevelParams{Level: "info"}); err != nil {
			t.Fatal(err)
		}
	}
	const rounds = 3
	var wg sync.WaitGroup
	for i, r := range recs {
		cs := sessions[i]
		wg.Go(func() {
			for round := range rounds {
				for _, server := range []string{"web", "local", "old"} {
					tag := fmt.Sprintf("%s/%s/%d", r.tag, server, round)
					p := &mcp.CallToolParams{Name: server + "_progress", Arguments: map[string]any{"tag": tag}}
					p.SetProgressToken("same-token") // both sessions use one token
					res, err := cs.CallTool(context.Background(), p)
					if err != nil || res.IsError {
						t.Errorf("%s progress: %v %+v", tag, err, res)
						continue
					}
					expectText(t, cs, server+"_log", tag, "logged "+tag)
					expectText(t, cs, server+"_sample", tag, "sampled model-"+r.tag)
					expectText(t, cs, server+"_elicit", tag, "elicited accept "+r.tag)
				}
			}
		})
	}
	wg.Wait()

	// Per server and round: 3 progress, 1 log, 1 sampling, 1 elicitation.
	// The client dispatches notifications asynchronously, so wait for them.
	want := map[string]int{"progress": 9 * rounds, "log": 3 * rounds, "sampling": 3 * rounds, "elicit": 3 * rounds}
	for _, r := range recs {
		var counts map[string]int
		deadline := time.Now().Add(10 * time.Second)
		for {
			counts = map[string]int{}
			for _, g := range r.all() {
				kind, rest, _ := strings.Cut(g, ":")
				counts[kind]++
				body := strings.TrimPrefix(strings.TrimPrefix(strings.TrimPrefix(rest, "log "), "sample "), "elicit ")
				if !strings.HasPrefix(body, r.tag+"/") {
					t.Fatalf("session %s received another session's %s: %q", r.tag, kind, g)
				}
			}
			if maps.Equal(counts, want) || time.Now().After(deadline) {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		if !maps.Equal(counts, want) {
			t.Errorf("session %s received %v, want %v:\n%q", r.tag, counts, want, r.all())
		}
	}
}

func expectText(t *testing.T, cs *mcp.ClientSession, tool, tag, want string) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: map[string]any{"tag": tag}})
	if err != nil {
		t.Errorf("%s(%s): %v", tool, tag, err)
		return
	}
	got := ""
	if len(res.Content) > 0 {
		if tc, ok := res.Content[0].(*mcp.TextContent); ok {
			got = tc.Text
		}
	}
	if res.IsError || got != want {
		t.Errorf("%s(%s) = %q (isError=%v), want %q", tool, tag, got, res.IsError, want)
	}
}
