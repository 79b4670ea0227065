package proxy_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/internal/config"
	"github.com/mcp-mux/mcp-mux/internal/mcptest"
	"github.com/mcp-mux/mcp-mux/internal/proxy"
)

// toolServer serves a go-sdk MCP server over HTTP with one tool per spec,
// "name" or "name: description"; each tool answers its own name and counts
// its calls in calls (may be nil). It returns the /mcp URL.
func toolServer(t testing.TB, calls *atomic.Int64, specs ...string) string {
	t.Helper()
	s := mcp.NewServer(&mcp.Implementation{Name: "tools", Version: "test"}, nil)
	for _, spec := range specs {
		name, desc, _ := strings.Cut(spec, ": ")
		s.AddTool(&mcp.Tool{Name: name, Description: desc, InputSchema: map[string]any{"type": "object"}},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				if calls != nil {
					calls.Add(1)
				}
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: name}}}, nil
			})
	}
	return mcptest.ServeHTTP(t, s).URL + "/mcp"
}

// connectVersion is connect with a chosen protocol version. Versions the
// fast path does not serve (2024-11-05) take the SDK path for every call.
func connectVersion(t *testing.T, url, version string, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "test-client", Version: "1"}, opts)
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: url + "/mcp", HTTPClient: testHTTP}, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// listChanged returns client options that count tools/list_changed.
func listChanged() (*mcp.ClientOptions, chan struct{}) {
	ch := make(chan struct{}, 16)
	return &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { ch <- struct{}{} },
	}, ch
}

func waitSignal(t *testing.T, ch chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("no %s", what)
	}
}

func noSignal(t *testing.T, ch chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
		t.Fatalf("unexpected %s", what)
	case <-time.After(300 * time.Millisecond):
	}
}

func guardrailText(name, reason string) string {
	return fmt.Sprintf("Guardrail denied: tool '%s' was blocked (oap.tool_not_allowed). Reason: %s. Choose an alternative approach.", name, reason)
}

func TestGuardrails(t *testing.T) {
	var calls atomic.Int64
	url := toolServer(t, &calls, "forget", "list", "remember", "search")
	tests := []struct {
		name       string
		guardrails string
		listed     []string
		denied     map[string]string // visible name → reason
	}{
		{
			name:       "no restrictions allow all",
			guardrails: `{}`,
			listed:     []string{"openviking_forget", "openviking_list", "openviking_remember", "openviking_search"},
		},
		{
			name:       "denied list",
			guardrails: `{"denied_tools": ["openviking_forget"]}`,
			listed:     []string{"openviking_list", "openviking_remember", "openviking_search"},
			denied:     map[string]string{"openviking_forget": "tool 'openviking_forget' is denied"},
		},
		{
			name:       "allowlist blocks unlisted",
			guardrails: `{"allowed_tools": ["openviking_search", "openviking_list"]}`,
			listed:     []string{"openviking_list", "openviking_search"},
			denied: map[string]string{
				"openviking_forget":   "tool 'openviking_forget' not in allowlist",
				"openviking_remember": "tool 'openviking_remember' not in allowlist",
			},
		},
		{
			name:       "deny wins over allow",
			guardrails: `{"allowed_tools": ["openviking_search", "openviking_forget"], "denied_tools": ["openviking_forget"]}`,
			listed:     []string{"openviking_search"},
			denied: map[string]string{
				"openviking_forget": "tool 'openviking_forget' is denied",
				"openviking_list":   "tool 'openviking_list' not in allowlist",
			},
		},
		{
			name:       "empty allowlist blocks all",
			guardrails: `{"allowed_tools": []}`,
			listed:     nil,
			denied: map[string]string{
				"openviking_search": "tool 'openviking_search' not in allowlist",
				"openviking_forget": "tool 'openviking_forget' not in allowlist",
			},
		},
		{
			name:       "null allowlist allows all",
			guardrails: `{"allowed_tools": null, "denied_tools": ["openviking_list"]}`,
			listed:     []string{"openviking_forget", "openviking_remember", "openviking_search"},
			denied:     map[string]string{"openviking_list": "tool 'openviking_list' is denied"},
		},
		{
			name:       "disabled guardrails ignore the lists",
			guardrails: `{"enabled": false, "allowed_tools": [], "denied_tools": ["openviking_forget"]}`,
			listed:     []string{"openviking_forget", "openviking_list", "openviking_remember", "openviking_search"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := startMux(t, fmt.Sprintf(`{"mcpServers": {"openviking": {"type": "http", "url": %q}}, "guardrails": %s}`, url, tc.guardrails), proxy.Options{})
			for _, version := range []string{"2025-11-25", "2024-11-05"} { // fast path, SDK path
				cs := connectVersion(t, m.ts.URL, version, nil)
				if got := toolNames(t, cs); !slices.Equal(got, tc.listed) {
					t.Errorf("%s: tools/list = %q, want %q", version, got, tc.listed)
				}
				before := calls.Load()
				for name, reason := range tc.denied {
					got, res := callText(t, cs, name, map[string]any{})
					if !res.IsError || got != guardrailText(name, reason) {
						t.Errorf("%s: call %s = isError %v %q, want %q", version, name, res.IsError, got, guardrailText(name, reason))
					}
				}
				if n := calls.Load() - before; n != 0 {
					t.Errorf("%s: %d denied calls reached the upstream", version, n)
				}
				for _, name := range tc.listed {
					if got, res := callText(t, cs, name, map[string]any{}); res.IsError || "openviking_"+got != name {
						t.Errorf("%s: allowed %s = %q isError=%v", version, name, got, res.IsError)
					}
				}
			}
		})
	}
}

