package proxy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/internal/mcptest"
	"github.com/mcp-mux/mcp-mux/internal/proxy"
)

// probeServer is an upstream whose tools report what happened to them.
type probeServer struct {
	srv          *mcp.Server
	entered      chan string // tag of a block call that reached the server
	cancelled    chan string // tag of a block call whose context ended
	rootsChanged chan struct{}
}

func newProbeServer() *probeServer {
	p := &probeServer{entered: make(chan string, 8), cancelled: make(chan string, 8), rootsChanged: make(chan struct{}, 8)}
	p.srv = mcp.NewServer(&mcp.Implementation{Name: "probe", Version: "1"}, &mcp.ServerOptions{
		RootsListChangedHandler: func(context.Context, *mcp.RootsListChangedRequest) { p.rootsChanged <- struct{}{} },
	})
	mcp.AddTool(p.srv, &mcp.Tool{Name: "block", Description: "Block until cancelled."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in mcptest.TagArgs) (*mcp.CallToolResult, any, error) {
			p.entered <- in.Tag
			select {
			case <-ctx.Done():
				p.cancelled <- in.Tag
				return nil, nil, ctx.Err()
			case <-time.After(30 * time.Second):
				return nil, nil, fmt.Errorf("never cancelled")
			}
		})
	p.srv.AddTool(&mcp.Tool{Name: "roots", Description: "List the client's roots.", InputSchema: map[string]any{"type": "object"}},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			res, err := req.Session.ListRoots(ctx, nil)
			if err != nil {
				return nil, err
			}
			var uris []string
			for _, r := range res.Roots {
				uris = append(uris, r.URI)
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.Join(uris, ",")}}}, nil
		})
	return p
}

