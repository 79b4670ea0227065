package proxy_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/internal/mcptest"
	"github.com/mcp-mux/mcp-mux/internal/proxy"
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
	resp, err := testHTTP.Do(mcpRequest(t, ctx, http.MethodPost, url, hdr, body))
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

// modernCall posts one 2026-07-28 request with the given client
// capabilities and extra params, and returns the decoded reply.
func modernCall(t *testing.T, url string, hdr map[string]string, caps, method, name, params string) (int, rpcReply) {
	t.Helper()
	h := modernHeaders(method, name)
	for k, v := range hdr {
		h[k] = v
	}
	body := `{"jsonrpc":"2.0","id":1,"method":"` + method + `","params":{` + modernMeta(caps) + "," + params + `}}`
	status, _, b := rawRequest(t, http.MethodPost, url, h, body)
	return status, reply(t, b)
}

// inputRequiredOf decodes an input_required result.
func inputRequiredOf(t *testing.T, r rpcReply) (map[string]struct {
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
}, string) {
	t.Helper()
	var ir struct {
		ResultType    string `json:"resultType"`
		InputRequests map[string]struct {
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
		} `json:"inputRequests"`
		RequestState string `json:"requestState"`
	}
	if r.Error != nil || json.Unmarshal(r.Result, &ir) != nil || ir.ResultType != "input_required" || ir.RequestState == "" {
		t.Fatalf("want input_required, got %s %+v", r.Result, r.Error)
	}
	return ir.InputRequests, ir.RequestState
}

// A modern client of a legacy upstream: the upstream's live elicitation
// becomes input_required, the parked call resumes with the client's answer.
func TestModernClientLegacyUpstreamBridge(t *testing.T) {
	m := modernMux(t, `, "inbound": {"auth": {"mode": "trusted_header"}, "user_header": "X-User"}`)
	url := m.ts.URL + "/mcp"
	alice := map[string]string{"X-User": "alice"}
	const caps = `{"elicitation":{}}`
	_, r := modernCall(t, url, alice, caps, "tools/call", "alpha_elicit", `"name":"alpha_elicit","arguments":{"tag":"t1"}`)
	reqs, state := inputRequiredOf(t, r)
	if len(reqs) != 1 {
		t.Fatalf("input requests %v", reqs)
	}
	var key string
	for k, ir := range reqs {
		key = k
		if ir.Method != "elicitation/create" || !strings.Contains(string(ir.Params), "elicit t1") {
			t.Fatalf("input request %s %s", ir.Method, ir.Params)
		}
	}
	answer := `"inputResponses":{"` + key + `":{"action":"accept","content":{"answer":"forty-two"}}}`

	// A tampered state, or alice's state in bob's hands, is refused; the
	// parked call still waits for alice's real retry.
	for _, c := range []struct {
		who   map[string]string
		state string
	}{{alice, state[:len(state)-2] + "xx"}, {alice, state + "-TAMPERED"}, {map[string]string{"X-User": "bob"}, state}} {
		status, r := modernCall(t, url, c.who, caps, "tools/call", "alpha_elicit",
			`"name":"alpha_elicit","arguments":{"tag":"t1"},`+answer+`,"requestState":`+mustQuote(c.state))
		if r.Error == nil || r.Error.Code != -32602 || !strings.Contains(r.Error.Message, "requestState") {
			t.Fatalf("refused state: HTTP %d %s %+v", status, r.Result, r.Error)
		}
	}
	// The state of one server's call does not continue another server's.
	_, r = modernCall(t, url, alice, caps, "tools/call", "alpha_echo",
		`"name":"alpha_echo","arguments":{"text":"x"},"requestState":`+mustQuote(state))
	if r.Error == nil || !strings.Contains(r.Error.Message, "continues another request") {
		t.Fatalf("state reused for another tool's call: %s", r.Result)
	}

	_, r = modernCall(t, url, alice, caps, "tools/call", "alpha_elicit",
		`"name":"alpha_elicit","arguments":{"tag":"t1"},`+answer+`,"requestState":`+mustQuote(state))
	if r.Error != nil || !strings.Contains(string(r.Result), "elicited accept forty-two") || !strings.Contains(string(r.Result), `"resultType":"complete"`) {
		t.Fatalf("retry: %s %+v", r.Result, r.Error)
	}
	// The call is done: its state does not resume anything a second time.
	_, r = modernCall(t, url, alice, caps, "tools/call", "alpha_elicit",
		`"name":"alpha_elicit","arguments":{"tag":"t1"},`+answer+`,"requestState":`+mustQuote(state))
	if r.Error == nil || !strings.Contains(r.Error.Message, "no longer waiting") {
		t.Fatalf("second retry: %s %+v", r.Result, r.Error)
	}

	// A client that declared no elicitation is never asked: the upstream's
	// request fails and the tool reports it.
	_, r = modernCall(t, url, alice, `{}`, "tools/call", "alpha_elicit", `"name":"alpha_elicit","arguments":{"tag":"t2"}`)
	if r.Error == nil && !strings.Contains(string(r.Result), `"isError":true`) {
		t.Fatalf("call without the capability: %s", r.Result)
	}
	if strings.Contains(string(r.Result), "input_required") {
		t.Fatalf("asked a client for a capability it did not declare: %s", r.Result)
	}
}

