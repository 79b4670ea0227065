package proxy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/internal/audit"
	"github.com/mcp-mux/mcp-mux/internal/config"
	"github.com/mcp-mux/mcp-mux/internal/mcptest"
	"github.com/mcp-mux/mcp-mux/internal/processor"
	"github.com/mcp-mux/mcp-mux/internal/proxy"
	"github.com/mcp-mux/mcp-mux/internal/taskpoll"
)

// countingEcho serves, in both eras, "echo": it counts its runs by the
// argument "id" and answers "mode=<mode> id=<id> mail=alice@example.com".
type countingEcho struct {
	mu   sync.Mutex
	runs map[string]int
	url  string
}

func newCountingEcho(t *testing.T) *countingEcho {
	u := &countingEcho{runs: map[string]int{}}
	s := mcp.NewServer(&mcp.Implementation{Name: "echo", Version: "1"}, nil)
	type in struct {
		Mode string `json:"mode"`
		ID   string `json:"id"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "echo"}, func(_ context.Context, _ *mcp.CallToolRequest, a in) (*mcp.CallToolResult, any, error) {
		u.mu.Lock()
		u.runs[a.ID]++
		u.mu.Unlock()
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("mode=%s id=%s mail=alice@example.com", a.Mode, a.ID)}}}, nil, nil
	})
	u.url = mcptest.ServeHTTPBothEras(t, s).URL + "/mcp"
	return u
}

func (u *countingEcho) ran(id string) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.runs[id]
}

// guardProcessor is a processor scripted by the call's "mode" argument
// (request phase) and by the result's text (response phase).
func guardProcessor(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var c processor.Call
		body, _ := io.ReadAll(r.Body)
		if json.Unmarshal(body, &c) != nil || c.Tool != "echo" || !strings.HasPrefix(c.Caller, "hmac:") {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		if c.Phase == processor.Response {
			res := string(c.Result)
			switch {
			case strings.Contains(res, "mode=mask"):
				_, _ = io.WriteString(w, `{"action":"mutate","result":{"content":[{"type":"text","text":"[masked]"}]}}`)
			case strings.Contains(res, "mode=nonresult"):
				_, _ = io.WriteString(w, `{"action":"mutate","result":{"text":"not a result"}}`)
			default:
				_, _ = io.WriteString(w, `{"action":"pass"}`)
			}
			return
		}
		var args struct{ Mode, ID string }
		_ = json.Unmarshal(c.Arguments, &args)
		switch args.Mode {
		case "deny":
			_, _ = io.WriteString(w, `{"action":"deny","reason":"no way\u001b[2J"}`)
		case "mutate":
			_, _ = fmt.Fprintf(w, `{"action":"mutate","arguments":{"mode":"mutated","id":%q}}`, args.ID)
		case "malformed":
			_, _ = io.WriteString(w, `{"action":`)
		case "slow":
			<-r.Context().Done() // never answers
		default:
			_, _ = io.WriteString(w, `{"action":"pass"}`)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// processorsConfig has servers "a" and "b" on up, each with its own
// processor at url: a's fails closed, b's open.
func processorsConfig(up, url string) string {
	return fmt.Sprintf(`{"mcpServers": {
	  "a": {"type": "http", "url": %[1]q, "processors": [{"name": "guard", "url": %[2]q, "phase": "both", "timeout_ms": 300}]},
	  "b": {"type": "http", "url": %[1]q, "processors": [{"name": "guard", "url": %[2]q, "phase": "both", "timeout_ms": 300, "on_error": "allow"}]}}}`, up, url)
}

// toolReply is a tools/call's result as one path answers it.
type toolReply struct {
	IsError bool `json:"isError"`
	Content []struct {
		Type, Text string
	} `json:"content"`
}

func (r toolReply) text() string {
	var parts []string
	for _, c := range r.Content {
		parts = append(parts, c.Text)
	}
	return strings.Join(parts, "\n")
}

// processorPaths are the ways a tools/call reaches the pipeline: the
// 2025-11-25 fast path, the SDK path (a 2024-11-05 session), the
// 2026-07-28 fast and SDK paths, and go-sdk clients of both eras.
func processorPaths(t *testing.T, m, modernSDK *mux) map[string]func(t *testing.T, tool, args string) toolReply {
	session := func(version string) func(t *testing.T, tool, args string) toolReply {
		sid := rawSession(t, m.ts.URL, version)
		return func(t *testing.T, tool, args string) toolReply {
			resp, err := rawPost(context.Background(), m.ts.URL, sid, version,
				`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"`+tool+`","arguments":`+args+`}}`)
			if err != nil {
				t.Fatal(err)
			}
			rs := readReplies(t, resp)
			if len(rs) != 1 {
				t.Fatalf("%d replies", len(rs))
			}
			b, _ := json.Marshal(rs[0])
			var r rpcReply
			_ = json.Unmarshal(b, &r)
			return decodeToolReply(t, r)
		}
	}
	modern := func(m *mux) func(t *testing.T, tool, args string) toolReply {
		return func(t *testing.T, tool, args string) toolReply {
			_, _, body := postModern(t, m.ts.URL+"/mcp", modernHeaders("tools/call", tool), modernCallBody("{}", tool, args))
			return decodeToolReply(t, reply(t, body))
		}
	}
	sdk := func(pv string) func(t *testing.T, tool, args string) toolReply {
		cs := (&asker{}).connect(t, m.ts.URL, pv, false)
		return func(t *testing.T, tool, args string) toolReply {
			var a map[string]any
			_ = json.Unmarshal([]byte(args), &a)
			res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: tool, Arguments: a})
			if err != nil {
				t.Fatalf("call %s: %v", tool, err)
			}
			b, _ := json.Marshal(res)
			var r toolReply
			_ = json.Unmarshal(b, &r)
			return r
		}
	}
	return map[string]func(t *testing.T, tool, args string) toolReply{
		"2025-11-25 fast path": session("2025-11-25"),
		"2025-11-25 SDK path":  session("2024-11-05"),
		"2026-07-28 fast path": modern(m),
		"2026-07-28 SDK path":  modern(modernSDK),
		"go-sdk 2025-11-25":    sdk("2025-11-25"),
		"go-sdk 2026-07-28":    sdk(""),
	}
}

func decodeToolReply(t *testing.T, r rpcReply) toolReply {
	t.Helper()
	if r.Error != nil {
		t.Fatalf("JSON-RPC error %d %s", r.Error.Code, r.Error.Message)
	}
	var tr toolReply
	if err := json.Unmarshal(r.Result, &tr); err != nil {
		t.Fatalf("result %s: %v", r.Result, err)
	}
	return tr
}

// TestProcessorsEndToEnd: a real processor over HTTP, on every path of
// both eras: a request-phase deny is a tool error naming the processor
// and its (cleaned) reason and the upstream never runs; a mutation of the
// arguments is what the upstream gets; a mutation of the result is what
// the caller gets; a processor that never answers fails the call closed
// or open as configured; a malformed answer and a non-result mutation are
// errors that fail closed; every decision is counted.
func TestProcessorsEndToEnd(t *testing.T) {
	up := newCountingEcho(t)
	pr := guardProcessor(t)
	cfg := processorsConfig(up.url, pr.URL)
	auditPath := filepath.Join(t.TempDir(), "audit.jsonl")
	a, err := audit.New(audit.Options{Enabled: true, Output: auditPath})
	if err != nil {
		t.Fatal(err)
	}
	m := startMux(t, cfg, proxy.Options{Audit: a})
	modernSDK := startMux(t, cfg, proxy.Options{DisableModernFastPath: true})
	paths := processorPaths(t, m, modernSDK)
	for name, call := range paths {
		t.Run(name, func(t *testing.T) {
			id := strings.ReplaceAll(name, " ", "_")
			args := func(mode string) string { return fmt.Sprintf(`{"mode":%q,"id":"%s-%s"}`, mode, id, mode) }

			r := call(t, "a_echo", args("deny"))
			if !r.IsError || !strings.Contains(r.text(), `processor "guard" denied the call: no way[2J`) || strings.Contains(r.text(), "\x1b") {
				t.Errorf("deny: %+v", r)
			}
			if n := up.ran(id + "-deny"); n != 0 {
				t.Errorf("the upstream ran %d times after a deny", n)
			}
			if r := call(t, "a_echo", args("mutate")); r.IsError || !strings.Contains(r.text(), "mode=mutated id="+id+"-mutate") {
				t.Errorf("mutated arguments: %+v", r)
			}
			if r := call(t, "a_echo", args("mask")); r.IsError || r.text() != "[masked]" {
				t.Errorf("mutated result: %+v", r)
			}
			if r := call(t, "a_echo", args("pass")); r.IsError || !strings.Contains(r.text(), "mail=alice@example.com") {
				t.Errorf("pass: %+v", r)
			}
			r = call(t, "a_echo", args("slow"))
			if !r.IsError || !strings.Contains(r.text(), `processor "guard" could not decide (no answer within 300ms); the call is denied`) || up.ran(id+"-slow") != 0 {
				t.Errorf("slow, on_error deny: %+v; upstream ran %d times", r, up.ran(id+"-slow"))
			}
			if r := call(t, "b_echo", args("slow")); r.IsError || up.ran(id+"-slow") != 1 {
				t.Errorf("slow, on_error allow: %+v; upstream ran %d times", r, up.ran(id+"-slow"))
			}
			if r := call(t, "a_echo", args("malformed")); !r.IsError || !strings.Contains(r.text(), "could not decide") || up.ran(id+"-malformed") != 0 {
				t.Errorf("malformed answer: %+v", r)
			}
			r = call(t, "a_echo", args("nonresult"))
			if !r.IsError || !strings.Contains(r.text(), "not a valid CallToolResult") || !strings.Contains(r.text(), "the result is denied") ||
				strings.Contains(r.text(), "alice@example.com") {
				t.Errorf("a non-result mutation: %+v", r)
			}
		})
	}
	want := float64(len(paths))
	for _, series := range []string{
		`mcp_mux_processor_decisions_total{action="deny",phase="request",processor="guard"}`,
		`mcp_mux_processor_decisions_total{action="mutate",phase="response",processor="guard"}`,
		`mcp_mux_processor_decisions_total{action="error_allowed",phase="request",processor="guard"}`,
	} {
		got := metricValue(scrape(t, m.ts.URL), series) + metricValue(scrape(t, modernSDK.ts.URL), series)
		if got != want {
			t.Errorf("%s = %v, want %v (one a path)", series, got, want)
		}
	}
	// The audit records name each processor's decision; a deny is the record's denial.
	recs, _ := auditRecords(t, a, auditPath)
	denied, masked := 0, 0
	for _, r := range recs {
		for _, p := range r.Processors {
			switch {
			case p.Name != "guard":
				t.Errorf("record of processor %q", p.Name)
			case p.Phase == processor.Request && p.Action == processor.Deny && r.Denial == "processor: guard" && r.Outcome == audit.Denied:
				denied++
			case p.Phase == processor.Response && p.Action == processor.Mutate:
				masked++
			}
		}
	}
	if want := len(paths) - 1; denied != want || masked != want { // the 2026-07-28 SDK path's mux has no auditor
		t.Errorf("records: %d request-phase denials, %d response-phase mutations; want %d each", denied, masked, want)
	}
}

// TestProcessorsDurableTaskSubmit: a durable task's submit goes through
// the request phase in both eras: a deny creates no task (the upstream's
// submit tool never runs), a pass submits it.
func TestProcessorsDurableTaskSubmit(t *testing.T) {
	up := &mcptest.TaskServer{PollsToComplete: 1}
	upTS := mcptest.ServeHTTP(t, up.MCP())
	pr := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var c processor.Call
		body, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(body, &c)
		if c.Phase == processor.Request && c.Tool == "submit_job" && strings.Contains(string(c.Arguments), `"deny`) {
			_, _ = io.WriteString(w, `{"action":"deny","reason":"no jobs like that"}`)
			return
		}
		_, _ = io.WriteString(w, `{"action":"pass"}`)
	}))
	t.Cleanup(pr.Close)
	st, err := taskpoll.OpenBoltStore(taskpoll.BoltOptions{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	_, ts := taskMux(t, `{"mcpServers": {"jobs": `+mcptest.TaskServerJSON(upTS.URL+"/mcp", "")+`},
		"mcp_tasks": {"enabled": true}, "processors": [{"name": "jobs-guard", "url": "`+pr.URL+`", "phase": "request"}]}`, st)
	for _, pv := range []string{"2025-11-25", ""} {
		cs := (&asker{}).connect(t, ts.URL, pv, false)
		before := up.Submits()
		res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "jobs_submit_job", Arguments: map[string]any{"input": "deny-" + pv}})
		if err != nil || !res.IsError || !strings.Contains(resultText(res), `processor "jobs-guard" denied the call: no jobs like that`) || up.Submits() != before {
			t.Fatalf("%q: denied submit: %+v %v; the upstream started %d jobs", pv, res, err, up.Submits()-before)
		}
		res, err = cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "jobs_submit_job", Arguments: map[string]any{"input": "ok-" + pv}})
		if err != nil || res.IsError || up.Submits() != before+1 {
			t.Fatalf("%q: passed submit: %+v %v; the upstream started %d jobs", pv, res, err, up.Submits()-before)
		}
	}
}

