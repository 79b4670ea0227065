package proxy_test

import (
	"bytes"
	"context"
	"fmt"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/internal/mcptest"
	"github.com/mcp-mux/mcp-mux/internal/proxy"
)

// serverGoroutines counts the goroutines whose stack has any of marks.
func serverGoroutines(marks ...string) map[string]int {
	var b bytes.Buffer
	_ = pprof.Lookup("goroutine").WriteTo(&b, 2)
	n := make(map[string]int)
	for g := range strings.SplitSeq(b.String(), "\n\n") {
		for _, m := range marks {
			if strings.Contains(g, m) {
				n[m]++
			}
		}
	}
	return n
}

// The standalone GET stream of a 2025-11-25 session, as go-sdk clients
// open it, is taken over after its headers (as subscriptions/listen is):
// no handler goroutine stays in ServeStream nor net/http's reader beside
// it; each idle stream is one goroutine watching its connection. Events
// still reach the clients on it (a reload's list_changed), and a session's
// DELETE ends its stream and the watcher.
func TestGetStreamTakenOver(t *testing.T) {
	web := mcptest.ServeHTTP(t, mcptest.NewServer("web"))
	more := mcptest.ServeHTTP(t, mcptest.NewServer("more")) // added by a reload
	doc := func(servers string) string { return `{"mcpServers": {` + servers + `}}` }
	webJSON := fmt.Sprintf(`"web": {"type": "http", "url": %q}`, web.URL+"/mcp")
	m := startMux(t, doc(webJSON), proxy.Options{})

	const n = 20
	changed := make(chan struct{}, n)
	sessions := make([]*mcp.ClientSession, n)
	for i := range sessions {
		sessions[i] = connect(t, m.ts.URL, &mcp.ClientOptions{
			ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
		})
		if got, _ := callText(t, sessions[i], "web_echo", map[string]any{"text": "hi"}); got != "hi" {
			t.Fatalf("web_echo = %q", got)
		}
	}
	const (
		watch   = "listenstream.(*Stream).Watch"
		handler = "sessions.(*Table).ServeStream"
	)
	var g map[string]int
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		g = serverGoroutines(watch, handler)
		if g[watch] >= n || time.Now().After(deadline) {
			break
		}
	}
	if g[watch] != n || g[handler] != 0 {
		t.Fatalf("%d idle GET streams: %d goroutines watching a connection taken over, %d handlers holding a stream; want %d and 0",
			n, g[watch], g[handler], n)
	}

	// A reload's list_changed reaches every session on its GET stream.
	if err := m.srv.Apply(parseCfg(t, doc(webJSON+fmt.Sprintf(`, "more": {"type": "http", "url": %q}`, more.URL+"/mcp")))); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		select {
		case <-changed:
		case <-time.After(10 * time.Second):
			t.Fatalf("%d of %d sessions got notifications/tools/list_changed", i, n)
		}
	}

	// Ending a session (DELETE) ends its stream and its watcher.
	for _, cs := range sessions[:n/2] {
		if err := cs.Close(); err != nil {
			t.Fatal(err)
		}
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if g = serverGoroutines(watch); g[watch] == n-n/2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d watchers after %d of %d sessions ended, want %d", g[watch], n/2, n, n-n/2)
		}
	}
}
