package proxy_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/mcp-mux/mcp-mux/internal/interceptor"
	"github.com/mcp-mux/mcp-mux/internal/mcptest"
	"github.com/mcp-mux/mcp-mux/internal/proxy"
	"github.com/mcp-mux/mcp-mux/internal/taskpoll"
)

// taskOptions are proxy.Options with durable tasks on an embedded store in
// a temporary directory, closed after the mux.
func taskOptions(t *testing.T) proxy.Options {
	t.Helper()
	store, err := taskpoll.OpenBoltStore(taskpoll.BoltOptions{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	return proxy.Options{TaskStore: store, TaskConfig: taskpoll.Config{}}
}

// Issue 17, attack 1: a 2026-07-28 tools/call of a built-in task tool
// panicked on the built-in route's missing server (ownerOf), on a go-sdk
// goroutine nothing recovered, and the process exited. Each call now gets
// the tool's answer, and the mux keeps serving.
func TestModernBuiltinTaskToolsAnswer(t *testing.T) {
	up := mcptest.ServeHTTP(t, mcptest.NewServer("alpha"))
	m := startMux(t, `{"mcpServers": {"alpha": {"type": "http", "url": "`+up.URL+`/mcp"}},
		"mcp_tasks": {"enabled": true}, "inbound": {"auth": {"mode": "api_keys", "keys": {"alice": "k1"}}}}`, taskOptions(t))
	url := m.ts.URL + "/mcp"
	auth := map[string]string{"Authorization": "Bearer k1"}
	for _, c := range []struct{ name, args string }{
		{taskpoll.ToolList, `{}`},
		{taskpoll.ToolGet, `{"task_id":"mcp-task-00000000000000000000000000000000"}`},
		{taskpoll.ToolCancel, `{}`},
	} {
		status, r := modernCall(t, url, auth, `{}`, "tools/call", c.name, `"name":"`+c.name+`","arguments":`+c.args)
		if status != http.StatusOK || r.Error != nil || !strings.Contains(string(r.Result), `"content"`) {
			t.Errorf("%s: HTTP %d %s %+v, want a tool result", c.name, status, r.Result, r.Error)
		}
	}
	// Still serving, both eras.
	if status, r := modernCall(t, url, auth, `{}`, "tools/call", "alpha_echo", `"name":"alpha_echo","arguments":{"text":"hi"}`); status != http.StatusOK || r.Error != nil {
		t.Fatalf("after the built-ins: HTTP %d %+v", status, r.Error)
	}
	if status, _, body := rawRequest(t, http.MethodPost, url, auth, initializeBody); status != http.StatusOK {
		t.Fatalf("initialize after the built-ins: HTTP %d %s", status, body)
	}
	if got := metricValue(scrape(t, m.ts.URL), `mcp_mux_panics_total{where="sdk"}`); got != 0 {
		t.Errorf("panics counted: %v", got)
	}
}

// panicRecords counts the log records of recovered panics.
func panicRecords(logs string) []string {
	var out []string
	for line := range strings.SplitSeq(logs, "\n") {
		if strings.Contains(line, "panic while serving a request") {
			out = append(out, line)
		}
	}
	return out
}

// A panic while serving a call is that call's -32603 error with its id,
// in both eras and on every path a call takes, logged once with its stack
// (no argument values, not the panic's own value) and counted by where it
// was caught; the mux keeps serving.
func TestPanicAnswersInternalError(t *testing.T) {
	up := mcptest.ServeHTTP(t, mcptest.NewServer("alpha"))
	m := startMux(t, `{"mcpServers": {"alpha": {"type": "http", "url": "`+up.URL+`/mcp"}}}`, proxy.Options{})
	proxy.AddInterceptorForTest(m.srv, func(ctx context.Context, c *interceptor.Call, next interceptor.Next) (json.RawMessage, error) {
		if c.RawTool == "echo" {
			panic("secret-panic-value")
		}
		return next(ctx)
	})
	url := m.ts.URL + "/mcp"
	status, h, body := rawRequest(t, http.MethodPost, url, nil, strings.Replace(initializeBody, "2025-11-25", "2025-03-26", 1))
	sid := h.Get("Mcp-Session-Id")
	if status != http.StatusOK || sid == "" {
		t.Fatalf("initialize: HTTP %d %s", status, body)
	}
	legacy := map[string]string{"Mcp-Session-Id": sid, "Mcp-Protocol-Version": "2025-03-26"}
	rawRequest(t, http.MethodPost, url, legacy, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	echo := func(id string) string {
		return `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"alpha_echo","arguments":{"text":"hi"}}}`
	}
	modernEcho := func(id, caps string) string {
		return `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{` + modernMeta(caps) + `,"name":"alpha_echo","arguments":{"text":"hi"}}}`
	}
	for _, c := range []struct {
		name, where string
		hdr         map[string]string
		body, id    string
	}{
		{"legacy fast path", "http", legacy, echo("7"), "7"},
		{"legacy batch, go-sdk's handler", "sdk", legacy, "[" + echo(`"b-1"`) + "]", `"b-1"`},
		{"2026-07-28 fast path", "http", modernHeaders("tools/call", "alpha_echo"), modernEcho(`"m-1"`, `{}`), `"m-1"`},
		{"2026-07-28 through go-sdk, bridged", "bridge", modernHeaders("tools/call", "alpha_echo"), modernEcho("42", tasksCaps), "42"},
	} {
		before := metricValue(scrape(t, m.ts.URL), `mcp_mux_panics_total{where="`+c.where+`"}`)
		logsBefore := len(panicRecords(m.logs.String()))
		status, _, body := rawRequest(t, http.MethodPost, url, c.hdr, c.body)
		r := reply(t, body)
		if status != http.StatusOK || string(r.ID) != c.id || r.Error == nil || r.Error.Code != -32603 || r.Error.Message != "internal error" {
			t.Errorf("%s: HTTP %d %s, want -32603 internal error for id %s", c.name, status, body, c.id)
		}
		if after := metricValue(scrape(t, m.ts.URL), `mcp_mux_panics_total{where="`+c.where+`"}`); after != before+1 {
			t.Errorf("%s: mcp_mux_panics_total{where=%q} %v → %v, want one more", c.name, c.where, before, after)
		}
		recs := panicRecords(m.logs.String())[logsBefore:]
		if len(recs) != 1 || !strings.Contains(recs[0], `"where":"`+c.where+`"`) || !strings.Contains(recs[0], "panic_test.go:") ||
			!strings.Contains(recs[0], "callpath.(*Router).Run") || !strings.Contains(recs[0], `"panic":"string"`) {
			t.Errorf("%s: want one log record with the stack, got %q", c.name, recs)
		}
		if strings.Contains(m.logs.String(), "secret-panic-value") || strings.Contains(recs[0], "0xc0") {
			t.Errorf("%s: the log carries the panic's value or argument words: %q", c.name, recs)
		}
		// Still serving: another tool, in both eras.
		if _, r := modernCall(t, url, nil, `{}`, "tools/call", "alpha_add", `"name":"alpha_add","arguments":{"a":1,"b":2}`); r.Error != nil {
			t.Fatalf("%s: the mux stopped serving: %+v", c.name, r.Error)
		}
	}
}
