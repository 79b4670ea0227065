package proxy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/internal/mcptest"
	"github.com/mcp-mux/mcp-mux/internal/proxy"
)

// cachingUpstream is a 2026-07-28 go-sdk server whose lists and reads say
// ttlMs ttl and cacheScope scope, and counts the tools/list requests it
// gets.
func cachingUpstream(t *testing.T, name string, ttl int, scope string) (string, *atomic.Int64) {
	t.Helper()
	s := mcp.NewServer(&mcp.Implementation{Name: name, Version: "1"}, &mcp.ServerOptions{
		SetCacheable: func(_ context.Context, _ mcp.Request, c *mcp.Cacheable) { c.TTLMs, c.CacheScope = ttl, scope },
	})
	s.AddTool(&mcp.Tool{Name: "t", InputSchema: map[string]any{"type": "object"}}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: name}}}, nil
	})
	var reads atomic.Int64
	s.AddResource(&mcp.Resource{URI: "doc://" + name, Name: name}, func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: "doc://" + name, Text: fmt.Sprintf("%s read %d", name, reads.Add(1))}}}, nil
	})
	lists := &atomic.Int64{}
	up := mcptest.ServeHTTPBothEras(t, s)
	target, _ := url.Parse(up.URL)
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.FlushInterval = -1 // the listen stream's events as they come
	count := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if bytes.Contains(body, []byte(`"method":"tools/list"`)) {
			lists.Add(1)
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(count.Close)
	return count.URL + "/mcp", lists
}

// caching is a result's ttlMs and cacheScope.
type caching struct {
	TTL   int    `json:"ttlMs"`
	Scope string `json:"cacheScope"`
}

func cachingOf(t *testing.T, raw json.RawMessage) caching {
	t.Helper()
	var c caching
	if err := json.Unmarshal(raw, &c); err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
	return c
}

// Two 2026-07-28 upstreams give their lists ttlMs 60000 and 5000: the
// mux's lists say 5000 (the shortest) and the narrowest scope, and ten
// lists within the TTL reach each upstream once (its discovery); a list
// past a TTL has the server list again.
func TestListCacheHints(t *testing.T) {
	a, aLists := cachingUpstream(t, "a", 60000, "public")
	b, bLists := cachingUpstream(t, "b", 5000, "private")
	m := startMux(t, fmt.Sprintf(`{"mcpServers": {
		"a": {"type": "http", "url": %q, "protocol_version": "2026-07-28"},
		"b": {"type": "http", "url": %q, "protocol_version": "2026-07-28"}}}`, a, b), proxy.Options{})
	mcpURL := m.ts.URL + "/mcp"
	for range 10 {
		for _, method := range []string{"tools/list", "resources/list"} {
			_, r := modernCall(t, mcpURL, nil, `{}`, method, "", `"cursor":null`)
			if r.Error != nil {
				t.Fatalf("%s: %+v", method, r.Error)
			}
			if got := cachingOf(t, r.Result); got != (caching{5000, "private"}) {
				t.Fatalf("%s caching = %+v, want ttlMs 5000, private (b's scope)", method, got)
			}
		}
	}
	if aLists.Load() != 1 || bLists.Load() != 1 {
		t.Errorf("tools/list reached a %d and b %d times, want once each", aLists.Load(), bLists.Load())
	}
	// A read keeps its server's hint, narrowed to the mux's scope.
	_, r := modernCall(t, mcpURL, nil, `{}`, "resources/read", "doc://a", `"uri":"doc://a"`)
	if got := cachingOf(t, r.Result); got != (caching{60000, "public"}) {
		t.Errorf("read of a: %+v %s", got, r.Result)
	}

	// A list past a server's TTL has it list again (the last lists are
	// served meanwhile).
	c, cLists := cachingUpstream(t, "c", 50, "public")
	m = startMux(t, fmt.Sprintf(`{"mcpServers": {"c": {"type": "http", "url": %q, "protocol_version": "2026-07-28"}}}`, c), proxy.Options{})
	time.Sleep(100 * time.Millisecond) // past the 50 ms TTL
	for deadline := time.Now().Add(10 * time.Second); cLists.Load() < 2; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("c listed %d times after its TTL passed and a client listed", cLists.Load())
		}
		modernCall(t, m.ts.URL+"/mcp", nil, `{}`, "tools/list", "", `"cursor":null`)
	}
}

