package proxy_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/mcp-mux/mcp-mux/internal/proxy"
)

// Request ids (internal/reqid): one id per /mcp request, from the client's
// X-Request-Id when well-formed, echoed back and named as request_id by
// every log line of the call — the mux's, the upstream client's and the
// audit interceptor's — on the fast path and on the SDK path.

// flakyUpstream is a Streamable HTTP server whose tools/calls answer 404
// (the session expired: the mux reconnects and retries) and 500 (the call
// fails) in turn, so that one call through the mux logs in every layer.
func flakyUpstream(t *testing.T) *httptest.Server {
	var sessions, calls atomic.Int64
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if err := json.NewDecoder(r.Body).Decode(&m); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if m.ID == nil {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		var result string
		switch m.Method {
		case "initialize":
			sid := fmt.Sprintf("s%d", sessions.Add(1))
			w.Header().Set("Mcp-Session-Id", sid)
			result = `{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"flaky","version":"1"}}`
		case "tools/list":
			result = `{"tools":[{"name":"flaky","inputSchema":{"type":"object"}}]}`
		case "tools/call":
			if calls.Add(1)%2 == 1 {
				http.Error(w, "session not found", http.StatusNotFound)
			} else {
				http.Error(w, "upstream exploded", http.StatusInternalServerError)
			}
			return
		default:
			result = `{}`
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":%s}`, m.ID, result)
	}))
	t.Cleanup(ts.Close)
	return ts
}

// postWithID POSTs body to /mcp with the headers hdr (name, value pairs;
// an empty value is left out).
func postWithID(t *testing.T, base, body string, hdr ...string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, base+"/mcp", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i+1] != "" {
			req.Header.Set(hdr[i], hdr[i+1])
		}
	}
	resp, err := testHTTP.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func TestRequestIDInEveryLogLineOfACall(t *testing.T) {
	up := flakyUpstream(t)
	m := startMux(t, fmt.Sprintf(`{"mcpInterceptors": ["audit"], "mcpServers": {"up": {"type": "http", "url": %q}}}`, up.URL+"/mcp"), proxy.Options{})
	sid := rawSession(t, m.ts.URL, "2025-11-25")
	var tool string
	list := postWithID(t, m.ts.URL, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, "Mcp-Session-Id", sid, "Mcp-Protocol-Version", "2025-11-25")
	for _, r := range readReplies(t, list) {
		var l struct{ Tools []struct{ Name string } }
		_ = json.Unmarshal(r.Result, &l)
		for _, x := range l.Tools {
			if strings.HasSuffix(x.Name, "flaky") {
				tool = x.Name
			}
		}
	}
	if tool == "" {
		t.Fatal("the mux lists no flaky tool")
	}

	// Protocol version 2024-11-05, which the fast path leaves to the SDK,
	// sends a legacy call down the SDK path; 2026-07-28 is the stateless leg.
	const fast, sdk, modern = "2025-11-25", "2024-11-05", "2026-07-28"
	for i, tc := range []struct {
		name, version, sent, meta, contentType string
		keep                                   bool
	}{
		{"fast path", fast, "client-7f3a:42", "", "application/json", true},
		{"fast path with progress", fast, "client-7f3a:43", `,"_meta":{"progressToken":"p1"}`, "application/json", true},
		{"sdk path", sdk, "0b5e2c1d-9a8f-4e7b-b6c5-d4e3f2a1b0c9", `,"_meta":{"progressToken":"p2"}`, "text/event-stream", true},
		{"2026-07-28", modern, "modern.1", "," + modernMeta("{}"), "", true},
		{"malformed", fast, "evil id\"request_id=forged", "", "application/json", false},
		{"too long on the sdk path", sdk, strings.Repeat("a", 65), "", "text/event-stream", false},
		{"absent", fast, "", "", "application/json", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(m.logs.String())
			body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":{}%s}}`, 10+i, tool, tc.meta)
			hdr := []string{"X-Request-Id", tc.sent, "Mcp-Protocol-Version", tc.version}
			if tc.version == modern {
				hdr = append(hdr, "Mcp-Method", "tools/call", "Mcp-Name", tool)
			} else {
				hdr = append(hdr, "Mcp-Session-Id", sid)
			}
			resp := postWithID(t, m.ts.URL, body, hdr...)
			got := resp.Header.Get("X-Request-Id")
			if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, tc.contentType) {
				t.Errorf("Content-Type %q, want %q (the call took the other path)", ct, tc.contentType)
			}
			replies := readReplies(t, resp)
			if len(replies) != 1 || !strings.Contains(string(replies[0].Result), `"isError":true`) || !strings.Contains(string(replies[0].Result), "500") {
				t.Fatalf("replies %+v, want one tool error naming the upstream's HTTP 500", replies)
			}
			switch {
			case tc.keep && got != tc.sent:
				t.Fatalf("X-Request-Id echoed %q, want the client's %q", got, tc.sent)
			case !tc.keep && (got == tc.sent || len(got) != 16 || strings.Trim(got, "0123456789abcdef") != ""):
				t.Fatalf("X-Request-Id echoed %q for inbound %q, want a new 16-hex-character id", got, tc.sent)
			}

			want := map[string]bool{
				"upstream session gone before the request; reconnecting": false, // upstream
				"tool call failed": false, // proxy
				"tool call":        false, // audit interceptor
			}
			lines := strings.Split(strings.TrimSpace(m.logs.String()[before:]), "\n")
			for _, line := range lines {
				var rec map[string]any
				if err := json.Unmarshal([]byte(line), &rec); err != nil {
					t.Fatalf("log line is not JSON: %q", line)
				}
				if rec["request_id"] != got {
					t.Errorf("log line without request_id %q: %s", got, line)
				}
				if msg, _ := rec["@message"].(string); msg != "" {
					if _, ok := want[msg]; ok {
						want[msg] = true
					}
				}
			}
			for msg, seen := range want {
				if !seen {
					t.Errorf("the call logged no %q line:\n%s", msg, strings.Join(lines, "\n"))
				}
			}
			if strings.Contains(m.logs.String()[before:], "forged") {
				t.Errorf("the rejected inbound id reached the logs:\n%s", m.logs.String()[before:])
			}
		})
	}
}

// TestRequestIDOnRefusedRequest: a request /mcp refuses before any call
// (here at inbound.max_sessions) is echoed and logged with its id too.
func TestRequestIDOnRefusedRequest(t *testing.T) {
	m := startMux(t, `{"mcpServers": {}, "inbound": {"max_sessions": 1}}`, proxy.Options{})
	rawSession(t, m.ts.URL, "2025-11-25")
	before := len(m.logs.String())
	resp := postWithID(t, m.ts.URL, initializeBody, "X-Request-Id", "refused-1")
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("X-Request-Id") != "refused-1" {
		t.Fatalf("HTTP %d, X-Request-Id %q; want 503 echoing refused-1", resp.StatusCode, resp.Header.Get("X-Request-Id"))
	}
	logs := m.logs.String()[before:]
	if !strings.Contains(logs, "refusing a new session") || !strings.Contains(logs, `"request_id":"refused-1"`) {
		t.Fatalf("the refusal was not logged with its request_id:\n%s", logs)
	}
}
