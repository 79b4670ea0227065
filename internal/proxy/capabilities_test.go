package proxy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/internal/config"
	"github.com/mcp-mux/mcp-mux/internal/mcptest"
	"github.com/mcp-mux/mcp-mux/internal/proxy"
	"github.com/mcp-mux/mcp-mux/internal/taskpoll"
)

// toolsOnlyServer declares tools and nothing else (not even logging).
func toolsOnlyServer() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "toolsonly", Version: "1"},
		&mcp.ServerOptions{Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{}}})
	s.AddTool(&mcp.Tool{Name: "ping", InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{}, nil
		})
	return s
}

// richServer serves a prompt, a subscribable resource and completions, and
// logs (the SDK's default).
func richServer() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "rich", Version: "1"}, &mcp.ServerOptions{
		SubscribeHandler:   func(context.Context, *mcp.SubscribeRequest) error { return nil },
		UnsubscribeHandler: func(context.Context, *mcp.UnsubscribeRequest) error { return nil },
		CompletionHandler: func(context.Context, *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
			return &mcp.CompleteResult{}, nil
		},
	})
	s.AddPrompt(&mcp.Prompt{Name: "greet"}, func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		return &mcp.GetPromptResult{}, nil
	})
	s.AddResource(&mcp.Resource{URI: "file:///readme", Name: "readme"}, func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{}, nil
	})
	return s
}

// canonical re-encodes JSON with sorted keys.
func canonical(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("%v: %s", err, raw)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// advertisedCaps returns the capabilities of a raw initialize and a raw
// server/discover against the mux at url.
func advertisedCaps(t *testing.T, url string) (initialize, discover string) {
	t.Helper()
	var res struct {
		Capabilities json.RawMessage `json:"capabilities"`
	}
	status, _, body := rawRequest(t, http.MethodPost, url, nil, initializeBody)
	if r := reply(t, body); status != http.StatusOK || r.Error != nil || json.Unmarshal(r.Result, &res) != nil {
		t.Fatalf("initialize: HTTP %d %s", status, body)
	}
	initialize = canonical(t, res.Capabilities)
	status, _, body = rawRequest(t, http.MethodPost, url, modernHeaders("server/discover", ""), modernBody("server/discover", ""))
	if r := reply(t, body); status != http.StatusOK || r.Error != nil || json.Unmarshal(r.Result, &res) != nil {
		t.Fatalf("server/discover: HTTP %d %s", status, body)
	}
	return initialize, canonical(t, res.Capabilities)
}

const (
	toolsOnlyCaps = `{"tools":{"listChanged":true}}`
	richCaps      = `{"completions":{},"logging":{},"prompts":{"listChanged":true},"resources":{"listChanged":true,"subscribe":true},"tools":{"listChanged":true}}`
)

func TestAdvertisedCapabilitiesFollowUpstreams(t *testing.T) {
	plain := mcptest.ServeHTTP(t, toolsOnlyServer())
	rich := mcptest.ServeHTTP(t, richServer())
	one := fmt.Sprintf(`{"mcpServers": {"plain": {"type": "http", "url": %q}}}`, plain.URL+"/mcp")
	m := startMux(t, one, proxy.Options{})
	url := m.ts.URL + "/mcp"

	// (a) A tools-only upstream: tools, nothing else.
	if ini, disc := advertisedCaps(t, url); ini != toolsOnlyCaps || disc != toolsOnlyCaps {
		t.Errorf("tools-only upstream:\ninitialize %s\ndiscover   %s\nwant       %s", ini, disc, toolsOnlyCaps)
	}

	// (b) A reload adds a server with prompts, resources, completions and
	// logging: the next initialize and discover advertise their union.
	both := fmt.Sprintf(`{"mcpServers": {"plain": {"type": "http", "url": %q}, "rich": {"type": "http", "url": %q}}}`,
		plain.URL+"/mcp", rich.URL+"/mcp")
	cfg, err := config.Parse([]byte(both), config.LoadOptions{Filename: "t.json"})
	if err != nil {
		t.Fatal(err)
	}
	if ev := m.srv.Reload("test", cfg, nil); ev.Outcome != proxy.ReloadApplied {
		t.Fatalf("reload: %+v", ev)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := m.srv.WaitDiscovery(ctx); err != nil {
		t.Fatal(err)
	}
	if ini, disc := advertisedCaps(t, url); ini != richCaps || disc != richCaps {
		t.Errorf("with prompts and resources:\ninitialize %s\ndiscover   %s\nwant       %s", ini, disc, richCaps)
	}

	// Removing it again takes its capabilities away.
	cfg, _ = config.Parse([]byte(one), config.LoadOptions{Filename: "t.json"})
	if ev := m.srv.Reload("test", cfg, nil); ev.Outcome != proxy.ReloadApplied {
		t.Fatalf("reload: %+v", ev)
	}
	if ini, disc := advertisedCaps(t, url); ini != toolsOnlyCaps || disc != toolsOnlyCaps {
		t.Errorf("after removing the rich server:\ninitialize %s\ndiscover   %s\nwant       %s", ini, disc, toolsOnlyCaps)
	}
}

func TestAdvertisedCapabilitiesWithDurableTasks(t *testing.T) {
	plain := mcptest.ServeHTTP(t, toolsOnlyServer())
	st, err := taskpoll.OpenBoltStore(taskpoll.BoltOptions{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	_, ts := taskMux(t, fmt.Sprintf(`{"mcpServers": {"plain": {"type": "http", "url": %q}}, "mcp_tasks": {"enabled": true}}`, plain.URL+"/mcp"), st)
	// The task resource is listed and subscribable; task events are log messages.
	const want = `{"logging":{},"resources":{"listChanged":true,"subscribe":true},"tools":{"listChanged":true}}`
	ini, disc := advertisedCaps(t, ts.URL+"/mcp")
	if ini != want {
		t.Errorf("initialize capabilities %s, want %s", ini, want)
	}
	if withoutExtensions(t, disc) != want {
		t.Errorf("discover capabilities %s, want %s (plus extensions)", disc, want)
	}
}

// withoutExtensions drops the extensions discover may advertise.
func withoutExtensions(t *testing.T, got string) string {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(got), &m); err != nil {
		t.Fatal(err)
	}
	delete(m, "extensions")
	b, _ := json.Marshal(m)
	return canonical(t, b)
}
