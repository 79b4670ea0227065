package proxy_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/internal/mcptest"
	"github.com/mcp-mux/mcp-mux/proxy"
)

// modernMeta is the _meta triple of a 2026-07-28 request; caps are the
// client capabilities as JSON.
func modernMeta(caps string) string {
	return `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",` +
		`"io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"},` +
		`"io.modelcontextprotocol/clientCapabilities":` + caps + `}`
}

// modernBody is a 2026-07-28 request with id 1; params without braces.
func modernBody(method, params string) string {
	p := "{" + modernMeta("{}")
	if params != "" {
		p += "," + params
	}
	return `{"jsonrpc":"2.0","id":1,"method":"` + method + `","params":` + p + `}}`
}

// modernHeaders are the standard headers of a 2026-07-28 request.
func modernHeaders(method, name string) map[string]string {
	h := map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": method}
	if name != "" {
		h["Mcp-Name"] = name
	}
	return h
}

// rpcReply is a decoded JSON-RPC response.
type rpcReply struct {
	ID     json.RawMessage `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// reply finds the response in a JSON or SSE body.
func reply(t *testing.T, body string) rpcReply {
	t.Helper()
	for _, line := range strings.Split(body, "\n") {
		line = strings.TrimPrefix(strings.TrimSpace(line), "data: ")
		var r rpcReply
		if json.Unmarshal([]byte(line), &r) == nil && r.ID != nil && (r.Result != nil || r.Error != nil) {
			return r
		}
	}
	t.Fatalf("no JSON-RPC response in %q", body)
	return rpcReply{}
}

func modernMux(t *testing.T, extra string) *mux {
	t.Helper()
	up := mcptest.ServeHTTP(t, mcptest.NewServer("alpha"))
	return startMux(t, fmt.Sprintf(`{"mcpServers": {"alpha": {"type": "http", "url": %q,
		"routing": {"mode": "prefer", "keywords": ["echo"]}}}%s}`, up.URL+"/mcp", extra), proxy.Options{})
}

func TestModernDiscoverAndLists(t *testing.T) {
	m := modernMux(t, "")
	url := m.ts.URL + "/mcp"

	status, _, body := rawRequest(t, http.MethodPost, url, modernHeaders("server/discover", ""), modernBody("server/discover", ""))
	if status != http.StatusOK {
		t.Fatalf("server/discover: HTTP %d %s", status, body)
	}
	var disc struct {
		ResultType        string          `json:"resultType"`
		SupportedVersions []string        `json:"supportedVersions"`
		Capabilities      map[string]any  `json:"capabilities"`
		Instructions      string          `json:"instructions"`
		TTLMs             *int            `json:"ttlMs"`
		CacheScope        string          `json:"cacheScope"`
		Meta              json.RawMessage `json:"_meta"`
	}
	if err := json.Unmarshal(reply(t, body).Result, &disc); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(disc.SupportedVersions, "2026-07-28") || !slices.Contains(disc.SupportedVersions, "2025-11-25") {
		t.Errorf("supportedVersions %v: want both eras", disc.SupportedVersions)
	}
	if disc.Capabilities["tools"] == nil || disc.TTLMs == nil || disc.CacheScope != "public" || disc.ResultType != "complete" {
		t.Errorf("discover result %s", body)
	}
	if !strings.Contains(disc.Instructions, "<mcp_routing_hints>") {
		t.Errorf("instructions lack the routing hints: %q", disc.Instructions)
	}

	// tools/list: complete, cacheable, in catalog order, every call alike.
	var first string
	for range 2 {
		status, _, body = rawRequest(t, http.MethodPost, url, modernHeaders("tools/list", ""), modernBody("tools/list", ""))
		r := reply(t, body)
		if status != http.StatusOK || r.Error != nil {
			t.Fatalf("tools/list: HTTP %d %s", status, body)
		}
		var list struct {
			ResultType string `json:"resultType"`
			TTLMs      *int   `json:"ttlMs"`
			CacheScope string `json:"cacheScope"`
			Tools      []struct {
				Name string `json:"name"`
			} `json:"tools"`
		}
		if err := json.Unmarshal(r.Result, &list); err != nil {
			t.Fatal(err)
		}
		if list.ResultType != "complete" || list.TTLMs == nil || list.CacheScope != "public" || !strings.Contains(string(r.Result), `"name":"alpha_echo"`) {
			t.Fatalf("tools/list result %s", r.Result)
		}
		if first == "" {
			first = string(r.Result)
		} else if first != string(r.Result) {
			t.Errorf("tools/list differs between calls:\n%s\n%s", first, r.Result)
		}
	}

	// tools/call reaches the upstream under its raw name.
	status, _, body = rawRequest(t, http.MethodPost, url, modernHeaders("tools/call", "alpha_echo"),
		modernBody("tools/call", `"name":"alpha_echo","arguments":{"text":"hi modern"}`))
	r := reply(t, body)
	if status != http.StatusOK || r.Error != nil || !strings.Contains(string(r.Result), `"hi modern"`) || !strings.Contains(string(r.Result), `"resultType":"complete"`) {
		t.Fatalf("tools/call: HTTP %d %s", status, body)
	}

	// The same endpoint still serves a legacy session.
	status, h, body := rawRequest(t, http.MethodPost, url, nil, initializeBody)
	if status != http.StatusOK || h.Get("Mcp-Session-Id") == "" || !strings.Contains(body, `"protocolVersion":"2025-11-25"`) {
		t.Fatalf("legacy initialize: HTTP %d session %q %s", status, h.Get("Mcp-Session-Id"), body)
	}
}

// A modern list is private when callers are told apart.
func TestModernCacheScopePrivateWithIdentity(t *testing.T) {
	m := modernMux(t, `, "inbound": {"auth": {"mode": "trusted_header"}, "user_header": "X-User"}`)
	hdr := modernHeaders("tools/list", "")
	hdr["X-User"] = "alice"
	_, _, body := rawRequest(t, http.MethodPost, m.ts.URL+"/mcp", hdr, modernBody("tools/list", ""))
	if r := reply(t, body); !strings.Contains(string(r.Result), `"cacheScope":"private"`) {
		t.Fatalf("tools/list with caller identity: %s", body)
	}
}

func TestModernHeaderValidation(t *testing.T) {
	m := modernMux(t, "")
	url := m.ts.URL + "/mcp"
	cases := []struct {
		name string
		hdr  map[string]string
	}{
		{"method mismatch", modernHeaders("tools/list", "alpha_echo")},
		{"name mismatch", modernHeaders("tools/call", "alpha_add")},
		// The raw name is what goes upstream, not what the client named.
		{"raw name", modernHeaders("tools/call", "echo")},
		{"name missing", modernHeaders("tools/call", "")},
	}
	for _, c := range cases {
		status, _, body := rawRequest(t, http.MethodPost, url, c.hdr, modernBody("tools/call", `"name":"alpha_echo","arguments":{"text":"x"}`))
		if r := reply(t, body); status != http.StatusBadRequest || r.Error == nil || r.Error.Code != -32020 {
			t.Errorf("%s: HTTP %d %s, want 400 with -32020", c.name, status, body)
		}
	}
	// A version header that does not match _meta.
	hdr := modernHeaders("tools/list", "")
	hdr["Mcp-Protocol-Version"] = "2026-07-29"
	if status, _, body := rawRequest(t, http.MethodPost, url, hdr, modernBody("tools/list", "")); status != http.StatusBadRequest {
		t.Errorf("version mismatch: HTTP %d %s", status, body)
	}
	// _meta without the header goes to the modern handler, which wants it.
	status, _, body := rawRequest(t, http.MethodPost, url, nil, modernBody("tools/list", ""))
	if r := reply(t, body); status != http.StatusBadRequest || r.Error == nil || r.Error.Code != -32020 {
		t.Errorf("no version header: HTTP %d %s, want 400 with -32020", status, body)
	}
}

// sseReader reads JSON-RPC messages from an event stream.
type sseReader struct {
	sc   *bufio.Scanner
	body io.Closer
}

func (r *sseReader) next(t *testing.T) map[string]any {
	t.Helper()
	for r.sc.Scan() {
		line := r.sc.Text()
		if !strings.HasPrefix(line, "data: ") {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line[len("data: "):]), &m); err != nil {
			t.Fatalf("bad event %q: %v", line, err)
		}
		return m
	}
	t.Fatalf("stream ended: %v", r.sc.Err())
	return nil
}

func openStream(t *testing.T, ctx context.Context, url string, hdr map[string]string, body string) *sseReader {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := testHTTP.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("HTTP %d %s: %s", resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	return &sseReader{sc: bufio.NewScanner(resp.Body), body: resp.Body}
}

func TestModernSubscriptionsListenFanIn(t *testing.T) {
	a, b := mcptest.NewServer("alpha"), mcptest.NewServer("beta")
	ua, ub := mcptest.ServeHTTP(t, a), mcptest.ServeHTTP(t, b)
	m := startMux(t, fmt.Sprintf(`{"mcpServers": {"alpha": {"type": "http", "url": %q}, "beta": {"type": "http", "url": %q}}}`,
		ua.URL+"/mcp", ub.URL+"/mcp"), proxy.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	body := `{"jsonrpc":"2.0","id":"listen-1","method":"subscriptions/listen","params":{` + modernMeta("{}") +
		`,"notifications":{"toolsListChanged":true,"promptsListChanged":true}}}`
	s := openStream(t, ctx, m.ts.URL+"/mcp", modernHeaders("subscriptions/listen", ""), body)
	ack := s.next(t)
	if ack["method"] != "notifications/subscriptions/acknowledged" {
		t.Fatalf("first message %v, want the acknowledgement", ack)
	}
	p := ack["params"].(map[string]any)
	if p["_meta"].(map[string]any)["io.modelcontextprotocol/subscriptionId"] != "listen-1" ||
		p["notifications"].(map[string]any)["toolsListChanged"] != true {
		t.Fatalf("acknowledgement %v", ack)
	}
	// Either upstream's change reaches the listener, tagged with its id.
	for i, srv := range []*mcp.Server{a, b} {
		name := fmt.Sprintf("late%d", i)
		srv.AddTool(&mcp.Tool{Name: name, InputSchema: map[string]any{"type": "object"}},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return &mcp.CallToolResult{}, nil
			})
		n := s.next(t)
		if n["method"] != "notifications/tools/list_changed" ||
			n["params"].(map[string]any)["_meta"].(map[string]any)["io.modelcontextprotocol/subscriptionId"] != "listen-1" {
			t.Fatalf("after %s changed: %v", name, n)
		}
		_, _, lb := rawRequest(t, http.MethodPost, m.ts.URL+"/mcp", modernHeaders("tools/list", ""), modernBody("tools/list", ""))
		if !strings.Contains(lb, `"`+[]string{"alpha", "beta"}[i]+"_"+name+`"`) {
			t.Fatalf("tools/list after the change lacks %s: %s", name, lb)
		}
	}
}

func TestModernGoSDKClientDefaultOptions(t *testing.T) {
	m := modernMux(t, "")
	c := mcp.NewClient(&mcp.Implementation{Name: "default-client", Version: "1"}, nil)
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: m.ts.URL + "/mcp", HTTPClient: testHTTP}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if v := cs.InitializeResult().ProtocolVersion; v != "2026-07-28" {
		t.Fatalf("negotiated %q, want 2026-07-28", v)
	}
	if !strings.Contains(cs.InitializeResult().Instructions, "<mcp_routing_hints>") {
		t.Errorf("instructions %q", cs.InitializeResult().Instructions)
	}
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "alpha_echo", Arguments: map[string]any{"text": "hello"}})
	if err != nil || len(res.Content) != 1 || res.Content[0].(*mcp.TextContent).Text != "hello" {
		t.Fatalf("call: %v %+v", err, res)
	}
	lt, err := cs.ListTools(context.Background(), nil)
	if err != nil || len(lt.Tools) == 0 {
		t.Fatalf("list: %v %+v", err, lt)
	}
}
