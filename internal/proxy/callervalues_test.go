package proxy_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mcp-mux/mcp-mux/internal/mcptest"
	"github.com/mcp-mux/mcp-mux/internal/otlptest"
	"github.com/mcp-mux/mcp-mux/internal/proxy"
	"github.com/mcp-mux/mcp-mux/internal/telemetry"
)

// Issue 32: every value a caller chooses is bounded at the edge
// (admission.CheckValues for the body, checkHeaders for the headers)
// before a metric, span, record or upstream request sees it.

// boundsMux is a mux with one HTTP upstream of both eras (web_echo).
func boundsMux(t *testing.T, opts proxy.Options) *mux {
	t.Helper()
	up := mcptest.ServeHTTPBothEras(t, mcptest.NewServer("web"))
	return startMux(t, fmt.Sprintf(`{"mcpServers": {"web": {"type": "http", "url": %q}}}`, up.URL+"/mcp"), opts)
}

// refused reads a refusal: HTTP 400 with a -32600 error naming field, and
// a body that does not echo what was refused.
func refused(t *testing.T, resp *http.Response, err error, field string) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), `"code":-32600`) || !strings.Contains(string(b), field) {
		t.Fatalf("want 400 -32600 naming %s; got HTTP %d %.300s", field, resp.StatusCode, b)
	}
	if len(b) > 1024 {
		t.Fatalf("the refusal is %d bytes long: it echoes what it refused", len(b))
	}
}

// TestUnknownNamesAreOneLabel (attack 1): names callers invent never
// become metric labels. A name past its bound is refused at the edge; an
// unknown one within it is counted as _unknown, in both eras and on the
// fast and SDK paths, so /metrics stays the size of the catalog.
func TestUnknownNamesAreOneLabel(t *testing.T) {
	m := boundsMux(t, proxy.Options{})
	base := m.ts.URL
	sid := rawSession(t, base, "2025-11-25")
	huge := strings.Repeat("n", 1<<20)
	resp, err := rawPost(context.Background(), base, sid, "2025-11-25",
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"`+huge+`","arguments":{}}}`)
	refused(t, resp, err, "params.name")
	resp, err = rawPost(context.Background(), base, sid, "2025-11-25",
		`{"jsonrpc":"2.0","id":2,"method":"prompts/get","params":{"name":"`+huge+`"}}`)
	refused(t, resp, err, "params.name")

	invented := func(i int) string { return fmt.Sprintf("invented_%03d_%s", i, strings.Repeat("z", 100)) }
	for i := 0; i < 60; i++ {
		name := invented(i)
		var body string
		switch i % 3 {
		case 0: // the 2025-11-25 fast path
			body = fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":{}}}`, i+10, name)
		case 1: // the SDK path
			body = fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"prompts/get","params":{"name":%q}}`, i+10, name)
		default: // 2026-07-28
			st, _, b := postModern(t, base+"/mcp", modernHeaders("tools/call", name), modernCallBody(`{}`, name, `{}`))
			if !strings.Contains(b, "unknown tool") {
				t.Fatalf("2026-07-28 call of an unknown tool: HTTP %d %.200s", st, b)
			}
			continue
		}
		resp, err := rawPost(context.Background(), base, sid, "2025-11-25", body)
		if err != nil {
			t.Fatal(err)
		}
		if r := readReplies(t, resp); len(r) != 1 || r[0].Error == nil {
			t.Fatalf("call of an unknown name: %+v", r)
		}
	}
	_, _, metrics := rawRequest(t, http.MethodGet, base+"/metrics", nil, "")
	for i := 0; i < 60; i++ {
		if strings.Contains(metrics, fmt.Sprintf("invented_%03d", i)) {
			t.Fatalf("an invented name is a metric label:\n%.2000s", metrics)
		}
	}
	for _, want := range []string{`gen_ai_tool_name="_unknown"`, `gen_ai_prompt_name="_unknown"`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics has no %s series", want)
		}
	}
	if strings.Contains(metrics, "nnnnnnnnnnnnnnnn") {
		t.Fatal("a refused name reached /metrics")
	}
	// A known name is still its own label.
	resp, err = rawPost(context.Background(), base, sid, "2025-11-25",
		`{"jsonrpc":"2.0","id":99,"method":"tools/call","params":{"name":"web_echo","arguments":{"text":"hi"}}}`)
	if err != nil {
		t.Fatal(err)
	}
	readReplies(t, resp)
	_, _, metrics = rawRequest(t, http.MethodGet, base+"/metrics", nil, "")
	if !strings.Contains(metrics, `gen_ai_tool_name="web_echo"`) {
		t.Error("a known tool lost its label")
	}
}

// TestCallerIDsBounded (attack 4): a JSON-RPC id past its bound is
// refused before any span records it, in each era and in a batch; an id
// at the bound is served and reaches the span whole.
func TestCallerIDsBounded(t *testing.T) {
	r := otlptest.Start(t)
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "20")
	m := boundsMux(t, proxy.Options{Telemetry: telemetry.Options{Enabled: true, Endpoint: r.Endpoint(), Version: "test",
		Env: func(string) (string, bool) { return "", false }}})
	base := m.ts.URL
	sid := rawSession(t, base, "2025-11-25")
	hugeID := `"` + strings.Repeat("i", 1<<20) + `"`
	call := func(id string) string {
		return `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"web_echo","arguments":{"text":"x"}}}`
	}
	resp, err := rawPost(context.Background(), base, sid, "2025-11-25", call(hugeID))
	refused(t, resp, err, "id is")
	resp, err = rawPost(context.Background(), base, sid, "2025-11-25", `{"jsonrpc":"2.0","ID":`+hugeID+`,"method":"ping"}`)
	refused(t, resp, err, "id is")
	resp, err = rawPost(context.Background(), base, sid, "2025-03-26", `[`+call("1")+`,`+call(hugeID)+`]`)
	refused(t, resp, err, "id is")
	body := `{"jsonrpc":"2.0","id":` + hugeID + `,"method":"tools/call","params":{` + modernMeta("{}") + `,"name":"web_echo","arguments":{"text":"x"}}}`
	st, _, b := postModern(t, base+"/mcp", modernHeaders("tools/call", "web_echo"), body)
	if st != http.StatusBadRequest || !strings.Contains(b, "id is") || len(b) > 1024 {
		t.Fatalf("2026-07-28 huge id: HTTP %d %.200s", st, b)
	}

	atBound := `"` + strings.Repeat("k", 126) + `"` // 128 bytes of JSON
	resp, err = rawPost(context.Background(), base, sid, "2025-11-25", call(atBound))
	if err != nil {
		t.Fatal(err)
	}
	if rs := readReplies(t, resp); len(rs) != 1 || rs[0].Error != nil || string(rs[0].ID) != atBound {
		t.Fatalf("a call with an id at the bound: %+v", rs)
	}
	spans := r.WaitSpans(t, 20*time.Second, func(all []otlptest.Span) bool {
		for _, s := range all {
			if s.Attrs["jsonrpc.request.id"] == strings.Trim(atBound, `"`) {
				return true
			}
		}
		return false
	})
	for _, s := range spans {
		if id, _ := s.Attrs["jsonrpc.request.id"].(string); len(id) > 128 {
			t.Fatalf("a span carries a %d-byte request id", len(id))
		}
	}
}

