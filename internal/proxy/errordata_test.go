package proxy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/internal/mcptest"
	"github.com/mcp-mux/mcp-mux/internal/proxy"
)

// A 2025-11-25 tools/call answered by the legacy fast path passes an
// upstream JSON-RPC error on whole: code, message and data.
func TestLegacyFastPathKeepsErrorData(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "up", Version: "1"}, nil)
	srv.AddTool(&mcp.Tool{Name: "busy", InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return nil, &jsonrpc.Error{Code: -32001, Message: "server busy", Data: json.RawMessage(`{"retry_after":3}`)}
		})
	up := mcptest.ServeHTTP(t, srv)
	m := startMux(t, fmt.Sprintf(`{"mcpServers": {"up": {"type": "http", "url": %q}}}`, up.URL+"/mcp"), proxy.Options{})
	sid := rawSession(t, m.ts.URL, "2025-11-25")
	resp, err := rawPost(context.Background(), m.ts.URL, sid, "2025-11-25", `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"up_busy","arguments":{}}}`)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if got, want := wholeReply(t, string(body)), `{"error":{"code":-32001,"data":{"retry_after":3},"message":"server busy"},"id":5,"jsonrpc":"2.0"}`; got != want {
		t.Fatalf("the mux answered\n%s\nwant\n%s", got, want)
	}
}
