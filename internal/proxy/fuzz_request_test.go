package proxy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mcp-mux/mcp-mux/internal/mcptest"
	"github.com/mcp-mux/mcp-mux/internal/proxy"
	"github.com/mcp-mux/mcp-mux/internal/taskpoll"
)

// FuzzRequest drives the real HTTP handler of three muxes (durable tasks
// off; on; on with tool_search) over real upstreams (tools, a prompt, a
// resource, a task toolset) with one request each: any method, params and
// id, in a 2025-11-25 session or as a 2026-07-28 sessionless request with
// _meta. The mux must not panic: a panic recovered (and answered -32603)
// still fails the target, so the fuzzer finds what the recover hides.
//
// mode picks the mux (bits 0-1), the era (bit 2), the declared client
// capabilities or no _meta at all (bits 3-4), a notification instead of a
// call (bit 5) and a missing Mcp-Name header (bit 6).
func FuzzRequest(f *testing.F) {
	seeds := []struct {
		method, params string
	}{
		{"initialize", `{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"f","version":"1"}}`},
		{"ping", `{}`},
		{"server/discover", `{}`},
		{"tools/list", `{}`},
		{"tools/list", `{"cursor":"x"}`},
		{"tools/call", `{"name":"alpha_echo","arguments":{"text":"hi"}}`},
		{"tools/call", `{"name":"alpha_sleep","arguments":{"ms":1}}`},
		{"tools/call", `{"name":"alpha_progress","arguments":{},"_meta":{"progressToken":1}}`},
		{"tools/call", `{"name":"alpha_sample","arguments":{}}`},
		{"tools/call", `{"name":"jobs_submit_job","arguments":{"input":"x"}}`},
		{"tools/call", `{"name":"list_background_tasks","arguments":{}}`},
		{"tools/call", `{"name":"get_background_task","arguments":{"task_id":"mcp-task-00000000000000000000000000000000"}}`},
		{"tools/call", `{"name":"cancel_background_task","arguments":{"task":"x"}}`},
		{"tools/call", `{"name":"tool_search","arguments":{"query":"echo"}}`},
		{"tools/call", `{"name":"alpha_echo","arguments":{},"requestState":"x","inputResponses":{"a":{}}}`},
		{"tools/call", `{"name":"alpha_echo","arguments":{},"task":{"ttl":1000}}`},
		{"resources/list", `{}`},
		{"resources/templates/list", `{}`},
		{"resources/read", `{"uri":"file:///readme"}`},
		{"resources/read", `{"uri":"mux://tasks/mcp-task-00000000000000000000000000000000"}`},
		{"resources/subscribe", `{"uri":"file:///readme"}`},
		{"resources/unsubscribe", `{"uri":"file:///readme"}`},
		{"prompts/list", `{}`},
		{"prompts/get", `{"name":"rich_greet","arguments":{}}`},
		{"completion/complete", `{"ref":{"type":"ref/prompt","name":"rich_greet"},"argument":{"name":"a","value":"b"}}`},
		{"completion/complete", `{"ref":{"type":"ref/resource","uri":"file:///readme"},"argument":{"name":"a","value":"b"}}`},
		{"logging/setLevel", `{"level":"debug"}`},
		{"subscriptions/listen", `{"notifications":{"toolsListChanged":true,"resourceSubscriptions":["file:///readme"]}}`},
		{"subscriptions/listen", `{"notifications":{"taskIds":["mcp-task-00000000000000000000000000000000"]}}`},
		{"tasks/get", `{"taskId":"mcp-task-00000000000000000000000000000000"}`},
		{"tasks/update", `{"taskId":"mcp-task-00000000000000000000000000000000","inputResponses":{}}`},
		{"tasks/cancel", `{"taskId":"mcp-task-00000000000000000000000000000000"}`},
		{"notifications/cancelled", `{"requestId":1}`},
		{"notifications/roots/list_changed", `{}`},
	}
	for _, s := range seeds {
		for _, mode := range []uint8{0, 1, 2, 4, 5, 6, 5 | 8, 6 | 16} {
			f.Add(mode, s.method, s.params, "1")
		}
	}
	f.Add(uint8(4|1), "tools/call", `{"name":"list_background_tasks","arguments":{}}`, `"s"`) // issue 17, attack 1
	muxes := fuzzMuxes(f)

	f.Fuzz(func(t *testing.T, mode uint8, method, params, id string) {
		fm := muxes[int(mode&3)%len(muxes)]
		modern := mode&4 != 0
		hdr := map[string]string{}
		if modern {
			hdr["Mcp-Protocol-Version"] = "2026-07-28"
			hdr["Mcp-Method"] = method
			if name := nameOf(params); name != "" && mode&64 == 0 {
				hdr["Mcp-Name"] = name
			}
			if caps := (mode >> 3) & 3; caps != 3 {
				params = withMeta(params, []string{`{}`, tasksCaps, `{"sampling":{},"elicitation":{},"roots":{}}`}[caps])
			}
		} else {
			hdr["Mcp-Session-Id"], hdr["Mcp-Protocol-Version"] = fm.session(t), "2025-11-25"
		}
		for k, v := range hdr {
			if !headerValue(v) {
				delete(hdr, k) // a client cannot send it
			}
		}
		body := fuzzBody(method, params, id, mode&32 != 0)
		before := proxy.PanicsForTest(fm.srv)
		status := fm.post(t, hdr, body)
		if !modern && status == http.StatusNotFound {
			fm.sid = "" // the session ended: the next input opens another
		}
		if n := proxy.PanicsForTest(fm.srv) - before; n != 0 {
			t.Fatalf("%s (mode %d): %v panics recovered:\n%s", body, mode, n, strings.Join(panicRecords(fm.logs.String()), "\n"))
		}
	})
}

