package replicaset_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/internal/mcptest"
)

// events records what the server sent a go-sdk client, and wakes waiters.
type events struct {
	mu           sync.Mutex
	changed      chan struct{}
	progress     []string // progress messages
	logs         []string // logging data
	updated      []string // updated resource URIs
	toolsChanged int      // tools/list_changed notifications
}

func (e *events) add(f func(*events)) {
	e.mu.Lock()
	defer e.mu.Unlock()
	f(e)
	close(e.changed)
	e.changed = make(chan struct{})
}

// wait blocks until cond (called under the lock) holds or ctx is done.
func (e *events) wait(ctx context.Context, what string, cond func(*events) bool) error {
	for {
		e.mu.Lock()
		ok, changed := cond(e), e.changed
		e.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		}
	}
}

// goClient is a go-sdk client session on the 2025-11-25 era that answers
// sampling ("go-sampled: <prompt>"), elicitation (answer "go-answer") and
// roots (file:///go-root), and records notifications.
type goClient struct {
	cs *mcp.ClientSession
	ev *events
	tr *http.Transport
}

// close ends the session and the transport's idle connections.
func (c *goClient) close() {
	_ = c.cs.Close()
	c.tr.CloseIdleConnections()
}

const goRoot = "file:///go-root"

func connectGo(ctx context.Context, url, name string) (*goClient, error) {
	ev := &events{changed: make(chan struct{})}
	client := mcp.NewClient(&mcp.Implementation{Name: name, Version: "1"}, &mcp.ClientOptions{
		CreateMessageHandler: func(_ context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			prompt := ""
			if n := len(req.Params.Messages); n > 0 {
				if tc, ok := req.Params.Messages[n-1].Content.(*mcp.TextContent); ok {
					prompt = tc.Text
				}
			}
			return &mcp.CreateMessageResult{Model: "go-model", Role: "assistant", Content: &mcp.TextContent{Text: "go-sampled: " + prompt}}, nil
		},
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"answer": "go-answer"}}, nil
		},
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			ev.add(func(e *events) { e.progress = append(e.progress, req.Params.Message) })
		},
		LoggingMessageHandler: func(_ context.Context, req *mcp.LoggingMessageRequest) {
			ev.add(func(e *events) { e.logs = append(e.logs, fmt.Sprint(req.Params.Data)) })
		},
		ResourceUpdatedHandler: func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
			ev.add(func(e *events) { e.updated = append(e.updated, req.Params.URI) })
		},
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			ev.add(func(e *events) { e.toolsChanged++ })
		},
	})
	client.AddRoots(&mcp.Root{URI: goRoot, Name: "go-root"})
	tr := &http.Transport{}
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: tr}},
		&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		tr.CloseIdleConnections()
		return nil, fmt.Errorf("connect: %w", err)
	}
	return &goClient{cs: cs, ev: ev, tr: tr}, nil
}

// call calls a tool and returns its text; a tool error is an error.
func (c *goClient) call(ctx context.Context, name string, args map[string]any, meta mcp.Meta) (*mcp.CallToolResult, string, error) {
	res, err := c.cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args, Meta: meta})
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", name, err)
	}
	var b strings.Builder
	for _, ct := range res.Content {
		if tc, ok := ct.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	if res.IsError {
		return res, b.String(), fmt.Errorf("%s: tool error: %s", name, b.String())
	}
	return res, b.String(), nil
}

// tools lists the session's tool names.
func (c *goClient) tools(ctx context.Context) ([]string, error) {
	var names []string
	for tl, err := range c.cs.Tools(ctx, nil) {
		if err != nil {
			return nil, err
		}
		names = append(names, tl.Name)
	}
	return names, nil
}

// goFlow is one interactive flow for the go-sdk client.
type goFlow struct {
	name string
	run  func(ctx context.Context, fx *fixture, c *goClient) error
}

var goFlows = []goFlow{
	{"progress", goProgress},
	{"logging", goLogging},
	{"sampling", func(ctx context.Context, _ *fixture, c *goClient) error {
		return c.expect(ctx, "inter_sample", map[string]any{"tag": "go"}, "sampled go-sampled: sample go")
	}},
	{"elicitation", func(ctx context.Context, _ *fixture, c *goClient) error {
		return c.expect(ctx, "inter_elicit", map[string]any{"tag": "go"}, "elicited accept go-answer")
	}},
	{"roots", func(ctx context.Context, _ *fixture, c *goClient) error {
		return c.expect(ctx, "inter_roots", nil, "roots "+goRoot)
	}},
	{"subscription", goSubscription},
	{"list_changed", goListChanged},
	{"tool_search", goToolSearch},
	{"tasks", goTasks},
}

