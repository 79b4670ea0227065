package proxy_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/internal/mcptest"
	"github.com/mcp-mux/mcp-mux/internal/proxy"
)

// methodsUpstream is a go-sdk server with a prompt, a subscribable
// resource and completions, counting what reaches it by method.
type methodsUpstream struct {
	url                                     string
	completions, prompts, reads, subscribes atomic.Int64
}

func startMethodsUpstream(t *testing.T) *methodsUpstream {
	t.Helper()
	u := &methodsUpstream{}
	s := mcp.NewServer(&mcp.Implementation{Name: "web", Version: "1"}, &mcp.ServerOptions{
		SubscribeHandler:   func(context.Context, *mcp.SubscribeRequest) error { u.subscribes.Add(1); return nil },
		UnsubscribeHandler: func(context.Context, *mcp.UnsubscribeRequest) error { return nil },
		CompletionHandler: func(context.Context, *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
			u.completions.Add(1)
			return &mcp.CompleteResult{Completion: mcp.CompletionResultDetails{Values: []string{"done"}}}, nil
		},
	})
	s.AddPrompt(&mcp.Prompt{Name: "greet", Arguments: []*mcp.PromptArgument{{Name: "who"}}}, func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		u.prompts.Add(1)
		return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: "hi"}}}}, nil
	})
	s.AddResource(&mcp.Resource{URI: "res://web", Name: "doc"}, func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		u.reads.Add(1)
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: "res://web", Text: "doc"}}}, nil
	})
	u.url = mcptest.ServeHTTP(t, s).URL + "/mcp"
	return u
}

// limitedErr reports whether err is the -32029 refusal of rule "one-each".
func limitedErr(err error) bool {
	var je *jsonrpc.Error
	return errors.As(err, &je) && je.Code == -32029 && strings.Contains(je.Message, `rate limit "one-each" exceeded`)
}

// limitedReply is limitedErr for a raw reply.
func limitedReply(r rpcReply) bool {
	return r.Error != nil && r.Error.Code == -32029 && strings.Contains(r.Error.Message, `rate limit "one-each" exceeded`)
}