// The mux's own scope wins over an upstream's wider one: with callers told
// apart (api keys), a public upstream read is private through the mux.
func TestReadCacheScopeNarrowed(t *testing.T) {
	a, _ := cachingUpstream(t, "a", 60000, "public")
	m, _ := startMuxEnv(t, fmt.Sprintf(`{"mcpServers": {"a": {"type": "http", "url": %q, "protocol_version": "2026-07-28"}},
		"inbound": {"auth": {"mode": "api_keys", "keys": {"alice": "$ALICE_KEY"}}}}`, a), map[string]string{"ALICE_KEY": aliceKey}, proxy.Options{})
	_, r := modernCall(t, m.ts.URL+"/mcp", map[string]string{"Authorization": "Bearer " + aliceKey}, `{}`, "resources/read", "doc://a", `"uri":"doc://a"`)
	if got := cachingOf(t, r.Result); got != (caching{60000, "private"}) {
		t.Errorf("read through an authenticated mux: %+v %s", got, r.Result)
	}
	_, r = modernCall(t, m.ts.URL+"/mcp", map[string]string{"Authorization": "Bearer " + aliceKey}, `{}`, "tools/list", "", `"cursor":null`)
	if got := cachingOf(t, r.Result); got != (caching{60000, "private"}) {
		t.Errorf("tools/list through an authenticated mux: %+v", got)
	}
}

// readTextOf is the text of a read result's first contents.
func readTextOf(t *testing.T, r rpcReply) string {
	t.Helper()
	var res struct {
		Contents []struct {
			Text string `json:"text"`
		} `json:"contents"`
	}
	if r.Error != nil || json.Unmarshal(r.Result, &res) != nil || len(res.Contents) == 0 {
		t.Fatalf("read: %s %+v", r.Result, r.Error)
	}
	return res.Contents[0].Text
}

// A read is answered from the result its server gave within that result's
// ttlMs: a public one for every caller, a private one only for the caller
// it was read for (another caller's read reaches the server).
func TestReadCache(t *testing.T) {
	pub, _ := cachingUpstream(t, "pub", 60000, "public")
	priv, _ := cachingUpstream(t, "priv", 60000, "private")
	now, _ := cachingUpstream(t, "now", 0, "public")
	m, _ := startMuxEnv(t, fmt.Sprintf(`{"mcpServers": {
		"pub": {"type": "http", "url": %q, "protocol_version": "2026-07-28"},
		"priv": {"type": "http", "url": %q, "protocol_version": "2026-07-28"},
		"now": {"type": "http", "url": %q, "protocol_version": "2026-07-28"}},
		"inbound": {"auth": {"mode": "api_keys", "keys": {"alice": "$ALICE_KEY", "bob": "$BOB_KEY"}}}}`, pub, priv, now),
		map[string]string{"ALICE_KEY": aliceKey, "BOB_KEY": bobKey}, proxy.Options{})
	read := func(key, uri string) string {
		_, r := modernCall(t, m.ts.URL+"/mcp", map[string]string{"Authorization": "Bearer " + key}, `{}`, "resources/read", uri, `"uri":`+mustQuote(uri))
		return readTextOf(t, r)
	}
	for _, c := range []struct{ key, uri, want string }{
		{aliceKey, "doc://pub", "pub read 1"},
		{aliceKey, "doc://pub", "pub read 1"}, // kept
		{bobKey, "doc://pub", "pub read 1"},   // public: shared
		{aliceKey, "doc://priv", "priv read 1"},
		{aliceKey, "doc://priv", "priv read 1"}, // kept for alice
		{bobKey, "doc://priv", "priv read 2"},   // never alice's
		{bobKey, "doc://priv", "priv read 2"},
		{aliceKey, "doc://now", "now read 1"},
		{aliceKey, "doc://now", "now read 2"}, // ttlMs 0: not kept
	} {
		if got := read(c.key, c.uri); got != c.want {
			t.Errorf("%s by %s = %q, want %q", c.uri, map[string]string{aliceKey: "alice", bobKey: "bob"}[c.key], got, c.want)
		}
	}
}