func TestDownstreamCancellationCancelsUpstreamCall(t *testing.T) {
	p := newProbeServer()
	up := mcptest.ServeHTTP(t, p.srv)
	m := startMux(t, fmt.Sprintf(`{"mcpServers": {"probe": {"type": "http", "url": %q}}}`, up.URL+"/mcp"), proxy.Options{})
	cs := connect(t, m.ts.URL, nil)

	// notifications/cancelled from the client (the SDK client sends it when the call's context ends).
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "probe_block", Arguments: map[string]any{"tag": "notified"}})
		errc <- err
	}()
	p.waitEntered(t, "notified")
	cancel()
	select {
	case tag := <-p.cancelled:
		if tag != "notified" {
			t.Fatalf("cancelled %q", tag)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("upstream call not cancelled after notifications/cancelled")
	}
	<-errc

	// A client that disconnects: a raw POST whose connection is closed mid-call.
	sid := sessionID(t, m.ts.URL)
	body := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"probe_block","arguments":{"tag":"disconnected"}}}`
	rctx, rcancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(rctx, http.MethodPost, m.ts.URL+"/mcp", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", sid)
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	go func() {
		select { // the call reached the upstream: disconnect
		case tag := <-p.entered:
			if tag != "disconnected" {
				t.Errorf("entered %q, want disconnected", tag)
			}
		case <-time.After(10 * time.Second):
			t.Error("the raw call never reached the upstream")
		}
		rcancel()
	}()
	if resp, err := testHTTP.Do(req); err == nil {
		resp.Body.Close()
	}
	select {
	case tag := <-p.cancelled:
		if tag != "disconnected" {
			t.Fatalf("cancelled %q", tag)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("upstream call not cancelled after the client disconnected")
	}
}

// waitEntered waits for the block call tagged tag to reach the server.
func (p *probeServer) waitEntered(t *testing.T, tag string) {
	t.Helper()
	select {
	case got := <-p.entered:
		if got != tag {
			t.Fatalf("entered %q, want %q", got, tag)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("the %s call never reached the upstream", tag)
	}
}

// sessionID initializes a raw session and returns its id.
func sessionID(t *testing.T, base string) string {
	t.Helper()
	post := func(body, sid string) *http.Response {
		req, _ := http.NewRequest(http.MethodPost, base+"/mcp", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if sid != "" {
			req.Header.Set("Mcp-Session-Id", sid)
			req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		}
		resp, err := testHTTP.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	resp := post(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`, "")
	resp.Body.Close()
	sid := resp.Header.Get("Mcp-Session-Id")
	if sid == "" {
		t.Fatal("no session id")
	}
	post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`, sid).Body.Close()
	return sid
}

func TestRootsRequestAndListChangedReachTheRightPlaces(t *testing.T) {
	p := newProbeServer()
	up := mcptest.ServeHTTP(t, p.srv)
	cfg := fmt.Sprintf(`{"mcpServers": {"probe": {"type": "http", "url": %q}, %s}}`, up.URL+"/mcp",
		stdioServerJSON(t, "local", mcptest.StdioOptions{}, ""))
	m := startMux(t, cfg, proxy.Options{})
	client := mcp.NewClient(&mcp.Implementation{Name: "roots-client", Version: "1"}, nil)
	client.AddRoots(&mcp.Root{URI: "file:///work/a", Name: "a"})
	// notifications/roots/list_changed is a legacy-era message (2026-07-28
	// clients have no such notification; roots travel per request).
	cs, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: m.ts.URL + "/mcp", HTTPClient: testHTTP}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if got, _ := callText(t, cs, "probe_roots", nil); got != "file:///work/a" {
		t.Fatalf("upstream saw roots %q", got)
	}
	client.AddRoots(&mcp.Root{URI: "file:///work/b", Name: "b"})
	select {
	case <-p.rootsChanged:
	case <-time.After(10 * time.Second):
		t.Fatal("upstream not told that the client's roots changed")
	}
	if got, _ := callText(t, cs, "probe_roots", nil); got != "file:///work/a,file:///work/b" {
		t.Fatalf("upstream saw roots %q after the change", got)
	}
}

func TestUpstreamListChangesReachClients(t *testing.T) {
	srv := mcptest.NewServer("web")
	up := mcptest.ServeHTTP(t, srv)
	m := startMux(t, fmt.Sprintf(`{"mcpServers": {"web": {"type": "http", "url": %q}}}`, up.URL+"/mcp"), proxy.Options{})
	var tools, prompts atomic.Int32
	cs := connect(t, m.ts.URL, &mcp.ClientOptions{
		ToolListChangedHandler:   func(context.Context, *mcp.ToolListChangedRequest) { tools.Add(1) },
		PromptListChangedHandler: func(context.Context, *mcp.PromptListChangedRequest) { prompts.Add(1) },
	})
	if contains(toolNames(t, cs), "web_fresh") {
		t.Fatal("tool exists before it was added")
	}
	srv.AddTool(&mcp.Tool{Name: "fresh", Description: "new", InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "fresh"}}}, nil
		})
	srv.AddPrompt(&mcp.Prompt{Name: "greet", Description: "Say hi"}, func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: "hi"}}}}, nil
	})
	waitFor(t, "tools/list_changed", func() bool { return tools.Load() > 0 })
	waitFor(t, "prompts/list_changed", func() bool { return prompts.Load() > 0 })
	if got, _ := callText(t, cs, "web_fresh", nil); got != "fresh" {
		t.Fatalf("web_fresh = %q", got)
	}
	pr, err := cs.GetPrompt(context.Background(), &mcp.GetPromptParams{Name: "web_greet"})
	if err != nil || pr.Messages[0].Content.(*mcp.TextContent).Text != "hi" {
		t.Fatalf("prompts/get web_greet: %v %+v", err, pr)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestResourcesPaginateAcrossServers(t *testing.T) {
	var ups []string
	for _, name := range []string{"one", "two"} {
		s := mcptest.NewServer(name)
		for i := range 3 {
			uri := fmt.Sprintf("test://%s/%d", name, i)
			s.AddResource(&mcp.Resource{URI: uri, Name: fmt.Sprintf("%s-%d", name, i), MIMEType: "text/plain"},
				func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
					return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, Text: "content of " + uri}}}, nil
				})
		}
		ups = append(ups, mcptest.ServeHTTP(t, s).URL+"/mcp")
	}
	m := startMux(t, fmt.Sprintf(`{"mcpServers": {"one": {"type": "http", "url": %q}, "two": {"type": "http", "url": %q}}}`, ups[0], ups[1]),
		proxy.Options{PageSize: 2})
	cs := connect(t, m.ts.URL, nil)
	var uris []string
	pages := 0
	for r, err := range cs.Resources(context.Background(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		uris = append(uris, r.URI)
	}
	res, err := cs.ListResources(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for c := res.NextCursor; c != ""; pages++ {
		r, err := cs.ListResources(context.Background(), &mcp.ListResourcesParams{Cursor: c})
		if err != nil {
			t.Fatal(err)
		}
		c = r.NextCursor
	}
	if len(uris) != 6 || uris[0] != "test://one/0" || uris[5] != "test://two/2" || pages != 2 {
		t.Fatalf("resources across pages = %v (%d extra pages)", uris, pages)
	}
	for _, uri := range []string{"test://one/1", "test://two/2"} {
		rr, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: uri})
		if err != nil || rr.Contents[0].Text != "content of "+uri {
			t.Errorf("read %s: %v %+v", uri, err, rr)
		}
	}
	if _, err := cs.ListResources(context.Background(), &mcp.ListResourcesParams{Cursor: "!!bogus"}); err == nil {
		t.Error("a bogus cursor was accepted")
	}
}

func TestHTTPUpstreamRestartIsReinitializedTransparently(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var handler atomic.Pointer[http.Handler]
	var current *mcp.Server
	setFresh := func() {
		if current != nil { // the old process is gone, and so are its sessions
			for ss := range current.Sessions() {
				_ = ss.Close()
			}
		}
		srv := mcptest.NewServer("web")
		current = srv
		h := http.Handler(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
		handler.Store(&h)
	}
	setFresh()
	ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { (*handler.Load()).ServeHTTP(w, r) }))
	ts.Listener.Close()
	ts.Listener = ln
	ts.Start()
	t.Cleanup(ts.Close)
	m := startMux(t, fmt.Sprintf(`{"mcpServers": {"web": {"type": "http", "url": %q}}}`, ts.URL+"/mcp"), proxy.Options{})
	cs := connect(t, m.ts.URL, nil)
	if got, _ := callText(t, cs, "web_count", nil); got != "1" {
		t.Fatalf("count = %q", got)
	}
	setFresh() // the upstream "restarts": every session it knew is gone
	got, res := callText(t, cs, "web_count", nil)
	if res.IsError || got != "1" {
		t.Fatalf("after restart: count = %q isError=%v (want a fresh session)", got, res.IsError)
	}
	raw, _ := json.Marshal(res.Content)
	if strings.Contains(string(raw), "expired") {
		t.Fatalf("expiry leaked to the client: %s", raw)
	}
}

func TestResourceSubscriptionsDeliverUpdates(t *testing.T) {
	var subs atomic.Int32
	srv := mcp.NewServer(&mcp.Implementation{Name: "watch", Version: "1"}, &mcp.ServerOptions{
		SubscribeHandler:   func(context.Context, *mcp.SubscribeRequest) error { subs.Add(1); return nil },
		UnsubscribeHandler: func(context.Context, *mcp.UnsubscribeRequest) error { subs.Add(-1); return nil },
	})
	const uri = "test://watched"
	srv.AddResource(&mcp.Resource{URI: uri, Name: "watched"}, func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, Text: "v"}}}, nil
	})
	up := mcptest.ServeHTTP(t, srv)
	m := startMux(t, fmt.Sprintf(`{"mcpServers": {"watch": {"type": "http", "url": %q}}}`, up.URL+"/mcp"), proxy.Options{})
	var got [2]atomic.Int32
	var css [2]*mcp.ClientSession
	for i := range css {
		css[i] = connect(t, m.ts.URL, &mcp.ClientOptions{
			ResourceUpdatedHandler: func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
				if req.Params.URI == uri {
					got[i].Add(1)
				}
			},
		})
		if err := css[i].Subscribe(context.Background(), &mcp.SubscribeParams{URI: uri}); err != nil {
			t.Fatal(err)
		}
	}
	if n := subs.Load(); n != 1 {
		t.Fatalf("upstream holds %d subscriptions for two clients, want 1", n)
	}
	_ = srv.ResourceUpdated(context.Background(), &mcp.ResourceUpdatedNotificationParams{URI: uri})
	waitFor(t, "both clients notified", func() bool { return got[0].Load() == 1 && got[1].Load() == 1 })

	if err := css[0].Unsubscribe(context.Background(), &mcp.UnsubscribeParams{URI: uri}); err != nil {
		t.Fatal(err)
	}
	_ = srv.ResourceUpdated(context.Background(), &mcp.ResourceUpdatedNotificationParams{URI: uri})
	waitFor(t, "the remaining subscriber notified", func() bool { return got[1].Load() == 2 })
	if got[0].Load() != 1 {
		t.Errorf("an unsubscribed client got %d updates", got[0].Load())
	}
	_ = css[1].Close() // the last subscriber leaves: the upstream subscription ends
	waitFor(t, "upstream unsubscribed", func() bool { return subs.Load() == 0 })
}
