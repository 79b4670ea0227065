package proxy_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/internal/config"
	"github.com/mcp-mux/mcp-mux/internal/mcptest"
	"github.com/mcp-mux/mcp-mux/internal/proxy"
)

// The 10,000-tool catalog: 100 real upstream servers × 100 tools, served
// over Streamable HTTP, behind one mux. Requests are raw HTTP POSTs on an
// established session, so the numbers are the mux's code path plus one
// loopback round trip (tools/list through the SDK, tools/call through the
// fast path).
//
//	go test -run '^$' -bench Catalog10k -benchtime 200x ./proxy/

const (
	benchServers = 100
	benchTools   = 100
)

// benchConfig returns the config JSON for the upstream URLs.
func benchConfig(urls []string, extra string) string {
	var sb strings.Builder
	sb.WriteString(`{"mcpServers": {`)
	for i, u := range urls {
		if i > 0 {
			sb.WriteByte(',')
		}
		// Every tenth server prefers its tools for a keyword.
		routing := ""
		if i%10 == 0 {
			routing = fmt.Sprintf(`, "routing": {"mode": "prefer", "priority": %d, "keywords": ["area%02d"]}`, i, i)
		}
		fmt.Fprintf(&sb, `"s%02d": {"type": "http", "url": %q%s}`, i, u, routing)
	}
	sb.WriteString(`}` + extra + `}`)
	return sb.String()
}

func benchUpstreams(b *testing.B) []string {
	urls := make([]string, benchServers)
	for i := range urls {
		s := mcp.NewServer(&mcp.Implementation{Name: fmt.Sprint("s", i), Version: "bench"}, nil)
		for j := range benchTools {
			s.AddTool(&mcp.Tool{
				Name:        fmt.Sprintf("tool%03d", j),
				Description: fmt.Sprintf("Tool %d of server %d: manages topic%02d records and widgets.", j, i, (i*7+j)%50),
				InputSchema: map[string]any{"type": "object", "properties": map[string]any{"id": map[string]any{"type": "string"}}},
			}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil
			})
		}
		urls[i] = mcptest.ServeHTTP(b, s).URL + "/mcp"
	}
	return urls
}

type benchMux struct {
	srv *proxy.Server
	url string
	sid string
}

func startBenchMux(b *testing.B, doc string) *benchMux {
	return startBenchMuxOpts(b, doc, proxy.Options{})
}

func startBenchMuxOpts(b *testing.B, doc string, opts proxy.Options) *benchMux {
	cfg, err := config.Parse([]byte(doc), config.LoadOptions{Filename: "bench.json"})
	if err != nil {
		b.Fatal(err)
	}
	opts.Logger = hclog.NewNullLogger()
	srv := proxy.New(opts)
	if err := srv.Apply(cfg); err != nil {
		b.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		_ = srv.Close(ctx)
		ts.Close()
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := srv.WaitDiscovery(ctx); err != nil {
		b.Fatal(err)
	}
	m := &benchMux{srv: srv, url: ts.URL + "/mcp"}
	resp := m.post(b, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}`)
	m.sid = resp.Header.Get("Mcp-Session-Id")
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	m.do(b, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return m
}

func (m *benchMux) post(b *testing.B, body string) *http.Response {
	req, _ := http.NewRequest(http.MethodPost, m.url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if m.sid != "" {
		req.Header.Set("Mcp-Session-Id", m.sid)
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	}
	resp, err := testHTTP.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	return resp
}

// do posts body and returns the whole response body.
func (m *benchMux) do(b *testing.B, body string) []byte {
	resp := m.post(b, body)
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		b.Fatal(err)
	}
	return out
}

func BenchmarkCatalog10k(b *testing.B) {
	urls := benchUpstreams(b)
	full := startBenchMux(b, benchConfig(urls, ""))
	deferred := startBenchMux(b, benchConfig(urls, `, "tool_search": {"enabled": true}`))

	list := `{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{}}`
	if got := bytes.Count(full.do(b, list), []byte(`"name":"s`)); got != benchServers*benchTools {
		b.Fatalf("tools/list has %d tools, want %d", got, benchServers*benchTools)
	}
	b.Run("tools_list/all_10000", func(b *testing.B) {
		for b.Loop() {
			full.do(b, list)
		}
	})

	search := func(q string) string {
		return fmt.Sprintf(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"tool_search","arguments":{"query":%q}}}`, q)
	}
	// Promote three tools, then list: the session's own list.
	if out := deferred.do(b, search("select:s01_tool001,s50_tool050,s99_tool099")); !bytes.Contains(out, []byte("s99_tool099")) {
		b.Fatalf("select: %s", out)
	}
	b.Run("tools_list/tool_search_3_promoted", func(b *testing.B) {
		for b.Loop() {
			deferred.do(b, list)
		}
	})
	for _, q := range []struct{ name, query string }{
		{"select_3", "select:s01_tool001,s50_tool050,s99_tool099"},
		{"regex_name", "s42_tool0[0-4]"},
		{"regex_description", "topic07 records"},
		{"regex_no_match", "nothing-matches-this"},
		{"regex_alternation", "topic07|topic13"}, // no required literal: every tool is run through the regexp
		{"plus", "+s17 topic"},
		{"auto_promote", "area30 and area60 work"},
	} {
		body := search(q.query)
		if out := deferred.do(b, body); !bytes.Contains(out, []byte(`"content"`)) {
			b.Fatalf("%s: %s", q.name, out)
		}
		b.Run("tool_search/"+q.name, func(b *testing.B) {
			for b.Loop() {
				deferred.do(b, body)
			}
		})
	}

	// A reload that changes only guardrails rebuilds the 10,000-tool catalog.
	cfg, err := config.Parse([]byte(benchConfig(urls, `, "guardrails": {"denied_tools": ["s00_tool000"]}`)), config.LoadOptions{Filename: "bench.json"})
	if err != nil {
		b.Fatal(err)
	}
	b.Run("apply_guardrails_reload", func(b *testing.B) {
		for b.Loop() {
			if err := full.srv.Apply(cfg); err != nil {
				b.Fatal(err)
			}
		}
	})
}
