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
	"github.com/mcp-mux/mcp-mux/internal/secret"
)

func TestCallLogLogsOneLineWithoutArgumentsOrResults(t *testing.T) {
	var buf bytes.Buffer
	log := hclog.New(&hclog.LoggerOptions{Output: &buf, JSONFormat: true, Level: hclog.Trace})
	// "audit" is the call log's config name.
	ids := secret.NewIDHash("calllog-test-key")
	ics, _ := interceptor.Build([]string{"audit"}, interceptor.Options{Logger: log, User: ids.Of})
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
			t.Fatalf("%d call log lines: %q", len(lines), buf.String())
		}
		var rec map[string]any
		if err := json.Unmarshal([]byte(lines[0]), &rec); err != nil {
			t.Fatal(err)
		}
		for k, v := range map[string]string{"user": ids.Of("alice"), "thread": "t1", "server": "web", "tool": "web_search", "outcome": string(tc.want)} {
			if rec[k] != v {
				t.Errorf("%s = %v, want %v (%v)", k, rec[k], v, rec)
			}
		}
		if _, ok := rec["duration_ms"]; !ok {
			t.Error("no duration")
		}
		if strings.Contains(lines[0], "result-secret-1234") {
			t.Error("call log line contains result content")
		}
		if strings.Contains(lines[0], "alice") {
			t.Errorf("call log line names the caller plainly: %s", lines[0])
		}
	}
}

// TestCallLogShowsNoCallerUnlessTold: without a User mapping, or when it
// shows a caller as "" (telemetry.audit.user_id none), the line has no
// user at all (issue 39: it logged the plain user while the records hashed
// it).
func TestCallLogShowsNoCallerUnlessTold(t *testing.T) {
	for name, user := range map[string]func(string) string{"nil": nil, "none": func(string) string { return "" }} {
		var buf bytes.Buffer
		log := hclog.New(&hclog.LoggerOptions{Output: &buf, JSONFormat: true, Level: hclog.Trace})
		ics, _ := interceptor.Build([]string{"audit"}, interceptor.Options{Logger: log, User: user})
		c := &interceptor.Call{User: "alice", Thread: "t1", Server: "web", Tool: "web_search", RawTool: "search"}
		_, _ = interceptor.Chain(context.Background(), ics, c, func(context.Context) (json.RawMessage, error) {
			return json.RawMessage(`{"content":[]}`), nil
		})
		if strings.Contains(buf.String(), "alice") || strings.Contains(buf.String(), `"user"`) || !strings.Contains(buf.String(), "tool call") {
			t.Errorf("%s: %s", name, buf.String())
		}
	}
}
