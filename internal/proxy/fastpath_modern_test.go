package proxy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/internal/mcptest"
	"github.com/mcp-mux/mcp-mux/internal/proxy"
)

// fastAndSlow are two muxes on the same upstreams: one with the 2026-07-28
// fast path, one that sends every modern request through the SDK.
type fastAndSlow struct{ fast, slow string }

func startFastAndSlow(t *testing.T) fastAndSlow {
	t.Helper()
	srv := mcptest.NewServer("alpha")
	srv.AddPrompt(&mcp.Prompt{Name: "greet", Description: "Say hi"}, func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		return &mcp.GetPromptResult{}, nil
	})
	for i := range 3 {
		srv.AddResource(&mcp.Resource{URI: fmt.Sprintf("test://r/%d", i), Name: fmt.Sprint("r", i), MIMEType: "text/plain"},
			func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
				return &mcp.ReadResourceResult{}, nil
			})
	}
	srv.AddTool(&mcp.Tool{Name: "rpcfail", InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "bad <input> & \"more\"", Data: json.RawMessage(`{"why":"<x>"}`)}
		})
	srv.AddTool(&mcp.Tool{Name: "rpcfail200", InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) { // a code answered with HTTP 200
			return nil, &jsonrpc.Error{Code: -32001, Message: "server busy", Data: json.RawMessage(`{"retry_after":3,"why":"<x>"}`)}
		})
	srv.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: "test://t/{id}", Name: "t"},
		func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{}, nil
		})
	alpha := mcptest.ServeHTTP(t, srv)
	cfg := fmt.Sprintf(`{"mcpServers": {"alpha": {"type": "http", "url": %q}, "beta": {"type": "http", "url": %q}},
		"guardrails": {"enabled": true, "denied_tools": ["alpha_count"]}}`, alpha.URL+"/mcp", mrtrServer(t))
	fast := startMux(t, cfg, proxy.Options{PageSize: 2})
	slow := startMux(t, cfg, proxy.Options{PageSize: 2, DisableModernFastPath: true})
	return fastAndSlow{fast: fast.ts.URL + "/mcp", slow: slow.ts.URL + "/mcp"}
}

// postModern posts a 2026-07-28 request and returns the status, the
// response's Content-Type and body.
func postModern(t *testing.T, url string, hdr map[string]string, body string) (int, string, string) {
	t.Helper()
	status, h, b := rawRequest(t, http.MethodPost, url, hdr, body)
	return status, h.Get("Content-Type"), b
}

// modernCallBody is a tools/call with id 7 and the given capabilities.
func modernCallBody(caps, name, args string) string {
	return `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{` + modernMeta(caps) +
		`,"name":"` + name + `","arguments":` + args + `}}`
}

