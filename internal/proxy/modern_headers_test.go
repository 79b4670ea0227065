package proxy_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/internal/proxy"
)

// headerUpstream is a real go-sdk server over HTTP whose "route" tool
// annotates region (and scope.tenant) with x-mcp-header; it records the
// Mcp-Param-* headers of every tools/call it receives. A legacy (stateful)
// one checks nothing, so whatever mcp-mux sends it is what it acts on; a
// 2026-07-28 (stateless) one refuses mismatches itself.
type headerUpstream struct {
	url   string
	mu    sync.Mutex
	calls []http.Header // Mcp-Param-* headers of each tools/call
}

func newHeaderUpstream(t *testing.T, stateless bool) *headerUpstream {
	t.Helper()
	u := &headerUpstream{}
	s := mcp.NewServer(&mcp.Implementation{Name: "hdr", Version: "1"}, nil)
	schema := map[string]any{"type": "object", "properties": map[string]any{
		"region": map[string]any{"type": "string", "x-mcp-header": "Region"},
		"count":  map[string]any{"type": "integer", "x-mcp-header": "Count"},
		"note":   map[string]any{"type": "string"},
	}}
	s.AddTool(&mcp.Tool{Name: "route", InputSchema: schema}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		got := http.Header{}
		for k, v := range req.Extra.Header {
			if strings.HasPrefix(k, "Mcp-Param-") {
				got[k] = v
			}
		}
		u.mu.Lock()
		u.calls = append(u.calls, got)
		u.mu.Unlock()
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil
	})
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{Stateless: stateless}))
	t.Cleanup(ts.Close)
	u.url = ts.URL + "/mcp"
	return u
}

// seen returns the Mcp-Param-* headers of the calls the upstream ran.
func (u *headerUpstream) seen() []http.Header {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]http.Header(nil), u.calls...)
}

// headerCase is one mux (fast path or SDK path) over one upstream.
type headerCase struct {
	name string
	up   *headerUpstream
	url  string // the mux's /mcp
}

// headerCases starts a legacy and a 2026-07-28 upstream, each behind a mux
// with the fast path and one without (every request takes the SDK path).
func headerCases(t *testing.T) []headerCase {
	t.Helper()
	var out []headerCase
	for _, era := range []struct {
		name      string
		stateless bool
	}{{"legacy upstream", false}, {"2026-07-28 upstream", true}} {
		for _, path := range []struct {
			name    string
			disable bool
		}{{"fast path", false}, {"SDK path", true}} {
			up := newHeaderUpstream(t, era.stateless)
			m := startMux(t, fmt.Sprintf(`{"mcpServers": {"h": {"type": "http", "url": %q}}}`, up.url), proxy.Options{DisableModernFastPath: path.disable})
			out = append(out, headerCase{name: era.name + ", " + path.name, up: up, url: m.ts.URL + "/mcp"})
		}
	}
	return out
}

// postHeaders posts a 2026-07-28 tools/call of h_route with arguments args
// and the standard headers plus extra (each value its own header line).
func postHeaders(t *testing.T, url string, extra [][2]string, args string) (int, rpcReply) {
	t.Helper()
	req := mcpRequest(t, context.Background(), http.MethodPost, url, modernHeaders("tools/call", "h_route"), modernCallBody(`{}`, "h_route", args))
	for _, kv := range extra {
		req.Header.Add(kv[0], kv[1])
	}
	resp, err := testHTTP.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, reply(t, string(b))
}

// wantHeaderError checks a 400 with a -32020 error naming header.
func wantHeaderError(t *testing.T, status int, r rpcReply, header string) {
	t.Helper()
	if status != http.StatusBadRequest || r.Error == nil || r.Error.Code != -32020 || !strings.Contains(r.Error.Message, header) {
		t.Fatalf("got %d %s %+v, want 400 with -32020 naming %s", status, r.Result, r.Error, header)
	}
	if string(r.ID) != "7" {
		t.Fatalf("error answers id %s, want 7", r.ID)
	}
}

// Attack 11: a caller's Mcp-Param-Region: evil for region "us" is refused
// with 400/-32020 naming the header, on both paths, and no upstream is
// called (a legacy upstream, which checks nothing, used to run the call
// seeing Region=evil). So is a header for an absent argument.
func TestModernParamHeaderMismatchRefused(t *testing.T) {
	for _, c := range headerCases(t) {
		t.Run(c.name, func(t *testing.T) {
			status, r := postHeaders(t, c.url, [][2]string{{"Mcp-Param-Region", "evil"}}, `{"region":"us"}`)
			wantHeaderError(t, status, r, "Mcp-Param-Region")
			status, r = postHeaders(t, c.url, [][2]string{{"Mcp-Param-Count", "8"}}, `{"region":"us","count":7}`)
			wantHeaderError(t, status, r, "Mcp-Param-Count")
			status, r = postHeaders(t, c.url, [][2]string{{"Mcp-Param-Region", "us"}}, `{"count":7}`)
			wantHeaderError(t, status, r, "Mcp-Param-Region")
			if got := c.up.seen(); len(got) != 0 {
				t.Fatalf("the upstream was called: %v", got)
			}
		})
	}
}