// fuzzMux is one mux of FuzzRequest and its 2025-11-25 session.
type fuzzMux struct {
	*mux
	sid string
}

func fuzzMuxes(f *testing.F) []*fuzzMux {
	alpha := mcptest.ServeHTTP(f, mcptest.NewServer("alpha"))
	rich := mcptest.ServeHTTP(f, richServer())
	jobs := mcptest.ServeHTTP(f, (&mcptest.TaskServer{PollsToComplete: 1}).MCP())
	servers := fmt.Sprintf(`"alpha": {"type": "http", "url": %q}, "rich": {"type": "http", "url": %q}`, alpha.URL+"/mcp", rich.URL+"/mcp")
	withJobs := servers + `, "jobs": ` + mcptest.TaskServerJSON(jobs.URL+"/mcp", "")
	var out []*fuzzMux
	for _, c := range []struct {
		cfg   string
		tasks bool
	}{
		{`{"mcpServers": {` + servers + `}}`, false},
		{`{"mcpServers": {` + withJobs + `}, "mcp_tasks": {"enabled": true}}`, true},
		{`{"mcpServers": {` + withJobs + `}, "mcp_tasks": {"enabled": true}, "tool_search": {"enabled": true}}`, true},
	} {
		var opts proxy.Options
		if c.tasks {
			store, err := taskpoll.OpenBoltStore(taskpoll.BoltOptions{Dir: f.TempDir()})
			if err != nil {
				f.Fatal(err)
			}
			f.Cleanup(func() { _ = store.Close() })
			opts = proxy.Options{TaskStore: store, TaskConfig: taskpoll.Config{PollInterval: 50 * time.Millisecond, Lease: 10 * time.Second}}
		}
		m, _ := startMuxEnv(f, c.cfg, nil, opts)
		out = append(out, &fuzzMux{mux: m})
	}
	return out
}

// session returns the mux's 2025-11-25 session, opening one if needed.
func (fm *fuzzMux) session(t *testing.T) string {
	if fm.sid != "" {
		return fm.sid
	}
	resp, err := testHTTP.Do(mcpRequest(t, context.Background(), http.MethodPost, fm.ts.URL+"/mcp", nil, initializeBody))
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	fm.sid = resp.Header.Get("Mcp-Session-Id")
	fm.post(t, map[string]string{"Mcp-Session-Id": fm.sid, "Mcp-Protocol-Version": "2025-11-25"}, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return fm.sid
}

// post sends one request, reads at most 1 MiB of its answer and gives up
// on a stream after a short while (subscriptions/listen stays open).
func (fm *fuzzMux) post(t *testing.T, hdr map[string]string, body string) int {
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	resp, err := testHTTP.Do(mcpRequest(t, ctx, http.MethodPost, fm.ts.URL+"/mcp", hdr, body))
	if err != nil {
		if ctx.Err() != nil {
			return 0
		}
		t.Fatalf("%s: %v", body, err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode
}

// headerValue reports whether net/http sends v as a header value.
func headerValue(v string) bool {
	for _, c := range []byte(v) {
		if (c < 0x20 && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}

// nameOf is the Mcp-Name of a request's params: its name, uri or taskId.
func nameOf(params string) string {
	var p struct {
		Name   string `json:"name"`
		URI    string `json:"uri"`
		TaskID string `json:"taskId"`
	}
	_ = json.Unmarshal([]byte(params), &p)
	return p.Name + p.URI + p.TaskID
}

// withMeta puts a 2026-07-28 _meta with caps first into params, when
// params is an object.
func withMeta(params, caps string) string {
	p := strings.TrimSpace(params)
	if !strings.HasPrefix(p, "{") {
		return params
	}
	meta := modernMeta(caps)
	if rest := strings.TrimSpace(p[1:]); rest == "}" {
		return "{" + meta + "}"
	}
	return "{" + meta + "," + p[1:]
}

// fuzzBody is a JSON-RPC request (or notification) of method with params
// as given and id as JSON when it is JSON, else as a string.
func fuzzBody(method, params, id string, notification bool) string {
	var b bytes.Buffer
	m, _ := json.Marshal(method)
	b.WriteString(`{"jsonrpc":"2.0","method":`)
	b.Write(m)
	if !notification {
		b.WriteString(`,"id":`)
		if json.Valid([]byte(id)) {
			b.WriteString(id)
		} else {
			q, _ := json.Marshal(id)
			b.Write(q)
		}
	}
	if params != "" {
		b.WriteString(`,"params":`)
		b.WriteString(params)
	}
	b.WriteString("}")
	return b.String()
}
