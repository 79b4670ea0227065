package upstream_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/mcp-mux/mcp-mux/internal/mcptest"
	"github.com/mcp-mux/mcp-mux/internal/upstream"
	"github.com/mcp-mux/mcp-mux/internal/wire"
)

// BenchmarkCallToolHTTP measures one tools/call through the Streamable HTTP
// fast path against an in-process upstream (server cost included).
func BenchmarkCallToolHTTP(b *testing.B) {
	u := start(b, httpOptions(b, mcptest.NewServer("bench")))
	params := wire.AppendCallParams(nil, "echo", json.RawMessage(`{"text":"hello"}`), nil)
	ctx := context.Background()
	if _, err := u.CallTool(ctx, upstream.Call{Key: alice1, Params: params}); err != nil { // session up
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		raw, err := u.CallTool(ctx, upstream.Call{Key: alice1, Params: params})
		if err != nil {
			b.Fatal(err)
		}
		if len(raw) == 0 {
			b.Fatal("empty result")
		}
	}
}

// BenchmarkCallToolStdio measures one tools/call on a stdio session of
// each era (the server is the re-executed test binary).
func BenchmarkCallToolStdio(b *testing.B) {
	for _, v := range []string{upstream.VersionLegacy, upstream.VersionModern} {
		b.Run(v, func(b *testing.B) {
			o := stdioOptions("bench", mcptest.StdioOptions{})
			o.ProtocolVersion = v
			u := start(b, o)
			params := wire.AppendCallParams(nil, "echo", json.RawMessage(`{"text":"hello"}`), nil)
			ctx := context.Background()
			if _, err := u.CallTool(ctx, upstream.Call{Key: alice1, Params: params}); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := u.CallTool(ctx, upstream.Call{Key: alice1, Params: params}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkStdioSessionStart measures bringing up one stdio call session
// (a process) in each way its era is found: pinned, probed as 2026-07-28,
// and probed by a server that exits on the probe (restarted). The era is
// forgotten with each new Upstream, so every iteration probes.
func BenchmarkStdioSessionStart(b *testing.B) {
	for _, tc := range []struct{ name, first, pin string }{
		{"pinned-legacy", "", upstream.VersionLegacy},
		{"probed-modern", "", upstream.VersionAuto},
		{"probed-exits", mcptest.FirstExit, upstream.VersionAuto},
	} {
		b.Run(tc.name, func(b *testing.B) {
			o := stdioOptions("bench", mcptest.StdioOptions{First: tc.first})
			o.ProtocolVersion = tc.pin
			params := wire.AppendCallParams(nil, "echo", json.RawMessage(`{"text":"hello"}`), nil)
			for b.Loop() {
				u := start(b, o) // discovery: the first process, probed
				if _, err := u.CallTool(context.Background(), upstream.Call{Key: alice1, Params: params}); err != nil {
					b.Fatal(err)
				}
				_ = u.Close()
			}
		})
	}
}