// Issue 32, attack 11: the limits cover every request a caller can make
// mcp-mux forward, not only tools/call, prompts/get and resources/read:
// completion/complete (both eras), resources/subscribe, the resource
// subscriptions of a 2026-07-28 subscriptions/listen (either path) and the
// tasks extension's requests for a server's own task. Each caller has one
// request per hour; the second is refused with -32029 and never reaches
// the server.
func TestLimitsCoverEveryForwardedMethod(t *testing.T) {
	u := startMethodsUpstream(t)
	tu := newTasksUpstream(t)
	m := startMux(t, fmt.Sprintf(`{"mcpServers": {"web": {"type": "http", "url": %q}, "builder": {"type": "http", "url": %q}},
	  "inbound": {"auth": {"mode": "trusted_header"}, "user_header": "X-User"},
	  "limits": {"rules": [{"name": "one-each", "scope": "caller", "calls": 1, "per_seconds": 3600}]}}`, u.url, tu.ts.URL+"/mcp"), proxy.Options{})
	url := m.ts.URL + "/mcp"
	ctx := context.Background()
	as := func(user string) map[string]string { return map[string]string{"X-User": user} }

	t.Run("completion/complete, 2025-11-25", func(t *testing.T) {
		cs := sessionAs(t, url, "complete-legacy")
		params := &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/prompt", Name: "web_greet"}, Argument: mcp.CompleteParamsArgument{Name: "who", Value: "a"}}
		if _, err := cs.Complete(ctx, params); err != nil {
			t.Fatal(err)
		}
		before := u.completions.Load()
		for range 5 {
			if _, err := cs.Complete(ctx, params); !limitedErr(err) {
				t.Fatalf("completion past the limit: %v, want the -32029 refusal", err)
			}
		}
		if n := u.completions.Load(); n != before {
			t.Fatalf("%d completions past the limit reached the server", n-before)
		}
	})
	t.Run("completion/complete, 2026-07-28", func(t *testing.T) {
		params := `"ref":{"type":"ref/prompt","name":"web_greet"},"argument":{"name":"who","value":"a"}`
		if _, r := modernCall(t, url, as("complete-modern"), `{}`, "completion/complete", "", params); r.Error != nil {
			t.Fatalf("first completion: %+v", r.Error)
		}
		before := u.completions.Load()
		if _, r := modernCall(t, url, as("complete-modern"), `{}`, "completion/complete", "", params); !limitedReply(r) {
			t.Fatalf("completion past the limit: %s %+v", r.Result, r.Error)
		}
		if u.completions.Load() != before {
			t.Fatal("a completion past the limit reached the server")
		}
	})
	t.Run("prompts/get and resources/read", func(t *testing.T) {
		cs := sessionAs(t, url, "prompt-legacy")
		if _, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "web_greet"}); err != nil {
			t.Fatal(err)
		}
		if _, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "web_greet"}); !limitedErr(err) {
			t.Fatalf("prompt past the limit: %v", err)
		}
		if _, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "res://web"}); !limitedErr(err) {
			t.Fatalf("read past the limit: %v", err)
		}
		if u.prompts.Load() != 1 || u.reads.Load() != 0 {
			t.Fatalf("the server served %d prompts and %d reads, want 1 and 0", u.prompts.Load(), u.reads.Load())
		}
	})
	t.Run("resources/subscribe", func(t *testing.T) {
		a, b := sessionAs(t, url, "subscriber"), sessionAs(t, url, "subscriber")
		if err := a.Subscribe(ctx, &mcp.SubscribeParams{URI: "res://web"}); err != nil {
			t.Fatal(err)
		}
		if err := b.Subscribe(ctx, &mcp.SubscribeParams{URI: "res://web"}); !limitedErr(err) {
			t.Fatalf("subscribe past the limit: %v", err)
		}
		// Unsubscribing gives back: never refused.
		if err := a.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: "res://web"}); err != nil {
			t.Fatalf("unsubscribe past the limit: %v", err)
		}
	})
	for _, sdk := range []bool{false, true} {
		t.Run(fmt.Sprintf("subscriptions/listen, SDK path %v", sdk), func(t *testing.T) {
			user := fmt.Sprint("listener-", sdk)
			ctx, cancel := context.WithCancel(ctx)
			defer cancel()
			s := openStream(t, ctx, url, listenHeaders(user, sdk), listenBody("l1", "res://web"))
			if ack := s.next(t); !strings.Contains(fmt.Sprint(ack), "res://web") {
				t.Fatalf("first listen's acknowledgement %v", ack)
			}
			msg := firstMessage(t, url, listenHeaders(user, sdk), listenBody("l2", "res://web"))
			if strings.Contains(msg, "notifications/subscriptions/acknowledged") || !limitedReply(reply(t, msg)) {
				t.Fatalf("listen past the limit: %s, want the -32029 refusal", msg)
			}
		})
	}
	t.Run("tasks/get of a server's task", func(t *testing.T) {
		_, r := modernCall(t, url, as("tasker"), tasksCaps, "tools/call", "builder_build", `"name":"builder_build","arguments":{}`)
		created := decodeTask(t, r)
		if created.ResultType != "task" {
			t.Fatalf("submit: %s", r.Result)
		}
		for _, method := range []string{"tasks/get", "tasks/update", "tasks/cancel"} {
			if _, r = taskCall(t, url, as("tasker"), tasksCaps, method, created.TaskID, ""); !limitedReply(r) {
				t.Fatalf("%s past the limit: %s %+v", method, r.Result, r.Error)
			}
		}
		if calls, _, _ := tu.snapshot(); len(calls) != 0 {
			t.Fatalf("requests past the limit reached the server: %q", calls)
		}
	})
}

// firstMessage posts body and returns the first JSON-RPC message of its
// answer (a JSON body or an event stream's first event), closing the
// request then.
func firstMessage(t *testing.T, url string, hdr map[string]string, body string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := testHTTP.Do(mcpRequest(t, ctx, http.MethodPost, url, hdr, body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := strings.TrimPrefix(strings.TrimSpace(sc.Text()), "data: ")
		if strings.HasPrefix(line, "{") {
			return line
		}
	}
	t.Fatalf("HTTP %d: no JSON-RPC message (%v)", resp.StatusCode, sc.Err())
	return ""
}
