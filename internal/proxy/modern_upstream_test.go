package proxy_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/internal/proxy"
)

// paramServer is a 2026-07-28 (stateless) go-sdk server whose "route" tool
// annotates arguments with x-mcp-header; the SDK server rejects a call whose
// Mcp-Param-* headers do not match its arguments, and the tool reports the
// headers it got.
func paramServer(t *testing.T) string {
	t.Helper()
	s := mcp.NewServer(&mcp.Implementation{Name: "params", Version: "1"}, nil)
	schema := map[string]any{"type": "object", "properties": map[string]any{
		"region": map[string]any{"type": "string", "x-mcp-header": "Region"},
		"count":  map[string]any{"type": "integer", "x-mcp-header": "Count"},
		"dry":    map[string]any{"type": "boolean", "x-mcp-header": "Dry-Run"},
		"scope": map[string]any{"type": "object", "properties": map[string]any{
			"tenant": map[string]any{"type": "string", "x-mcp-header": "Tenant"},
		}},
		"note": map[string]any{"type": "string"},
	}}
	s.AddTool(&mcp.Tool{Name: "route", InputSchema: schema},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var parts []string
			for _, h := range []string{"Region", "Count", "Dry-Run", "Tenant", "Note"} {
				parts = append(parts, h+"="+req.Extra.Header.Get("Mcp-Param-"+h))
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.Join(parts, ";")}}}, nil
		})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{Stateless: true})
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	return ts.URL + "/mcp"
}

// A legacy client sends no Mcp-Param-* headers: mcp-mux writes them from the
// arguments for a 2026-07-28 upstream, encoding values that are not plain
// printable ASCII, and the upstream (which checks them) runs the call.
func TestLegacyClientGetsParamHeaders(t *testing.T) {
	m := startMux(t, fmt.Sprintf(`{"mcpServers": {"p": {"type": "http", "url": %q}}}`, paramServer(t)), proxy.Options{})
	cs := connect(t, m.ts.URL, nil)
	got, res := callText(t, cs, "p_route", map[string]any{
		"region": "München", "count": 42, "dry": true, "scope": map[string]any{"tenant": " acme"}, "note": "x"})
	if res.IsError {
		t.Fatalf("call failed: %s", got)
	}
	want := "Region==?base64?TcO8bmNoZW4=?=;Count=42;Dry-Run=true;Tenant==?base64?IGFjbWU=?=;Note="
	if got != want {
		t.Fatalf("upstream saw %q, want %q", got, want)
	}
	// Absent arguments get no header (the upstream rejects one that is sent).
	got, res = callText(t, cs, "p_route", map[string]any{"region": "eu-west-1"})
	if res.IsError || got != "Region=eu-west-1;Count=;Dry-Run=;Tenant=;Note=" {
		t.Fatalf("call with one argument: %q (error %v)", got, res.IsError)
	}
}

// A 2026-07-28 client's Mcp-Param-* headers are checked against the
// arguments; the upstream's are written from the arguments (a missing one
// too).
func TestModernClientParamHeadersChecked(t *testing.T) {
	m := startMux(t, fmt.Sprintf(`{"mcpServers": {"p": {"type": "http", "url": %q}}}`, paramServer(t)), proxy.Options{})
	url := m.ts.URL + "/mcp"
	_, r := modernCall(t, url, map[string]string{"Mcp-Param-Region": "eu"}, `{}`, "tools/call", "p_route", `"name":"p_route","arguments":{"region":"eu","count":7}`)
	if r.Error != nil || !strings.Contains(string(r.Result), "Region=eu;Count=7;") {
		t.Fatalf("modern call: %s %+v", r.Result, r.Error)
	}
	// A mismatching header of the client's is refused before any upstream.
	status, r := modernCall(t, url, map[string]string{"Mcp-Param-Region": "us"}, `{}`, "tools/call", "p_route", `"name":"p_route","arguments":{"region":"eu"}`)
	if status != http.StatusBadRequest || r.Error == nil || r.Error.Code != -32020 {
		t.Fatalf("a mismatching client header was not refused: %d %s %+v", status, r.Result, r.Error)
	}
}

// subsServer is a 2026-07-28 (stateless) go-sdk server with one subscribable
// resource; it reports each subscription (a subscriptions/listen naming the
// URI) and its end, and every method it is sent.
type subsServer struct {
	*mcp.Server
	url                      string
	subscribed, unsubscribed chan string
	methods                  chan string
}

