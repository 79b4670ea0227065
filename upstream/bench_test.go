package upstream_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/mcp-mux/mcp-mux/internal/mcptest"
	"github.com/mcp-mux/mcp-mux/internal/wire"
)

// BenchmarkCallToolHTTP measures one tools/call through the Streamable HTTP
// fast path against an in-process upstream (server cost included).
func BenchmarkCallToolHTTP(b *testing.B) {
	u := start(b, httpOptions(b, mcptest.NewServer("bench")))
	params := wire.AppendCallParams(nil, "echo", json.RawMessage(`{"text":"hello"}`), nil)
	ctx := context.Background()
	if _, err := u.CallTool(ctx, alice1, params, nil); err != nil { // session up
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		raw, err := u.CallTool(ctx, alice1, params, nil)
		if err != nil {
			b.Fatal(err)
		}
		if len(raw) == 0 {
			b.Fatal("empty result")
		}
	}
}
