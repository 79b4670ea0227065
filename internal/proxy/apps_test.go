package proxy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/internal/mcptest"
	"github.com/mcp-mux/mcp-mux/internal/proxy"
)

// MCP Apps through the mux (catalog/apps.go, callpath/apps.go): two
// upstreams each name the UI of their dashboard tool ui://dashboard.

const uiMime = "text/html;profile=mcp-app"

// appUpstream is one MCP Apps server fixture and what it saw.
type appUpstream struct {
	name  string
	url   string
	calls map[string]*atomic.Int64 // tool → calls that reached it
	mu    sync.Mutex
	reads []string // URIs of the resources/reads that reached it
	ui    []string // the io.modelcontextprotocol/ui settings each call declared ("" for none)
}

// newAppUpstream serves, as go-sdk does in both eras: show_dashboard
// (its UI ui://dashboard, in the extension's _meta.ui.resourceUri and the
// older _meta["ui/resourceUri"]), refresh (on both servers: an app's
// ambiguous raw name), own (this server's only: an unambiguous raw name),
// link (a resource_link and an embedded resource of ui://dashboard); the
// resource ui://dashboard (HTML naming the server) and the template
// ui://widgets/{id}. declare: the server declares the extension (else it
// is known as an app server by its tools' UI links only).
func newAppUpstream(t *testing.T, name, own string, declare bool) *appUpstream {
	t.Helper()
	u := &appUpstream{name: name, calls: map[string]*atomic.Int64{}}
	opts := &mcp.ServerOptions{}
	if declare {
		opts.Capabilities = &mcp.ServerCapabilities{}
		opts.Capabilities.AddExtension("io.modelcontextprotocol/ui", nil)
	}
	s := mcp.NewServer(&mcp.Implementation{Name: name, Version: "test"}, opts)
	tool := func(tl *mcp.Tool, content func() []mcp.Content) {
		n := &atomic.Int64{}
		u.calls[tl.Name] = n
		tl.InputSchema = map[string]any{"type": "object"}
		s.AddTool(tl, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			n.Add(1)
			u.noteUI(req.ClientCapabilities())
			return &mcp.CallToolResult{Content: content()}, nil
		})
	}
	text := func(s string) func() []mcp.Content {
		return func() []mcp.Content { return []mcp.Content{&mcp.TextContent{Text: s}} }
	}
	tool(&mcp.Tool{Name: "show_dashboard", Meta: mcp.Meta{"ui": map[string]any{"resourceUri": "ui://dashboard"}, "ui/resourceUri": "ui://dashboard"}}, text(name+" dashboard"))
	tool(&mcp.Tool{Name: "refresh", Meta: mcp.Meta{"ui": map[string]any{"visibility": []string{"app"}}}}, text(name+" refreshed"))
	tool(&mcp.Tool{Name: own}, text(name+" "+own))
	tool(&mcp.Tool{Name: "link"}, func() []mcp.Content {
		return []mcp.Content{
			&mcp.ResourceLink{URI: "ui://dashboard", Name: "dashboard", MIMEType: uiMime},
			&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "ui://dashboard", MIMEType: uiMime, Text: "<p>" + name + " embedded</p>"}},
			&mcp.ResourceLink{URI: "https://example.com/x", Name: "web"},
		}
	})
	read := func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		u.mu.Lock()
		u.reads = append(u.reads, req.Params.URI)
		u.mu.Unlock()
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, MIMEType: uiMime, Text: "<html>" + name + " " + req.Params.URI + "</html>"}}}, nil
	}
	s.AddResource(&mcp.Resource{URI: "ui://dashboard", Name: "dashboard", MIMEType: uiMime}, read)
	s.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: "ui://widgets/{id}", Name: "widget", MIMEType: uiMime}, read)
	u.url = mcptest.ServeHTTPBothEras(t, s).URL + "/mcp"
	return u
}

// noteUI records the extension's settings a call's client declared.
func (u *appUpstream) noteUI(c *mcp.ClientCapabilities) {
	v := ""
	if c != nil {
		if s, ok := c.Extensions["io.modelcontextprotocol/ui"]; ok {
			b, _ := json.Marshal(s)
			v = string(b)
		}
	}
	u.mu.Lock()
	u.ui = append(u.ui, v)
	u.mu.Unlock()
}

