package proxy_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/mcp-mux/mcp-mux/internal/mcptest"
	"github.com/mcp-mux/mcp-mux/internal/proxy"
)

// One tools/call through the mux per operation, as raw HTTP POSTs, over
// each leg: a legacy session (fast path), 2026-07-28 on the fast path (a
// client without input capabilities, and one with them, whose calls to this
// legacy upstream run bridged), and 2026-07-28 through go-sdk's stateless
// handler. Everything runs in this process (client, mux, upstream), so
// allocations are the whole round trip's; compare legs with each other.
//
//	go test -run '^$' -bench ModernToolsCall -benchmem ./proxy/
func BenchmarkModernToolsCall(b *testing.B) {
	up := mcptest.ServeHTTP(b, mcptest.NewServer("alpha"))
	cfg := fmt.Sprintf(`{"mcpServers": {"alpha": {"type": "http", "url": %q}}}`, up.URL+"/mcp")
	legacy := startBenchMux(b, cfg)
	slow := startBenchMuxOpts(b, cfg, proxy.Options{DisableModernFastPath: true})
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	post := func(b *testing.B, url string, hdr map[string]string, body string) {
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := hc.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		out, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !bytes.Contains(out, []byte(`"text":"hi"`)) {
			b.Fatalf("HTTP %d %s", resp.StatusCode, out)
		}
	}
	modernHdr := modernHeaders("tools/call", "alpha_echo")
	legs := []struct {
		name, url string
		hdr       map[string]string
		body      string
	}{
		{"legacy", legacy.url, map[string]string{"Mcp-Session-Id": legacy.sid, "Mcp-Protocol-Version": "2025-11-25"},
			`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"alpha_echo","arguments":{"text":"hi"}}}`},
		{"modern-fast", legacy.url, modernHdr, modernCallBody(`{}`, "alpha_echo", `{"text":"hi"}`)},
		{"modern-fast-bridged", legacy.url, modernHdr, modernCallBody(`{"roots":{"listChanged":true}}`, "alpha_echo", `{"text":"hi"}`)},
		{"modern-sdk", slow.url, modernHdr, modernCallBody(`{"roots":{"listChanged":true}}`, "alpha_echo", `{"text":"hi"}`)},
	}
	for _, l := range legs {
		b.Run(l.name, func(b *testing.B) {
			post(b, l.url, l.hdr, l.body)
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				post(b, l.url, l.hdr, l.body)
			}
		})
	}
}
