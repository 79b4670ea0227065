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
// no handler goroutine stays in ServeStream, nor net/http's reader beside
// it, nor a goroutine reading the connection: the table's keeper watches
// every idle stream with one goroutine. Events still reach the clients on
// it (a reload's list_changed).
func TestGetStreamTakenOver(t *testing.T) {
	web := mcptest.ServeHTTP(t, mcptest.NewServer("web"))
	more := mcptest.ServeHTTP(t, mcptest.NewServer("more")) // added by a reload
	doc := func(servers string) string { return `{"mcpServers": {` + servers + `}}` }
	webJSON := fmt.Sprintf(`"web": {"type": "http", "url": %q}`, web.URL+"/mcp")
	m := startMux(t, doc(webJSON), proxy.Options{})

	const n = 20
	changed := make(chan struct{}, n)
	for range n {
		cs := connect(t, m.ts.URL, &mcp.ClientOptions{
			ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
		})
		if got, _ := callText(t, cs, "web_echo", map[string]any{"text": "hi"}); got != "hi" {
			t.Fatalf("web_echo = %q", got)
		}
	}
	const (
		watch   = "listenstream.(*Stream).Watch"
		handler = "sessions.(*Table).ServeStream"
		keeper  = "listenstream.(*Keeper).run"
	)
	time.Sleep(200 * time.Millisecond) // the clients' GET streams open
	g := serverGoroutines(watch, handler, keeper)
	if g[watch] != 0 || g[handler] != 0 || g[keeper] != 1 {
		t.Fatalf("%d idle GET streams: %d goroutines reading a connection taken over, %d handlers holding a stream, %d keepers; want 0, 0 and 1",
			n, g[watch], g[handler], g[keeper])
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
}
