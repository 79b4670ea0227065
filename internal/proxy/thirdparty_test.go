package proxy_test

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/internal/proxy"
)

// TestThirdPartyServersOverStdio runs the npm reference servers
// server-everything and server-memory through the mux, as a user's config
// would (npx -y), and calls their tools by prefixed names.
func TestThirdPartyServersOverStdio(t *testing.T) {
	if _, err := exec.LookPath("npx"); err != nil {
		t.Skip("npx is not installed; this test needs Node.js and the npm registry")
	}
	memFile := filepath.Join(t.TempDir(), "memory.jsonl")
	cfg := fmt.Sprintf(`{"mcpServers": {
		"everything": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-everything@2026.8.31"], "session_init_timeout": 240},
		"memory": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-memory@2026.8.31"],
		           "env": {"MEMORY_FILE_PATH": %q}, "session_init_timeout": 240}
	}}`, memFile)
	m := startMux(t, cfg, proxy.Options{})
	cs := connect(t, m.ts.URL, nil)

	names := toolNames(t, cs)
	for _, want := range []string{"everything_echo", "everything_get-sum", "memory_create_entities", "memory_read_graph"} {
		if !contains(names, want) {
			t.Fatalf("tools/list lacks %q: %v\nlogs:\n%s", want, names, m.logs.String())
		}
	}
	if got, res := callText(t, cs, "everything_echo", map[string]any{"message": "hello through the mux"}); res.IsError || !strings.Contains(got, "hello through the mux") {
		t.Errorf("everything_echo = %q (isError=%v)", got, res.IsError)
	}
	if got, res := callText(t, cs, "everything_get-sum", map[string]any{"a": 19, "b": 23}); res.IsError || !strings.Contains(got, "42") {
		t.Errorf("everything_get-sum = %q (isError=%v)", got, res.IsError)
	}
	_, res := callText(t, cs, "memory_create_entities", map[string]any{"entities": []map[string]any{
		{"name": "mcp-mux", "entityType": "project", "observations": []string{"multiplexes MCP servers"}},
	}})
	if res.IsError {
		t.Fatalf("memory_create_entities failed: %+v", res.Content)
	}
	if got, _ := callText(t, cs, "memory_read_graph", map[string]any{}); !strings.Contains(got, "multiplexes MCP servers") {
		t.Errorf("memory_read_graph does not show the new entity: %q", got)
	}
	// Resources from the third-party server are aggregated too.
	rs, err := cs.ListResources(context.Background(), nil)
	if err != nil || len(rs.Resources) == 0 {
		t.Fatalf("resources/list through the mux: %v (%d resources)", err, len(rs.Resources))
	}
	rr, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: rs.Resources[0].URI})
	if err != nil || len(rr.Contents) == 0 {
		t.Errorf("resources/read %s: %v", rs.Resources[0].URI, err)
	}
}