// TestCallerHeadersBounded: the thread, the session id and Last-Event-ID
// are refused past their bounds or with control characters, naming the
// header; a thread at its bound is served.
func TestCallerHeadersBounded(t *testing.T) {
	m := boundsMux(t, proxy.Options{})
	base := m.ts.URL
	sid := rawSession(t, base, "2025-11-25")
	call := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"web_echo","arguments":{"text":"x"}}}`
	post := func(hdr map[string]string) (*http.Response, error) {
		req, _ := http.NewRequest(http.MethodPost, base+"/mcp", strings.NewReader(call))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Session-Id", sid)
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		return testHTTP.Do(req)
	}
	resp, err := post(map[string]string{"X-Mux-Thread-Id": strings.Repeat("t", 60<<10)})
	refused(t, resp, err, "X-Mux-Thread-Id is 61440 bytes long")
	resp, err = post(map[string]string{"X-Mux-Thread-Id": "a\tb\xe9"})
	refused(t, resp, err, "X-Mux-Thread-Id must be printable")
	resp, err = post(map[string]string{"Mcp-Session-Id": strings.Repeat("s", 4096)})
	refused(t, resp, err, "Mcp-Session-Id is 4096 bytes long")
	resp, err = post(map[string]string{"X-Mux-Thread-Id": strings.Repeat("t", 255)})
	if err != nil {
		t.Fatal(err)
	}
	if rs := readReplies(t, resp); len(rs) != 1 || rs[0].Error != nil {
		t.Fatalf("a thread at its bound: %+v", rs)
	}
	req, _ := http.NewRequest(http.MethodGet, base+"/mcp", nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", sid)
	req.Header.Set("Last-Event-ID", strings.Repeat("e", 2048))
	resp, err = testHTTP.Do(req)
	refused(t, resp, err, "Last-Event-ID is 2048 bytes long")
}
