package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Issue 17, attacks 11 and 12b: a caller's Mcp-Param-Region: evil for the
// argument region "us" (what the upstream, a legacy server that checks
// nothing, saw), repeated protocol headers (the status each got), and
// whether a requestState shows the caller's name.

// paramUpstream is a legacy upstream whose tool annotates region with
// x-mcp-header; it records the Mcp-Param-Region of every tools/call.
type paramUpstream struct {
	mu   sync.Mutex
	seen []string
}

func (p *paramUpstream) start() *httptest.Server {
	inner := serve(func(_ context.Context, method string, _ json.RawMessage) json.RawMessage {
		switch method {
		case "tools/list":
			return json.RawMessage(`{"tools":[{"name":"route","inputSchema":{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"}}}}]}`)
		case "tools/call":
			return json.RawMessage(`{"content":[{"type":"text","text":"ok"}]}`)
		}
		return json.RawMessage(`{}`)
	})
	inner.Close() // only its handler is used
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if bytes.Contains(b, []byte(`"tools/call"`)) {
			p.mu.Lock()
			p.seen = append(p.seen, fmt.Sprintf("%q", r.Header.Values("Mcp-Param-Region")))
			p.mu.Unlock()
		}
		r.Body = io.NopCloser(bytes.NewReader(b))
		inner.Config.Handler.ServeHTTP(w, r)
	}))
}

// since returns the Region headers of the calls after the first n, and
// how many calls there are now.
func (p *paramUpstream) since(n int) (string, int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.seen) == n {
		return "not called", n
	}
	return strings.Join(p.seen[n:], " "), len(p.seen)
}

// askUpstream is a 2026-07-28 go-sdk server whose tool asks for input.
func askUpstream() *httptest.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "ask", Version: "1"}, nil)
	s.AddTool(&mcp.Tool{Name: "ask", InputSchema: map[string]any{"type": "object"}}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{RequestState: "upstream-state", InputRequests: mcp.InputRequestMap{
			"q": &mcp.ElicitParams{Message: "name?", RequestedSchema: map[string]any{"type": "object"}}}}, nil
	})
	return httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{Stateless: true}))
}

// victimUser is the caller of every request but one, the one a requestState
// must not name.
const victimUser = "alice-the-caller"

// postModern posts a 2026-07-28 request with the standard headers for
// method and name plus extra (each its own header line).
func (m *mux) postModern(user, method, name, params string, extra [][2]string) (int, string) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	body := `{"jsonrpc":"2.0","id":1,"method":"` + method + `","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",` +
		`"io.modelcontextprotocol/clientInfo":{"name":"attack","version":"1"},"io.modelcontextprotocol/clientCapabilities":{"elicitation":{}}},` + params + `}}`
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, m.base+"/mcp", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", method)
	req.Header.Set("Mcp-Name", name)
	req.Header.Set("X-User", user)
	for _, kv := range extra {
		req.Header.Add(kv[0], kv[1])
	}
	resp, err := m.client.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	return resp.StatusCode, string(b)
}

func attackHeaders(bin, dir string) error {
	pu := &paramUpstream{}
	legacy := pu.start()
	defer legacy.Close()
	ask := askUpstream()
	defer ask.Close()
	m, err := startMux(bin, dir, fmt.Sprintf(`{"mcpServers": {"p": {"type": "http", "url": %q}, "q": {"type": "http", "url": %q}},
		"inbound": {"auth": {"mode": "trusted_header"}, "user_header": "X-User"}}`, legacy.URL+"/mcp", ask.URL+"/mcp"))
	if err != nil {
		return err
	}
	defer m.stop()
	before := m.stats()
	callRoute := `"name":"p_route","arguments":{"region":"us"}`

	status, body := m.postModern(victimUser, "tools/call", "p_route", callRoute, [][2]string{{"Mcp-Param-Region", "evil"}})
	seen, n := pu.since(0)
	fmt.Printf("a17 Mcp-Param-Region: evil for region \"us\": HTTP %d (%s); upstream saw Region %s\n", status, short(rpcCode(body)), seen)

	for _, h := range []string{"Mcp-Method", "Mcp-Name", "MCP-Protocol-Version", "Mcp-Param-Region"} {
		val := map[string]string{"Mcp-Method": "tools/list", "Mcp-Name": "q_ask", "MCP-Protocol-Version": "2025-11-25", "Mcp-Param-Region": "us"}[h]
		extra := [][2]string{{h, val}}
		if h == "Mcp-Param-Region" {
			extra = [][2]string{{h, "us"}, {h, "evil"}}
		}
		status, body = m.postModern(victimUser, "tools/call", "p_route", callRoute, extra)
		seen, n = pu.since(n)
		fmt.Printf("a17 repeated %s header: HTTP %d (%s); upstream saw Region %s\n", h, status, short(rpcCode(body)), seen)
	}
	for _, who := range []string{victimUser, "bob"} {
		status, body = m.postModern(who, "tools/call", "p_route", callRoute, nil)
		seen, n = pu.since(n)
		fmt.Printf("a17 then a plain call (no Mcp-Param header) by %s: HTTP %d (%s); upstream saw Region %s\n", who, status, short(rpcCode(body)), seen)
	}

	status, body = m.postModern(victimUser, "tools/call", "q_ask", `"name":"q_ask","arguments":{}`, nil)
	state := between(body, `"requestState":"`, `"`)
	fmt.Printf("a17 requestState (HTTP %d, %d bytes) names the user %q: %v; names the server: %v\n",
		status, len(state), victimUser, revealed(state, victimUser), revealed(state, `"s":"q"`))
	fmt.Printf("a17 alive %v; before: %s; after: %s\n", m.alive(), before, m.stats())
	return nil
}

// rpcCode is the JSON-RPC error code and message of a response, or "result".
func rpcCode(body string) string {
	if c := between(body, `"code":`, `,`); c != "" {
		return "error " + c + ": " + between(body, `"message":"`, `"`)
	}
	return "result"
}

func between(s, start, end string) string {
	_, after, ok := strings.Cut(s, start)
	if !ok {
		return ""
	}
	v, _, _ := strings.Cut(after, end)
	return v
}

// revealed reports whether text shows in state, as is or base64-decoded.
func revealed(state, text string) bool {
	if strings.Contains(state, text) {
		return true
	}
	for _, part := range strings.Split(state, ".") {
		if b, err := base64.RawURLEncoding.DecodeString(part); err == nil && strings.Contains(string(b), text) {
			return true
		}
	}
	return false
}