// TestGuardrailsHotReload denies a tool by reloading the config: the
// upstream session is kept (its per-session counter goes on), the client is
// told its list changed, and the tool is hidden and uncallable.
func TestGuardrailsHotReload(t *testing.T) {
	web := mcptest.ServeHTTP(t, mcptest.NewServer("web"))
	doc := func(guardrails string) *config.Config {
		cfg, err := config.Parse([]byte(fmt.Sprintf(`{"mcpServers": {"web": {"type": "http", "url": %q}}, "guardrails": %s}`, web.URL+"/mcp", guardrails)), config.LoadOptions{Filename: "t.json"})
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	m := startMux(t, fmt.Sprintf(`{"mcpServers": {"web": {"type": "http", "url": %q}}}`, web.URL+"/mcp"), proxy.Options{})
	opts, changed := listChanged()
	cs := connect(t, m.ts.URL, opts)
	if got, _ := callText(t, cs, "web_count", nil); got != "1" {
		t.Fatalf("count = %q", got)
	}
	if got, _ := callText(t, cs, "web_echo", map[string]any{"text": "before"}); got != "before" {
		t.Fatalf("echo = %q", got)
	}

	if err := m.srv.Apply(doc(`{"denied_tools": ["web_echo"]}`)); err != nil {
		t.Fatal(err)
	}
	waitSignal(t, changed, "tools/list_changed after denying web_echo")
	if names := toolNames(t, cs); contains(names, "web_echo") || !contains(names, "web_count") {
		t.Fatalf("after reload: %v", names)
	}
	got, res := callText(t, cs, "web_echo", map[string]any{"text": "after"})
	if want := guardrailText("web_echo", "tool 'web_echo' is denied"); !res.IsError || got != want {
		t.Fatalf("denied call = %q, want %q", got, want)
	}
	if got, _ := callText(t, cs, "web_count", nil); got != "2" {
		t.Fatalf("count after reload = %q: the upstream session was not kept", got)
	}

	// A reload that changes nothing visible sends nothing; lifting the deny does.
	if err := m.srv.Apply(doc(`{"denied_tools": ["web_echo", "web_nonexistent"]}`)); err != nil {
		t.Fatal(err)
	}
	noSignal(t, changed, "tools/list_changed for a reload that changed nothing visible")
	if err := m.srv.Apply(doc(`{}`)); err != nil {
		t.Fatal(err)
	}
	waitSignal(t, changed, "tools/list_changed after lifting the deny")
	if got, _ := callText(t, cs, "web_echo", map[string]any{"text": "back"}); got != "back" {
		t.Fatalf("echo after lifting the deny = %q", got)
	}
	if names := toolNames(t, cs); !slices.Contains(names, "web_echo") {
		t.Fatalf("web_echo not listed again: %v", names)
	}
}

// TestReadmeGuardrailExample keeps the guardrail example of docs/tools.md
// honest.
func TestReadmeGuardrailExample(t *testing.T) {
	url := toolServer(t, nil, "forget", "search")
	m := startMux(t, fmt.Sprintf(`{
		"mcpServers": {"openviking": {"type": "http", "url": %q}},
		"guardrails": {"denied_tools": ["openviking_forget"]}
	}`, url), proxy.Options{})
	cs := connect(t, m.ts.URL, nil)
	if got := toolNames(t, cs); !slices.Equal(got, []string{"openviking_search"}) {
		t.Errorf("tools/list = %q", got)
	}
	got, _ := callText(t, cs, "openviking_forget", map[string]any{})
	const want = "Guardrail denied: tool 'openviking_forget' was blocked (oap.tool_not_allowed). Reason: tool 'openviking_forget' is denied. Choose an alternative approach."
	if got != want {
		t.Errorf("got %q\nwant %q", got, want)
	}
}