// lastUI is the extension's settings the latest call declared.
func (u *appUpstream) lastUI() string {
	u.mu.Lock()
	defer u.mu.Unlock()
	if len(u.ui) == 0 {
		return "(no call)"
	}
	return u.ui[len(u.ui)-1]
}

// lastRead is the URI of the latest resources/read that reached u.
func (u *appUpstream) lastRead() string {
	u.mu.Lock()
	defer u.mu.Unlock()
	if len(u.reads) == 0 {
		return ""
	}
	return u.reads[len(u.reads)-1]
}

// appsMux starts a mux over alpha (declares the extension, prefixed) and
// beta (known by its tools, tool_name_prefix false is not possible with a
// shared tool name, so it is prefixed too), with profile "a" (alpha only)
// for alice; carol sees everything.
func appsMux(t *testing.T) (*mux, *appUpstream, *appUpstream) {
	t.Helper()
	alpha := newAppUpstream(t, "alpha", "zoom", true)
	beta := newAppUpstream(t, "beta", "pan", false)
	cfg := fmt.Sprintf(`{"mcpServers": {"alpha": {"type": "http", "url": %q}, "beta": {"type": "http", "url": %q}},
	  "profiles": {"a": {"servers": ["alpha"]}},
	  "inbound": {"auth": {"mode": "api_keys", "keys": {"alice": "$ALICE_KEY", "carol": "$CAROL_KEY"}},
	    "profile_by": {"api_keys": {"alice": "a"}}}}`, alpha.url, beta.url)
	m, _ := startMuxEnv(t, cfg, map[string]string{"ALICE_KEY": aliceKey, "CAROL_KEY": carolKey}, proxy.Options{})
	return m, alpha, beta
}

// connectApp opens a session of version ("" for the SDK's newest, the
// 2026-07-28 era) with an api key ("" for none), declaring the MCP Apps
// extension.
func connectApp(t *testing.T, m *mux, key, version string) *mcp.ClientSession {
	t.Helper()
	caps := &mcp.ClientCapabilities{}
	caps.AddExtension("io.modelcontextprotocol/ui", map[string]any{"mimeTypes": []string{uiMime, "text/x-other"}})
	c := mcp.NewClient(&mcp.Implementation{Name: "apps-host", Version: "1"}, &mcp.ClientOptions{Capabilities: caps})
	var so *mcp.ClientSessionOptions
	if version != "" {
		so = &mcp.ClientSessionOptions{ProtocolVersion: version}
	}
	rt := &clientRT{static: http.Header{}}
	if key != "" {
		rt.static.Set("Authorization", "Bearer "+key)
	}
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: m.ts.URL + "/mcp", HTTPClient: &http.Client{Transport: rt}}, so)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// uiLinks is each listed tool's UI link: _meta.ui.resourceUri, and the
// older _meta["ui/resourceUri"] after a space.
func uiLinks(t *testing.T, cs *mcp.ClientSession) map[string]string {
	t.Helper()
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, tl := range res.Tools {
		ui, _ := tl.Meta["ui"].(map[string]any)
		if u, ok := ui["resourceUri"].(string); ok {
			out[tl.Name] = u + " " + fmt.Sprint(tl.Meta["ui/resourceUri"])
		}
	}
	return out
}

// readText reads uri and returns its one content's URI and text.
func readText(ctx context.Context, cs *mcp.ClientSession, uri string) (string, string, error) {
	res, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
	if err != nil {
		return "", "", err
	}
	if len(res.Contents) != 1 {
		return "", "", fmt.Errorf("%d contents", len(res.Contents))
	}
	return res.Contents[0].URI, res.Contents[0].Text, nil
}

// TestAppsThroughTheMux is issue 38's MCP Apps test, in both eras.
func TestAppsThroughTheMux(t *testing.T) {
	for _, version := range []string{"2025-11-25", ""} {
		era := version
		if era == "" {
			era = "2026-07-28"
		}
		t.Run(era, func(t *testing.T) { testApps(t, version) })
	}
}