// The fast path answers exactly what the SDK path answers for the same
// upstream: the same result bytes (resultType added, structured content,
// tool errors, guardrail text, the catalog), the same errors with the same
// HTTP status. Only the framing differs: a fast-path response without
// notifications is plain JSON.
func TestModernFastPathMatchesSDKPath(t *testing.T) {
	fs := startFastAndSlow(t)
	cases := []struct {
		name, tool, body string
		fast             bool // answered by the fast path as a result
	}{
		{"echo", "alpha_echo", modernCallBody(`{}`, "alpha_echo", `{"text":"hi <&> ü \"q\""}`), true},
		{"echo, bridged", "alpha_echo", modernCallBody(`{"roots":{"listChanged":true},"elicitation":{}}`, "alpha_echo", `{"text":"bridged"}`), true},
		{"structured", "alpha_add", modernCallBody(`{}`, "alpha_add", `{"a":2,"b":40}`), true},
		{"tool error", "alpha_fail", modernCallBody(`{}`, "alpha_fail", `{}`), true},
		{"guardrail", "alpha_count", modernCallBody(`{}`, "alpha_count", `{}`), true},
		{"bad arguments", "alpha_add", modernCallBody(`{}`, "alpha_add", `{"a":"two"}`), true},
		{"string id", "alpha_echo", strings.Replace(modernCallBody(`{}`, "alpha_echo", `{"text":"s"}`), `"id":7`, `"id":"req-7"`, 1), true},
		{"modern upstream, no capability", "beta_ask", modernCallBody(`{}`, "beta_ask", `{}`), false},
		{"upstream JSON-RPC error", "alpha_rpcfail", modernCallBody(`{}`, "alpha_rpcfail", `{}`), false},
		{"upstream JSON-RPC error, HTTP 200", "alpha_rpcfail200", modernCallBody(`{}`, "alpha_rpcfail200", `{}`), false},
		{"tools/list", "", modernBody("tools/list", ""), true},
		{"prompts/list", "", modernBody("prompts/list", ""), true},
		{"resources/list", "", modernBody("resources/list", ""), true},
		{"resources/list, page 2", "", modernBody("resources/list", `"cursor":"Mg"`), true},
		{"resources/list, bad cursor", "", modernBody("resources/list", `"cursor":"!!"`), false},
		{"resources/templates/list", "", modernBody("resources/templates/list", ""), true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			method := "tools/call"
			if c.tool == "" {
				method = c.name
				method, _, _ = strings.Cut(method, ",")
			}
			hdr := modernHeaders(method, c.tool)
			fStatus, fCT, fBody := postModern(t, fs.fast, hdr, c.body)
			sStatus, sCT, sBody := postModern(t, fs.slow, hdr, c.body)
			if fStatus != sStatus {
				t.Fatalf("HTTP %d (fast) vs %d (SDK): %s | %s", fStatus, sStatus, fBody, sBody)
			}
			fr, sr := reply(t, fBody), reply(t, sBody)
			// The whole JSON-RPC messages match (id, result, error with its
			// code, message and data), member order aside.
			if f, s := wholeReply(t, fBody), wholeReply(t, sBody); f != s {
				t.Fatalf("fast path answered\n%s\nthe SDK path\n%s", f, s)
			}
			// An error with its own HTTP status is a plain JSON body on both
			// paths: byte for byte the same.
			if (fr.Error == nil) != (sr.Error == nil) || (fr.Error != nil && (*fr.Error != *sr.Error ||
				(fStatus != http.StatusOK && (fBody != sBody || fCT != sCT)))) {
				t.Fatalf("errors differ:\n%s %s\n%s %s", fCT, fBody, sCT, sBody)
			}
			if c.fast && (fCT != "application/json" || sCT != "text/event-stream" || fr.Result == nil) {
				t.Fatalf("want a fast-path JSON result and an SDK event stream, got %q and %q: %s", fCT, sCT, fBody)
			}
			if c.tool == "alpha_count" && !strings.Contains(string(fr.Result), "Guardrail denied: tool 'alpha_count' was blocked") {
				t.Fatalf("guardrail result %s", fr.Result)
			}
		})
	}
}

// wholeReply is the JSON-RPC response in body (a JSON body or an event
// stream), every member kept, re-encoded with its object members sorted.
func wholeReply(t *testing.T, body string) string {
	t.Helper()
	for _, line := range strings.Split(body, "\n") {
		line = strings.TrimPrefix(strings.TrimSpace(line), "data: ")
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) != nil || m["id"] == nil || (m["result"] == nil && m["error"] == nil) {
			continue
		}
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	t.Fatalf("no JSON-RPC response in %q", body)
	return ""
}

