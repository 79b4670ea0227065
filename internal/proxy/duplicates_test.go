package proxy_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/internal/config"
	"github.com/mcp-mux/mcp-mux/internal/mcptest"
	"github.com/mcp-mux/mcp-mux/internal/proxy"
)

// sharedURI is the resource every server of TestDuplicateURILoggedOnce lists.
const sharedURI = "file:///shared.txt"

func sharedResourceServer(name string) *mcp.Server {
	s := mcptest.NewServer(name)
	s.AddResource(&mcp.Resource{URI: sharedURI, Name: "shared"}, func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: sharedURI, Text: name}}}, nil
	})
	return s
}

// TestDuplicateURILoggedOnce: the "duplicate resource URI" warning comes
// once per change of the set of duplicates, not at every catalog rebuild
// (each discovery, list change, reload and cache reset): it was 30 of 79
// log lines (issue 19).
func TestDuplicateURILoggedOnce(t *testing.T) {
	a, b, c := sharedResourceServer("a"), sharedResourceServer("b"), sharedResourceServer("c")
	ua, ub, uc := mcptest.ServeHTTP(t, a).URL+"/mcp", mcptest.ServeHTTP(t, b).URL+"/mcp", mcptest.ServeHTTP(t, c).URL+"/mcp"
	two := fmt.Sprintf(`{"mcpServers": {"a": {"type": "http", "url": %q}, "b": {"type": "http", "url": %q}}}`, ua, ub)
	m := startMux(t, two, proxy.Options{})
	warnings := func() int { return strings.Count(m.logs.String(), "duplicate resource URI") }
	if n := warnings(); n != 1 {
		t.Fatalf("%d duplicate warnings after the first discovery, want 1:\n%s", n, m.logs.String())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// A list change upstream: a's tools are listed again (a rebuild).
	tools := m.srv.Status().Tools
	a.AddTool(&mcp.Tool{Name: "late", InputSchema: map[string]any{"type": "object"}}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{}, nil
	})
	for m.srv.Status().Tools == tools {
		if ctx.Err() != nil {
			t.Fatal("a's new tool never reached the catalog")
		}
		time.Sleep(10 * time.Millisecond) // polling a condition, with a deadline
	}
	// Reloads of the same file and cache resets: every server rediscovered.
	cfg := m.srv.Config()
	for i := 0; i < 3; i++ {
		m.srv.Reload("test", cfg, nil)
		m.srv.ResetUpstreams()
		if err := m.srv.WaitDiscovery(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if n := warnings(); n != 1 {
		t.Errorf("%d duplicate warnings after a list change, 3 reloads and 3 resets with the same duplicate, want 1", n)
	}

	// A third server with the URI changes the set: one more warning, naming it.
	three, err := config.Parse([]byte(fmt.Sprintf(`{"mcpServers": {"a": {"type": "http", "url": %q}, "b": {"type": "http", "url": %q}, "c": {"type": "http", "url": %q}}}`, ua, ub, uc)),
		config.LoadOptions{Filename: "test.json"})
	if err != nil {
		t.Fatal(err)
	}
	m.srv.Reload("test", three, nil)
	m.srv.Reload("test", three, nil)
	if err := m.srv.WaitDiscovery(ctx); err != nil {
		t.Fatal(err)
	}
	if n := warnings(); n != 2 || !strings.Contains(m.logs.String(), `"skipped_server":"c"`) {
		t.Errorf("%d duplicate warnings after c joined, want 2 (the last naming c)", n)
	}
}