func testApps(t *testing.T, version string) {
	m, alpha, beta := appsMux(t)
	ctx := context.Background()
	carol := connectApp(t, m, carolKey, version)
	if v := carol.InitializeResult().ProtocolVersion; version != "" && v != version || version == "" && v != "2026-07-28" {
		t.Fatalf("negotiated %q", v)
	}
	// The extension is advertised: an upstream serves it.
	if _, ok := carol.InitializeResult().Capabilities.Extensions["io.modelcontextprotocol/ui"]; !ok {
		t.Errorf("capabilities %+v lack io.modelcontextprotocol/ui", carol.InitializeResult().Capabilities)
	}

	// tools/list: each dashboard tool's UI names its own server.
	want := map[string]string{
		"alpha_show_dashboard": "ui://alpha/dashboard ui://alpha/dashboard",
		"beta_show_dashboard":  "ui://beta/dashboard ui://beta/dashboard",
	}
	if got := uiLinks(t, carol); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("UI links %v, want %v", got, want)
	}
	// resources/list and templates: the server segment, the scheme kept.
	lr, err := carol.ListResources(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var uris []string
	for _, r := range lr.Resources {
		uris = append(uris, r.URI)
	}
	if got := strings.Join(uris, " "); got != "ui://alpha/dashboard ui://beta/dashboard" {
		t.Errorf("resources %q", got)
	}
	lt, err := carol.ListResourceTemplates(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var tmpls []string
	for _, r := range lt.ResourceTemplates {
		tmpls = append(tmpls, r.URITemplate)
	}
	if got := strings.Join(tmpls, " "); got != "ui://alpha/widgets/{id} ui://beta/widgets/{id}" {
		t.Errorf("templates %q", got)
	}

	// resources/read of each tool's UI: the right server's HTML, read with
	// its own URI, answered with the listed one.
	for _, up := range []*appUpstream{alpha, beta} {
		for listed, own := range map[string]string{"ui://" + up.name + "/dashboard": "ui://dashboard", "ui://" + up.name + "/widgets/7": "ui://widgets/7"} {
			uri, text, err := readText(ctx, carol, listed)
			if err != nil {
				t.Fatalf("read %s: %v", listed, err)
			}
			if text != "<html>"+up.name+" "+own+"</html>" || uri != listed || up.lastRead() != own {
				t.Errorf("read %s: uri %q text %q, %s read %q", listed, uri, text, up.name, up.lastRead())
			}
		}
	}
	if _, _, err := readText(ctx, carol, "ui://dashboard"); err == nil {
		t.Error("the unprefixed ui://dashboard was read; it names no server")
	}
	if _, _, err := readText(ctx, carol, "ui://gamma/dashboard"); err == nil {
		t.Error("ui://gamma/dashboard was read; no server is named gamma")
	}

	// An app's calls by its server's own tool names.
	if text, isErr := mustCall(t, ctx, carol, "zoom", nil); isErr || text != "alpha zoom" || alpha.calls["zoom"].Load() != 1 {
		t.Errorf("raw zoom: %q %v, alpha ran it %d times", text, isErr, alpha.calls["zoom"].Load())
	}
	if text, isErr := mustCall(t, ctx, carol, "pan", nil); isErr || text != "beta pan" || beta.calls["pan"].Load() != 1 {
		t.Errorf("raw pan: %q %v, beta ran it %d times", text, isErr, beta.calls["pan"].Load())
	}
	if _, _, err := call(ctx, carol, "refresh", nil); err == nil || !strings.Contains(err.Error(), "alpha_refresh, beta_refresh") {
		t.Errorf("ambiguous raw refresh: %v", err)
	}
	res, err := carol.CallTool(ctx, &mcp.CallToolParams{Name: "refresh", Arguments: map[string]any{}, Meta: mcp.Meta{"mux/uiResource": "ui://beta/dashboard"}})
	if err != nil || res.IsError || res.Content[0].(*mcp.TextContent).Text != "beta refreshed" {
		t.Fatalf("refresh from beta's app: %v %+v", err, res)
	}
	if a, b := alpha.calls["refresh"].Load(), beta.calls["refresh"].Load(); a != 0 || b != 1 {
		t.Errorf("refresh ran %d times on alpha, %d on beta; want 0, 1", a, b)
	}
	// The call sessions declare the extension as the client did (only the
	// MCP App MIME type).
	if got := beta.lastUI(); got != `{"mimeTypes":["`+uiMime+`"]}` {
		t.Errorf("beta's call session declared ui %q", got)
	}

	// A tool result's resource_link and embedded resource carry the server.
	lres, err := carol.CallTool(ctx, &mcp.CallToolParams{Name: "beta_link", Arguments: map[string]any{}})
	if err != nil || len(lres.Content) != 3 {
		t.Fatalf("beta_link: %v %+v", err, lres)
	}
	rl, _ := lres.Content[0].(*mcp.ResourceLink)
	er, _ := lres.Content[1].(*mcp.EmbeddedResource)
	web, _ := lres.Content[2].(*mcp.ResourceLink)
	if rl == nil || er == nil || web == nil || rl.URI != "ui://beta/dashboard" || er.Resource.URI != "ui://beta/dashboard" || web.URI != "https://example.com/x" {
		t.Errorf("beta_link content %+v %+v %+v", rl, er, web)
	} else if _, text, err := readText(ctx, carol, rl.URI); err != nil || text != "<html>beta ui://dashboard</html>" {
		t.Errorf("reading the returned link: %q %v", text, err)
	}

	// Profile a (alpha only): beta's tool is not listed, its UI not read;
	// refresh is alpha's alone in this view.
	alice := connectApp(t, m, aliceKey, version)
	if got := uiLinks(t, alice); fmt.Sprint(got) != "map[alpha_show_dashboard:ui://alpha/dashboard ui://alpha/dashboard]" {
		t.Errorf("alice's UI links %v", got)
	}
	if _, _, err := readText(ctx, alice, "ui://beta/dashboard"); err == nil || !strings.Contains(strings.ToLower(err.Error()), "resource not found") {
		t.Errorf("alice reads beta's UI: %v", err)
	}
	if _, _, err := readText(ctx, alice, "ui://alpha/dashboard"); err != nil {
		t.Errorf("alice reads alpha's UI: %v", err)
	}
	if _, _, err := call(ctx, alice, "pan", nil); err == nil || !strings.Contains(err.Error(), unknownTool("pan")) {
		t.Errorf("alice calls beta's pan: %v", err)
	}
	before := alpha.calls["refresh"].Load()
	if text, isErr := mustCall(t, ctx, alice, "refresh", nil); isErr || text != "alpha refreshed" || alpha.calls["refresh"].Load() != before+1 {
		t.Errorf("alice's raw refresh: %q %v", text, isErr)
	}
	if n := beta.calls["refresh"].Load(); n != 1 {
		t.Errorf("beta ran refresh %d times, want 1 (carol's)", n)
	}
}

// TestAppsRawNameIsTheVisibleName: an app's raw-name call is the
// prefixed name's call: a guardrail that denies beta_pan denies pan, which
// never reaches beta; with tool_name_prefix false the UI still names the
// server.
func TestAppsRawNameIsTheVisibleName(t *testing.T) {
	alpha := newAppUpstream(t, "alpha", "zoom", true)
	beta := newAppUpstream(t, "beta", "pan", false)
	m := startMux(t, fmt.Sprintf(`{"mcpServers": {"alpha": {"type": "http", "url": %q, "tool_name_prefix": false}, "beta": {"type": "http", "url": %q}},
	  "guardrails": {"enabled": true, "denied_tools": ["beta_pan"]}}`, alpha.url, beta.url), proxy.Options{})
	ctx := context.Background()
	cs := connect(t, m.ts.URL, nil)
	text, isErr := mustCall(t, ctx, cs, "pan", nil)
	if !isErr || !strings.Contains(text, "beta_pan") || beta.calls["pan"].Load() != 0 {
		t.Errorf("raw pan under a guardrail on beta_pan: %q %v, beta ran it %d times", text, isErr, beta.calls["pan"].Load())
	}
	if got := uiLinks(t, cs)["show_dashboard"]; got != "ui://alpha/dashboard ui://alpha/dashboard" {
		t.Errorf("unprefixed alpha's UI link %q", got)
	}
	if _, text, err := readText(ctx, cs, "ui://alpha/dashboard"); err != nil || text != "<html>alpha ui://dashboard</html>" {
		t.Errorf("read alpha's UI: %q %v", text, err)
	}
}