// Requests the SDK refuses are refused identically: the fast path leaves
// them to the SDK rather than answering them.
func TestModernFastPathHeaderErrorsAsSDK(t *testing.T) {
	fs := startFastAndSlow(t)
	call := modernCallBody(`{}`, "alpha_echo", `{"text":"x"}`)
	with := func(kv ...string) map[string]string {
		h := modernHeaders("tools/call", "alpha_echo")
		for i := 0; i < len(kv); i += 2 {
			if kv[i+1] == "" {
				delete(h, kv[i])
			} else {
				h[kv[i]] = kv[i+1]
			}
		}
		return h
	}
	cases := []struct {
		name string
		hdr  map[string]string
		body string
		code int // the JSON-RPC error code, 0 for a plain HTTP error
	}{
		{"Mcp-Name mismatch", with("Mcp-Name", "alpha_add"), call, -32020},
		{"Mcp-Name missing", with("Mcp-Name", ""), call, -32020},
		{"Mcp-Method missing", with("Mcp-Method", ""), call, -32020},
		{"Mcp-Method mismatch", with("Mcp-Method", "tools/list"), call, -32020},
		{"version header vs _meta", with(), strings.Replace(call, `protocolVersion":"2026-07-28"`, `protocolVersion":"2025-11-25"`, 1), -32020},
		{"unsupported version", with("Mcp-Protocol-Version", "2026-09-01"),
			strings.Replace(call, `protocolVersion":"2026-07-28"`, `protocolVersion":"2026-09-01"`, 1), -32022},
		{"no capabilities", with(), strings.Replace(call, `"io.modelcontextprotocol/clientCapabilities":{}`, `"x":1`, 1), -32602},
		{"capabilities not an object", with(), strings.Replace(call, `"io.modelcontextprotocol/clientCapabilities":{}`, `"io.modelcontextprotocol/clientCapabilities":"all"`, 1), -32602},
		{"clientInfo null", with(), strings.Replace(call, `{"name":"raw","version":"1"}`, `null`, 1), -32602},
		{"no _meta", with(), `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"alpha_echo","arguments":{}}}`, -32602},
		{"unknown tool", with("Mcp-Name", "nope"), modernCallBody(`{}`, "nope", `{}`), -32602},
		{"Last-Event-ID", with("Last-Event-ID", "1"), call, 0},
		{"wrong content type", with("Content-Type", "text/plain"), call, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fStatus, fCT, fBody := postModern(t, fs.fast, c.hdr, c.body)
			sStatus, sCT, sBody := postModern(t, fs.slow, c.hdr, c.body)
			if fStatus != sStatus || fCT != sCT || fBody != sBody {
				t.Fatalf("fast path: HTTP %d %s %q\nSDK path:  HTTP %d %s %q", fStatus, fCT, fBody, sStatus, sCT, sBody)
			}
			if fStatus < 400 {
				t.Fatalf("accepted: HTTP %d %s", fStatus, fBody)
			}
			if c.code != 0 {
				if r := reply(t, fBody); r.Error == nil || r.Error.Code != c.code {
					t.Fatalf("want error %d, got %s", c.code, fBody)
				}
			}
		})
	}
}

// events splits an event-stream body into its JSON-RPC messages.
func events(t *testing.T, body string) []map[string]json.RawMessage {
	t.Helper()
	var out []map[string]json.RawMessage
	for _, line := range strings.Split(body, "\n") {
		if data, ok := strings.CutPrefix(line, "data: "); ok {
			var m map[string]json.RawMessage
			if err := json.Unmarshal([]byte(data), &m); err != nil {
				t.Fatalf("event %q: %v", data, err)
			}
			out = append(out, m)
		}
	}
	return out
}

// Progress and log messages reach the client on the request's own stream,
// with its own progress token, the result last; logs only with a log level.
// Both for a call run on the request (no input capabilities) and for a
// bridged one (the client could be asked for input).
func TestModernFastPathNotificationsOnStream(t *testing.T) {
	fs := startFastAndSlow(t)
	for _, caps := range []string{`{}`, `{"roots":{},"sampling":{}}`} {
		t.Run(caps, func(t *testing.T) {
			meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":` + caps +
				`,"io.modelcontextprotocol/logLevel":"info","progressToken":"tok-1"}`
			body := `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{` + meta + `,"name":"alpha_progress","arguments":{"tag":"p"}}}`
			status, ct, b := postModern(t, fs.fast, modernHeaders("tools/call", "alpha_progress"), body)
			if status != http.StatusOK || ct != "text/event-stream" {
				t.Fatalf("HTTP %d %s: %s", status, ct, b)
			}
			evs := events(t, b)
			if len(evs) != 4 {
				t.Fatalf("want 3 progress notifications and the result, got %s", b)
			}
			for i, ev := range evs[:3] {
				var p struct {
					ProgressToken string  `json:"progressToken"`
					Progress      float64 `json:"progress"`
				}
				if string(ev["method"]) != `"notifications/progress"` || json.Unmarshal(ev["params"], &p) != nil ||
					p.ProgressToken != "tok-1" || p.Progress != float64(i+1) {
					t.Fatalf("event %d: %v", i, ev)
				}
			}
			if !strings.Contains(string(evs[3]["result"]), `progress done p`) || string(evs[3]["id"]) != "3" {
				t.Fatalf("last event %v", evs[3])
			}

			body = strings.Replace(strings.Replace(body, "alpha_progress", "alpha_log", 1), `"tag":"p"`, `"tag":"l"`, 1)
			_, ct, b = postModern(t, fs.fast, modernHeaders("tools/call", "alpha_log"), body)
			if evs := events(t, b); ct != "text/event-stream" || len(evs) != 2 || string(evs[0]["method"]) != `"notifications/message"` ||
				!strings.Contains(string(evs[0]["params"]), "log l") {
				t.Fatalf("log call: %s %s", ct, b)
			}
			// Without a log level there are no logs: a plain JSON answer.
			body = strings.Replace(body, `"io.modelcontextprotocol/logLevel":"info",`, "", 1)
			_, ct, b = postModern(t, fs.fast, modernHeaders("tools/call", "alpha_log"), body)
			if ct != "application/json" || strings.Contains(b, "notifications/message") {
				t.Fatalf("log call without a level: %s %s", ct, b)
			}
		})
	}
}