// expect calls a tool and checks its text for want.
func (c *goClient) expect(ctx context.Context, name string, args map[string]any, want string) error {
	_, text, err := c.call(ctx, name, args, nil)
	return wantText(text, err, want)
}

func wantText(text string, err error, want string) error {
	if err != nil {
		return err
	}
	if !strings.Contains(text, want) {
		return fmt.Errorf("result %q, want %q in it", text, want)
	}
	return nil
}

func goProgress(ctx context.Context, _ *fixture, c *goClient) error {
	_, text, err := c.call(ctx, "inter_progress", map[string]any{"tag": "gop"}, mcp.Meta{"progressToken": "go-progress"})
	if err := wantText(text, err, "progress done gop"); err != nil {
		return err
	}
	// Progress rides the call's stream before its result, but the client
	// may run its handler after CallTool returned.
	var got []string
	err = c.ev.wait(ctx, "three progress notifications", func(e *events) bool {
		got = slices.DeleteFunc(slices.Clone(e.progress), func(m string) bool { return !strings.HasPrefix(m, "gop ") })
		return len(got) >= 3
	})
	if err == nil && !slices.Equal(got, []string{"gop 1", "gop 2", "gop 3"}) {
		err = fmt.Errorf("progress messages %q, want gop 1, 2, 3 once each in order", got)
	}
	return err
}

func goLogging(ctx context.Context, _ *fixture, c *goClient) error {
	if err := c.cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "info"}); err != nil {
		return fmt.Errorf("logging/setLevel: %w", err)
	}
	if err := c.expect(ctx, "inter_log", map[string]any{"tag": "gol"}, "logged gol"); err != nil {
		return err
	}
	return c.ev.wait(ctx, "the log message", func(e *events) bool { return slices.Contains(e.logs, "log gol") })
}

func goSubscription(ctx context.Context, _ *fixture, c *goClient) error {
	if err := c.cs.Subscribe(ctx, &mcp.SubscribeParams{URI: mcptest.FlowResource}); err != nil {
		return fmt.Errorf("subscribe: %w", err)
	}
	if err := c.expect(ctx, "inter_touch", map[string]any{"uri": mcptest.FlowResource}, "touched"); err != nil {
		return err
	}
	if err := c.ev.wait(ctx, "notifications/resources/updated", func(e *events) bool {
		return slices.Contains(e.updated, mcptest.FlowResource)
	}); err != nil {
		return err
	}
	if err := c.cs.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: mcptest.FlowResource}); err != nil {
		return fmt.Errorf("unsubscribe: %w", err)
	}
	return nil
}

// goListChanged: a reload that adds the extra server, then one that
// removes it; each reaches the session as tools/list_changed.
func goListChanged(ctx context.Context, fx *fixture, c *goClient) error {
	for _, step := range []struct {
		extra bool
		what  string
	}{{true, "extra_ping listed"}, {false, "extra_ping gone"}} {
		c.ev.mu.Lock()
		before := c.ev.toolsChanged
		c.ev.mu.Unlock()
		if err := fx.set.WriteConfig(fx.config(cfgOpts{extra: step.extra})); err != nil {
			return err
		}
		if err := c.ev.wait(ctx, "tools/list_changed", func(e *events) bool { return e.toolsChanged > before }); err != nil {
			return err
		}
		names, err := c.tools(ctx)
		if err != nil {
			return fmt.Errorf("tools/list: %w", err)
		}
		if slices.Contains(names, "extra_ping") != step.extra {
			return fmt.Errorf("after the reload: want %s, tools are %v", step.what, names)
		}
	}
	return nil
}