func mustQuote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// mrtrServer is a 2026-07-28 (stateless) upstream whose ask tool asks for
// the caller's name with input_required, carrying its own requestState, and
// reports the Mcp-Name header it saw.
func mrtrServer(t *testing.T) string {
	t.Helper()
	s := mcp.NewServer(&mcp.Implementation{Name: "modern", Version: "1"}, nil)
	s.AddTool(&mcp.Tool{Name: "ask", InputSchema: map[string]any{"type": "object"}},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			if res, ok := req.Params.InputResponses["user_name"].(*mcp.ElicitResult); ok {
				if req.Params.RequestState != "upstream-state-1" {
					return nil, fmt.Errorf("requestState %q", req.Params.RequestState)
				}
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{
					Text: fmt.Sprintf("hello %v (Mcp-Name %s)", res.Content["name"], req.Extra.Header.Get("Mcp-Name"))}}}, nil
			}
			return &mcp.CallToolResult{RequestState: "upstream-state-1", InputRequests: mcp.InputRequestMap{
				"user_name": &mcp.ElicitParams{Message: "name?", RequestedSchema: map[string]any{"type": "object",
					"properties": map[string]any{"name": map[string]any{"type": "string"}}}},
			}}, nil
		})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{Stateless: true})
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	return ts.URL + "/mcp"
}

// A modern client of a modern upstream: input_required passes through with
// the upstream's keys and a sealed state; the retry reaches the upstream
// with the upstream's own state and the raw tool name in Mcp-Name.
func TestModernClientModernUpstream(t *testing.T) {
	m := startMux(t, fmt.Sprintf(`{"mcpServers": {"beta": {"type": "http", "url": %q}}}`, mrtrServer(t)), proxy.Options{})
	url := m.ts.URL + "/mcp"
	const caps = `{"elicitation":{}}`
	_, r := modernCall(t, url, nil, caps, "tools/call", "beta_ask", `"name":"beta_ask","arguments":{}`)
	reqs, state := inputRequiredOf(t, r)
	if reqs["user_name"].Method != "elicitation/create" || len(reqs) != 1 {
		t.Fatalf("input requests %v", reqs)
	}
	if strings.Contains(state, "upstream-state-1") {
		t.Fatalf("the upstream's requestState reached the client bare: %q", state)
	}
	answer := `"inputResponses":{"user_name":{"action":"accept","content":{"name":"Ada"}}}`
	_, r = modernCall(t, url, nil, caps, "tools/call", "beta_ask", `"name":"beta_ask","arguments":{},`+answer+`,"requestState":`+mustQuote(state+"x"))
	if r.Error == nil || r.Error.Code != -32602 {
		t.Fatalf("tampered state: %s %+v", r.Result, r.Error)
	}
	_, r = modernCall(t, url, nil, caps, "tools/call", "beta_ask", `"name":"beta_ask","arguments":{},`+answer+`,"requestState":`+mustQuote(state))
	if r.Error != nil || !strings.Contains(string(r.Result), "hello Ada (Mcp-Name ask)") {
		t.Fatalf("retry: %s %+v", r.Result, r.Error)
	}
	// Without the capability the client is not asked.
	_, r = modernCall(t, url, nil, `{}`, "tools/call", "beta_ask", `"name":"beta_ask","arguments":{}`)
	if r.Error == nil || r.Error.Code != -32021 {
		t.Fatalf("undeclared capability: %s %+v", r.Result, r.Error)
	}
}

