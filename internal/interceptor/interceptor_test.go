package interceptor_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/mcp-mux/mcp-mux/internal/interceptor"
)

func TestBuildSkipsUnknownNames(t *testing.T) {
	ics, problems := interceptor.Build([]string{"my_package.mcp.auth:build_auth_interceptor", "audit", "nope"}, interceptor.Options{})
	if len(ics) != 1 {
		t.Fatalf("built %d interceptors, want 1 (audit)", len(ics))
	}
	if len(problems) != 2 || !strings.Contains(problems[0].Error(), "my_package.mcp.auth:build_auth_interceptor") || !strings.Contains(problems[1].Error(), `"nope"`) {
		t.Fatalf("problems = %v", problems)
	}
}

func TestChainOrderFirstIsOutermost(t *testing.T) {
	var order []string
	mk := func(name string) interceptor.Interceptor {
		return func(ctx context.Context, c *interceptor.Call, next interceptor.Next) (json.RawMessage, error) {
			order = append(order, name+">")
			res, err := next(ctx)
			order = append(order, "<"+name)
			return res, err
		}
	}
	_, err := interceptor.Chain(context.Background(), []interceptor.Interceptor{mk("a"), mk("b")}, &interceptor.Call{},
		func(context.Context) (json.RawMessage, error) {
			order = append(order, "call")
			return json.RawMessage(`{}`), nil
		})
	if err != nil || strings.Join(order, " ") != "a> b> call <b <a" {
		t.Fatalf("order %v err %v", order, err)
	}
}

func TestAuditLogsOneLineWithoutArgumentsOrResults(t *testing.T) {
	var buf bytes.Buffer
	log := hclog.New(&hclog.LoggerOptions{Output: &buf, JSONFormat: true, Level: hclog.Trace})
	ics, _ := interceptor.Build([]string{"audit"}, interceptor.Options{Logger: log})
	c := &interceptor.Call{User: "alice", Thread: "t1", Server: "web", Tool: "web_search", RawTool: "search"}
	cases := []struct {
		res  string
		err  error
		want interceptor.Outcome
	}{
		{`{"content":[{"type":"text","text":"result-secret-1234"}]}`, nil, interceptor.OK},
		{`{"content":[],"isError":true}`, nil, interceptor.ToolError},
		{``, errors.New("boom"), interceptor.Error},
	}
	for _, tc := range cases {
		buf.Reset()
		_, _ = interceptor.Chain(context.Background(), ics, c, func(context.Context) (json.RawMessage, error) {
			return json.RawMessage(tc.res), tc.err
		})
		lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
		if len(lines) != 1 {
			t.Fatalf("%d audit lines: %q", len(lines), buf.String())
		}
		var rec map[string]any
		if err := json.Unmarshal([]byte(lines[0]), &rec); err != nil {
			t.Fatal(err)
		}
		for k, v := range map[string]string{"user": "alice", "thread": "t1", "server": "web", "tool": "web_search", "outcome": string(tc.want)} {
			if rec[k] != v {
				t.Errorf("%s = %v, want %v (%v)", k, rec[k], v, rec)
			}
		}
		if _, ok := rec["duration_ms"]; !ok {
			t.Error("no duration")
		}
		if strings.Contains(lines[0], "result-secret-1234") {
			t.Error("audit line contains result content")
		}
	}
}