// goToolSearch: with tool_search on, a new session lists tool_search
// alone, cannot call a deferred tool, promotes it with a query (and gets
// tools/list_changed), then lists and calls it.
func goToolSearch(ctx context.Context, fx *fixture, _ *goClient) (err error) {
	if err := fx.set.WriteConfig(fx.config(cfgOpts{toolSearch: true})); err != nil {
		return err
	}
	defer func() { err = errors.Join(err, fx.set.WriteConfig(fx.config(cfgOpts{}))) }()
	s, err := connectGo(ctx, fx.set.URL(), "go-tool-search")
	if err != nil {
		return err
	}
	defer s.close()
	names, err := s.tools(ctx)
	if err != nil {
		return fmt.Errorf("tools/list: %w", err)
	}
	if !slices.Contains(names, "tool_search") || slices.Contains(names, "inter_echo") {
		return fmt.Errorf("tools before a search: %v, want tool_search and no inter_echo", names)
	}
	if _, text, err := s.call(ctx, "inter_echo", map[string]any{"text": "x"}, nil); err == nil || !strings.Contains(text, "deferred") {
		return fmt.Errorf("calling a deferred tool: %q %v, want the deferred error", text, err)
	}
	if err := s.expect(ctx, "tool_search", map[string]any{"query": "select:inter_echo"}, "inter_echo"); err != nil {
		return err
	}
	if err := s.ev.wait(ctx, "tools/list_changed", func(e *events) bool { return e.toolsChanged > 0 }); err != nil {
		return err
	}
	if names, err = s.tools(ctx); err != nil || !slices.Contains(names, "inter_echo") {
		return fmt.Errorf("tools after the search: %v %v, want inter_echo", names, err)
	}
	return s.expect(ctx, "inter_echo", map[string]any{"text": "promoted"}, "promoted")
}

// goTasks: a durable task submitted, seen running, released, seen
// completed (a resources/updated on its resource, then get_background_task
// and list_background_tasks).
func goTasks(ctx context.Context, fx *fixture, c *goClient) error {
	res, _, err := c.call(ctx, "jobs_submit_job", map[string]any{"input": "go-task"}, nil)
	if err != nil {
		return err
	}
	var sub struct {
		TaskID string `json:"task_id"`
	}
	if b, _ := json.Marshal(res.StructuredContent); json.Unmarshal(b, &sub) != nil || sub.TaskID == "" {
		return fmt.Errorf("submit answered %+v", res.StructuredContent)
	}
	uri := "mux://tasks/" + sub.TaskID
	if err := c.cs.Subscribe(ctx, &mcp.SubscribeParams{URI: uri}); err != nil {
		return fmt.Errorf("subscribe %s: %w", uri, err)
	}
	if st, err := taskStatus(ctx, c, sub.TaskID); err != nil || st == "completed" {
		return fmt.Errorf("held task: status %q %v", st, err)
	}
	fx.jobs.Release("go-task")
	if err := c.ev.wait(ctx, "the task resource updated", func(e *events) bool { return slices.Contains(e.updated, uri) }); err != nil {
		return err
	}
	if err := waitTaskStatus(ctx, c, sub.TaskID, "completed"); err != nil {
		return err
	}
	return c.expect(ctx, "list_background_tasks", map[string]any{}, sub.TaskID)
}

func taskStatus(ctx context.Context, c *goClient, id string) (string, error) {
	res, _, err := c.call(ctx, "get_background_task", map[string]any{"task_id": id}, nil)
	if err != nil {
		return "", err
	}
	var st struct {
		Status string `json:"status"`
	}
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &st); err != nil {
		return "", err
	}
	return st.Status, nil
}

// waitTaskStatus asks get_background_task until the task has status want:
// the resource update may come before the completed state is readable.
func waitTaskStatus(ctx context.Context, c *goClient, id, want string) error {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		st, err := taskStatus(ctx, c, id)
		if err != nil {
			return err
		}
		if st == want {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("task %s is %q, want %q: %w", id, st, want, ctx.Err())
		case <-tick.C:
		}
	}
}

// runGoFlows connects a go-sdk client through url and runs every flow as
// a subtest.
func runGoFlows(t *testing.T, fx *fixture) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := connectGo(ctx, fx.set.URL(), "go-flows")
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	for _, f := range goFlows {
		t.Run(f.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			if err := f.run(ctx, fx, c); err != nil {
				if errors.Is(err, mcp.ErrSessionMissing) || strings.Contains(err.Error(), "session not found") {
					t.Errorf("session lost: %v", err)
					return
				}
				t.Error(err)
			}
		})
	}
}