// Matching headers pass, in either encoding, and what a 2026-07-28 upstream
// sees is the argument, written by mcp-mux; a legacy upstream gets no
// Mcp-Param-* at all. A header no annotation names is dropped, not
// forwarded (the caller's Mcp-Param-* never reach an upstream).
func TestModernParamHeadersRegenerated(t *testing.T) {
	for _, c := range headerCases(t) {
		t.Run(c.name, func(t *testing.T) {
			extra := [][2]string{
				{"Mcp-Param-Region", "=?base64?TcO8bmNoZW4=?="}, // "München"
				{"Mcp-Param-Count", "7"},
				{"Mcp-Param-Note", "unannotated"},
				{"Mcp-Param-Evil", "1"},
			}
			status, r := postHeaders(t, c.url, extra, `{"region":"München","count":7,"note":"n"}`)
			if status != http.StatusOK || r.Error != nil || strings.Contains(string(r.Result), `"isError":true`) {
				t.Fatalf("matching call: %d %s %+v", status, r.Result, r.Error)
			}
			got := c.up.seen()
			if len(got) != 1 {
				t.Fatalf("upstream calls: %v", got)
			}
			want := http.Header{}
			if strings.HasPrefix(c.name, "2026") {
				want = http.Header{"Mcp-Param-Region": {"=?base64?TcO8bmNoZW4=?="}, "Mcp-Param-Count": {"7"}}
			}
			if fmt.Sprint(got[0]) != fmt.Sprint(want) {
				t.Fatalf("upstream saw %v, want %v", got[0], want)
			}
		})
	}
}

// Attack 11: a repeated Mcp-Method, Mcp-Name, MCP-Protocol-Version or
// Mcp-Param-* header is refused with 400/-32020 naming it, on both paths
// (the first value used to win), and no upstream is called.
func TestModernRepeatedProtocolHeaderRefused(t *testing.T) {
	for _, c := range headerCases(t)[:2] { // the legacy upstream checks nothing
		t.Run(c.name, func(t *testing.T) {
			for _, tc := range []struct {
				header string
				extra  [][2]string
			}{
				{"Mcp-Method", [][2]string{{"Mcp-Method", "tools/list"}}},
				{"Mcp-Name", [][2]string{{"Mcp-Name", "other"}}},
				{"Mcp-Protocol-Version", [][2]string{{"MCP-Protocol-Version", "2025-11-25"}}},
				{"Mcp-Param-Region", [][2]string{{"Mcp-Param-Region", "us"}, {"mcp-param-region", "evil"}}},
			} {
				status, r := postHeaders(t, c.url, tc.extra, `{"region":"us"}`)
				wantHeaderError(t, status, r, tc.header)
			}
			if got := c.up.seen(); len(got) != 0 {
				t.Fatalf("the upstream was called: %v", got)
			}
		})
	}
}

// A repeated MCP-Protocol-Version whose first value is legacy still counts
// as a 2026-07-28 request, and is refused.
func TestModernRepeatedVersionLegacyFirst(t *testing.T) {
	up := newHeaderUpstream(t, false)
	m := startMux(t, fmt.Sprintf(`{"mcpServers": {"h": {"type": "http", "url": %q}}}`, up.url), proxy.Options{})
	req := mcpRequest(t, context.Background(), http.MethodPost, m.ts.URL+"/mcp", map[string]string{"Mcp-Method": "tools/call", "Mcp-Name": "h_route"},
		modernCallBody(`{}`, "h_route", `{"region":"us"}`))
	req.Header.Add("MCP-Protocol-Version", "2025-11-25")
	req.Header.Add("MCP-Protocol-Version", "2026-07-28")
	resp, err := testHTTP.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	wantHeaderError(t, resp.StatusCode, reply(t, string(b)), "Mcp-Protocol-Version")
}

// go-sdk's own 2026-07-28 client writes Mcp-Param-* from the tool list it
// fetched (non-ASCII values encoded): mcp-mux accepts them, and a
// 2026-07-28 upstream sees the same values.
func TestModernGoSDKClientParamHeaders(t *testing.T) {
	up := newHeaderUpstream(t, true)
	m := startMux(t, fmt.Sprintf(`{"mcpServers": {"h": {"type": "http", "url": %q}}}`, up.url), proxy.Options{})
	c := mcp.NewClient(&mcp.Implementation{Name: "sdk", Version: "1"}, nil)
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: m.ts.URL + "/mcp", HTTPClient: testHTTP}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if _, err := cs.ListTools(context.Background(), nil); err != nil { // the client learns the annotations
		t.Fatal(err)
	}
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "h_route", Arguments: map[string]any{"region": "Zürich", "count": 3}})
	if err != nil || res.IsError {
		t.Fatalf("call: %v %+v", err, res)
	}
	got := up.seen()
	if len(got) != 1 || got[0].Get("Mcp-Param-Region") != "=?base64?WsO8cmljaA==?=" || got[0].Get("Mcp-Param-Count") != "3" {
		t.Fatalf("upstream saw %v", got)
	}
}