// TestProcessorsReload: a reload that adds, changes or removes processors
// applies to the next call, on the same upstream session.
func TestProcessorsReload(t *testing.T) {
	up := newCountingEcho(t)
	pr := guardProcessor(t)
	plain := fmt.Sprintf(`{"mcpServers": {"a": {"type": "http", "url": %q}}}`, up.url)
	m := startMux(t, plain, proxy.Options{})
	cs := (&asker{}).connect(t, m.ts.URL, "2025-11-25", false)
	call := func(id string) *mcp.CallToolResult {
		res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "a_echo", Arguments: map[string]any{"mode": "deny", "id": id}})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	apply := func(cfg string) {
		c, err := config.Parse([]byte(cfg), config.LoadOptions{Filename: "test.json"})
		if err != nil {
			t.Fatal(err)
		}
		if err := m.srv.Apply(c); err != nil {
			t.Fatal(err)
		}
	}
	if res := call("before"); res.IsError || up.ran("before") != 1 {
		t.Fatalf("no processors: %s", resultText(res))
	}
	apply(fmt.Sprintf(`{"mcpServers": {"a": {"type": "http", "url": %q}}, "processors": [{"name": "guard", "url": %q, "phase": "request"}]}`, up.url, pr.URL))
	if res := call("top"); !res.IsError || !strings.Contains(resultText(res), `processor "guard" denied`) || up.ran("top") != 0 {
		t.Fatalf("a top-level processor added by a reload: %s", resultText(res))
	}
	apply(fmt.Sprintf(`{"mcpServers": {"a": {"type": "http", "url": %q, "processors": [{"name": "own", "url": %q, "phase": "request"}]}}}`, up.url, pr.URL))
	if res := call("own"); !res.IsError || !strings.Contains(resultText(res), `processor "own" denied`) || up.ran("own") != 0 {
		t.Fatalf("a server's processor added by a reload: %s", resultText(res))
	}
	apply(plain)
	if res := call("after"); res.IsError || up.ran("after") != 1 {
		t.Fatalf("processors removed by a reload: %s", resultText(res))
	}
}