// Closing a fast-path call's stream cancels the upstream call, whether it
// runs on the request or bridged.
func TestModernFastPathClosedStreamCancels(t *testing.T) {
	p := newProbeServer()
	up := mcptest.ServeHTTP(t, p.srv)
	m := startMux(t, fmt.Sprintf(`{"mcpServers": {"probe": {"type": "http", "url": %q}}}`, up.URL+"/mcp"), proxy.Options{})
	for i, caps := range []string{`{}`, `{"elicitation":{}}`} {
		tag := fmt.Sprint("closed-", i)
		ctx, cancel := context.WithCancel(context.Background())
		req := mcpRequest(t, ctx, http.MethodPost, m.ts.URL+"/mcp", modernHeaders("tools/call", "probe_block"),
			modernCallBody(caps, "probe_block", `{"tag":"`+tag+`"}`))
		done := make(chan struct{})
		go func() {
			defer close(done)
			if resp, err := http.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
			}
		}()
		select {
		case got := <-p.entered:
			if got != tag {
				t.Fatalf("entered %q, want %q", got, tag)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("the call never reached the upstream")
		}
		cancel()
		select {
		case got := <-p.cancelled:
			if got != tag {
				t.Fatalf("cancelled %q, want %q", got, tag)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("caps %s: upstream call not cancelled after the client closed the stream", caps)
		}
		<-done
	}
}

// An input_required answered on the fast path still has its requestState
// sealed: a modern upstream's state never reaches the client bare, a
// tampered one is refused, the real retry completes; a legacy upstream's
// request to the client becomes input_required of a parked call.
func TestModernFastPathInputRequiredSealed(t *testing.T) {
	fs := startFastAndSlow(t)
	const caps = `{"elicitation":{}}`
	status, ct, b := postModern(t, fs.fast, modernHeaders("tools/call", "beta_ask"), modernCallBody(caps, "beta_ask", `{}`))
	if status != http.StatusOK || ct != "application/json" {
		t.Fatalf("not the fast path: HTTP %d %s %s", status, ct, b)
	}
	reqs, state := inputRequiredOf(t, reply(t, b))
	if len(reqs) != 1 || reqs["user_name"].Method != "elicitation/create" || strings.Contains(state, "upstream-state-1") {
		t.Fatalf("input_required %s", b)
	}
	answer := `"inputResponses":{"user_name":{"action":"accept","content":{"name":"Ada"}}}`
	retry := func(state string) rpcReply {
		_, r := modernCall(t, fs.fast, nil, caps, "tools/call", "beta_ask", `"name":"beta_ask","arguments":{},`+answer+`,"requestState":`+mustQuote(state))
		return r
	}
	if r := retry(state[:len(state)-3] + "AAA"); r.Error == nil || r.Error.Code != -32602 || !strings.Contains(r.Error.Message, "integrity") {
		t.Fatalf("tampered state: %s %+v", r.Result, r.Error)
	}
	if r := retry(state); r.Error != nil || !strings.Contains(string(r.Result), "hello Ada (Mcp-Name ask)") {
		t.Fatalf("retry: %s %+v", r.Result, r.Error)
	}

	// A legacy upstream's elicitation mid-call: parked, answered on retry.
	status, ct, b = postModern(t, fs.fast, modernHeaders("tools/call", "alpha_elicit"), modernCallBody(caps, "alpha_elicit", `{"tag":"e1"}`))
	if status != http.StatusOK || ct != "application/json" {
		t.Fatalf("not the fast path: HTTP %d %s %s", status, ct, b)
	}
	reqs, state = inputRequiredOf(t, reply(t, b))
	var key string
	for k, ir := range reqs {
		key = k
		if ir.Method != "elicitation/create" || !strings.Contains(string(ir.Params), "elicit e1") {
			t.Fatalf("input request %s %s", ir.Method, ir.Params)
		}
	}
	_, r := modernCall(t, fs.fast, nil, caps, "tools/call", "alpha_elicit", `"name":"alpha_elicit","arguments":{"tag":"e1"},`+
		`"inputResponses":{"`+key+`":{"action":"accept","content":{"answer":"yes"}}},"requestState":`+mustQuote(state))
	if r.Error != nil || !strings.Contains(string(r.Result), "elicited accept yes") {
		t.Fatalf("retry of the parked call: %s %+v", r.Result, r.Error)
	}
}

// Progress a legacy upstream sends while its bridged call waits for the
// client's answer (between rounds) is not lost: it rides the retry's
// stream, before the result.
func TestModernBridgeProgressBetweenRounds(t *testing.T) {
	step, sent := make(chan struct{}), make(chan struct{})
	srv := mcp.NewServer(&mcp.Implementation{Name: "stepper", Version: "1"}, nil)
	srv.AddTool(&mcp.Tool{Name: "step", InputSchema: map[string]any{"type": "object"}},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			tok := req.Params.GetProgressToken()
			_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: 1})
			answer := make(chan string, 1)
			go func() {
				res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: "first?",
					RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{"a": map[string]any{"type": "string"}}}})
				if err != nil {
					answer <- err.Error()
					return
				}
				answer <- fmt.Sprint(res.Content["a"])
			}()
			select {
			case <-step: // the client has the input_required
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: 2})
			close(sent)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done " + <-answer}}}, nil
		})
	up := mcptest.ServeHTTP(t, srv)
	m := startMux(t, fmt.Sprintf(`{"mcpServers": {"s": {"type": "http", "url": %q}}}`, up.URL+"/mcp"), proxy.Options{})
	url := m.ts.URL + "/mcp"
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{}},"progressToken":"pt"}`
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{` + meta + `,"name":"s_step","arguments":{}}}`
	_, ct, b := postModern(t, url, modernHeaders("tools/call", "s_step"), body)
	evs := events(t, b)
	if ct != "text/event-stream" || len(evs) != 2 || string(evs[0]["method"]) != `"notifications/progress"` {
		t.Fatalf("round 1: %s %s", ct, b)
	}
	reqs, state := inputRequiredOf(t, rpcReply{ID: evs[1]["id"], Result: evs[1]["result"]})
	var key string
	for k := range reqs {
		key = k
	}
	close(step)
	select {
	case <-sent: // progress 2 is on its way to the mux, between rounds
	case <-time.After(30 * time.Second):
		t.Fatal("the tool never sent its second progress")
	}
	retry := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{` + meta + `,"name":"s_step","arguments":{},` +
		`"inputResponses":{"` + key + `":{"action":"accept","content":{"a":"yes"}}},"requestState":` + mustQuote(state) + `}}`
	_, ct, b = postModern(t, url, modernHeaders("tools/call", "s_step"), retry)
	evs = events(t, b)
	if ct != "text/event-stream" || len(evs) != 2 || !strings.Contains(string(evs[0]["params"]), `"progress":2`) ||
		!strings.Contains(string(evs[1]["result"]), "done yes") {
		t.Fatalf("retry: want progress 2 then the result, got %s %s", ct, b)
	}
}