// A legacy client of a modern upstream: mcp-mux asks the client's session
// live and retries upstream with the answer.
func TestLegacyClientModernUpstream(t *testing.T) {
	m := startMux(t, fmt.Sprintf(`{"mcpServers": {"beta": {"type": "http", "url": %q}}}`, mrtrServer(t)), proxy.Options{})
	asked := make(chan string, 1)
	cs := connect(t, m.ts.URL, &mcp.ClientOptions{
		ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			asked <- req.Params.Message
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "Grace"}}, nil
		}})
	if v := cs.InitializeResult().ProtocolVersion; v != "2025-11-25" {
		t.Fatalf("client negotiated %q", v)
	}
	got, _ := callText(t, cs, "beta_ask", nil)
	if got != "hello Grace (Mcp-Name ask)" {
		t.Fatalf("call: %q", got)
	}
	if msg := <-asked; msg != "name?" {
		t.Fatalf("client was asked %q", msg)
	}
}

// Closing a 2026-07-28 request's stream cancels the upstream call.
func TestModernClosedStreamCancelsCall(t *testing.T) {
	p := newProbeServer()
	up := mcptest.ServeHTTP(t, p.srv)
	m := startMux(t, fmt.Sprintf(`{"mcpServers": {"probe": {"type": "http", "url": %q}}}`, up.URL+"/mcp"), proxy.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	body := modernBody("tools/call", `"name":"probe_block","arguments":{"tag":"closed"}`)
	req := mcpRequest(t, ctx, http.MethodPost, m.ts.URL+"/mcp", modernHeaders("tools/call", "probe_block"), body)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body) // until the stream is closed
			resp.Body.Close()
		}
	}()
	select {
	case <-p.entered: // the call reached the upstream
	case <-time.After(20 * time.Second):
		t.Fatal("the call never reached the upstream")
	}
	cancel()
	select {
	case tag := <-p.cancelled:
		if tag != "closed" {
			t.Fatalf("cancelled %q", tag)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("upstream call not cancelled after the client closed the stream")
	}
	<-done
}

// TestModernListenStreamsBounded: open subscriptions/listen streams count
// against inbound.max_sessions; past it a listen is refused with a clear
// error, and a stream that closes frees its place.
func TestModernListenStreamsBounded(t *testing.T) {
	m := modernMux(t, `, "inbound": {"max_sessions": 2}`)
	body := `{"jsonrpc":"2.0","id":"listen-1","method":"subscriptions/listen","params":{` + modernMeta("{}") +
		`,"notifications":{"toolsListChanged":true}}}`
	hdr := modernHeaders("subscriptions/listen", "")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	first, firstCancel := context.WithCancel(ctx)
	for i, c := range []context.Context{first, ctx} {
		if ack := openStream(t, c, m.ts.URL+"/mcp", hdr, body).next(t); ack["method"] != "notifications/subscriptions/acknowledged" {
			t.Fatalf("listen %d: first message %v, want the acknowledgement", i, ack)
		}
	}
	if _, r := firstEvent(t, ctx, m.ts.URL+"/mcp", hdr, body); !strings.Contains(r, "(inbound.max_sessions)") {
		t.Fatalf("third listen: %v, want a refusal naming inbound.max_sessions", r)
	}
	firstCancel()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, stop := context.WithCancel(ctx)
		_, r := firstEvent(t, c, m.ts.URL+"/mcp", hdr, body)
		stop()
		if strings.Contains(r, "notifications/subscriptions/acknowledged") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a closed listen stream never freed its place")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