func newSubsServer(t *testing.T) *subsServer {
	t.Helper()
	ss := &subsServer{subscribed: make(chan string, 16), unsubscribed: make(chan string, 16), methods: make(chan string, 256)}
	ss.Server = mcp.NewServer(&mcp.Implementation{Name: "subs", Version: "1"}, &mcp.ServerOptions{
		SubscribeHandler: func(_ context.Context, req *mcp.SubscribeRequest) error {
			ss.subscribed <- req.Params.URI
			return nil
		},
		UnsubscribeHandler: func(_ context.Context, req *mcp.UnsubscribeRequest) error {
			ss.unsubscribed <- req.Params.URI
			return nil
		},
	})
	ss.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			select {
			case ss.methods <- method:
			default:
			}
			return next(ctx, method, req)
		}
	})
	ss.AddResource(&mcp.Resource{URI: "res://a", Name: "a"}, func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: "res://a", Text: "A"}}}, nil
	})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return ss.Server }, &mcp.StreamableHTTPOptions{Stateless: true})
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	ss.url = ts.URL + "/mcp"
	return ss
}

func recvString(t *testing.T, ch <-chan string, what string) string {
	t.Helper()
	select {
	case s := <-ch:
		return s
	case <-time.After(30 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
		return ""
	}
}

// noMethod fails if the server was sent method.
func (ss *subsServer) noMethod(t *testing.T, method string) {
	t.Helper()
	for {
		select {
		case m := <-ss.methods:
			if m == method {
				t.Errorf("the 2026-07-28 server was sent %s", method)
			}
		default:
			return
		}
	}
}

// A legacy client's resources/subscribe for a 2026-07-28 server's resource
// becomes a subscriptions/listen naming the URI; the server's update reaches
// the client, and unsubscribing ends the upstream listen.
func TestLegacySubscribeModernUpstream(t *testing.T) {
	up := newSubsServer(t)
	m := startMux(t, fmt.Sprintf(`{"mcpServers": {"r": {"type": "http", "url": %q}}}`, up.url), proxy.Options{})
	updates := make(chan string, 4)
	cs := connect(t, m.ts.URL, &mcp.ClientOptions{ResourceUpdatedHandler: func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
		updates <- fmt.Sprintf("%s %v", req.Params.URI, req.Params.Meta)
	}})
	ctx := context.Background()
	if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: "res://a"}); err != nil {
		t.Fatalf("subscribe: %v", err)
	}
	if got := recvString(t, up.subscribed, "the upstream subscription"); got != "res://a" {
		t.Fatalf("upstream subscribed to %q", got)
	}
	if err := up.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: "res://a"}); err != nil {
		t.Fatal(err)
	}
	if got := recvString(t, updates, "the update"); got != "res://a map[]" {
		t.Fatalf("client got update %q (the upstream's subscriptionId must not leak)", got)
	}
	if err := cs.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: "res://a"}); err != nil {
		t.Fatalf("unsubscribe: %v", err)
	}
	if got := recvString(t, up.unsubscribed, "the upstream listen to end"); got != "res://a" {
		t.Fatalf("upstream unsubscribed %q", got)
	}
	up.noMethod(t, "resources/subscribe")
}

// A 2026-07-28 client's subscriptions/listen naming a 2026-07-28 server's
// resource: the update arrives tagged with the client's listen id, and
// closing the stream ends the upstream listen.
func TestModernListenModernUpstreamResource(t *testing.T) {
	up := newSubsServer(t)
	m := startMux(t, fmt.Sprintf(`{"mcpServers": {"r": {"type": "http", "url": %q}}}`, up.url), proxy.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	body := `{"jsonrpc":"2.0","id":"listen-r","method":"subscriptions/listen","params":{` + modernMeta("{}") +
		`,"notifications":{"resourceSubscriptions":["res://a"]}}}`
	s := openStream(t, ctx, m.ts.URL+"/mcp", modernHeaders("subscriptions/listen", ""), body)
	if ack := s.next(t); ack["method"] != "notifications/subscriptions/acknowledged" {
		t.Fatalf("first message %v", ack)
	}
	recvString(t, up.subscribed, "the upstream subscription")
	if err := up.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: "res://a"}); err != nil {
		t.Fatal(err)
	}
	n := s.next(t)
	p, _ := n["params"].(map[string]any)
	if n["method"] != "notifications/resources/updated" || p["uri"] != "res://a" ||
		p["_meta"].(map[string]any)["io.modelcontextprotocol/subscriptionId"] != "listen-r" {
		t.Fatalf("got %v", n)
	}
	_ = s.body.Close()
	if got := recvString(t, up.unsubscribed, "the upstream listen to end"); got != "res://a" {
		t.Fatalf("upstream unsubscribed %q", got)
	}
	up.noMethod(t, "resources/subscribe")
}
