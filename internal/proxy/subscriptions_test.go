package proxy_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/internal/mcptest"
	"github.com/mcp-mux/mcp-mux/internal/proxy"
)

// watchServer is an upstream with one subscribable resource, uri; its
// resources/subscribe blocks while gate is set, until the gate opens.
type watchServer struct {
	*mcp.Server
	url     string
	uri     string
	held    atomic.Int32  // 1 while subscribed (a subscribe sets it, an unsubscribe clears it)
	calls   atomic.Int32  // resources/subscribe received
	aborted atomic.Int32  // subscribes cancelled at the gate
	entered chan struct{} // one value per subscribe that reached the gate
	gate    chan struct{} // nil: subscribe answers at once
	opened  sync.Once
	unsubs  chan string
}

func newWatchServer(t *testing.T, name, uri string, blocking bool) *watchServer {
	t.Helper()
	w := &watchServer{uri: uri, entered: make(chan struct{}, 16), unsubs: make(chan string, 1024)}
	if blocking {
		w.gate = make(chan struct{})
		t.Cleanup(w.open)
	}
	w.Server = mcp.NewServer(&mcp.Implementation{Name: name, Version: "1"}, &mcp.ServerOptions{
		SubscribeHandler: func(ctx context.Context, _ *mcp.SubscribeRequest) error {
			w.calls.Add(1)
			if w.gate != nil {
				w.entered <- struct{}{}
				select {
				case <-w.gate:
				case <-ctx.Done():
					w.aborted.Add(1)
					return ctx.Err()
				}
			}
			w.held.Store(1)
			return nil
		},
		UnsubscribeHandler: func(_ context.Context, req *mcp.UnsubscribeRequest) error {
			w.held.Store(0)
			w.unsubs <- req.Params.URI
			return nil
		},
	})
	w.AddResource(&mcp.Resource{URI: uri, Name: "watched"}, func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, Text: "v"}}}, nil
	})
	w.url = mcptest.ServeHTTP(t, w.Server).URL + "/mcp"
	return w
}

// open lets every subscribe through the gate.
func (w *watchServer) open() { w.opened.Do(func() { close(w.gate) }) }

func (w *watchServer) waitEntered(t *testing.T) {
	t.Helper()
	select {
	case <-w.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the slow server never received resources/subscribe")
	}
}

func serversJSON(ws ...*watchServer) string {
	var parts []string
	for i, w := range ws {
		parts = append(parts, fmt.Sprintf(`"w%d": {"type": "http", "url": %q}`, i, w.url))
	}
	return `{"mcpServers": {` + strings.Join(parts, ", ") + `}}`
}

// Issue 17, attack 6: while one server's resources/subscribe hangs, another
// session's subscribe to a different server, and a third session's DELETE
// (which releases its subscription), complete at once.
func TestSlowUpstreamSubscribeBlocksNoOtherSession(t *testing.T) {
	slow := newWatchServer(t, "slow", "slow://r", true)
	fast := newWatchServer(t, "fast", "fast://r", false)
	other := newWatchServer(t, "other", "other://r", false)
	m := startMux(t, serversJSON(slow, fast, other), proxy.Options{})
	a, b, c := connect(t, m.ts.URL, nil), connect(t, m.ts.URL, nil), connect(t, m.ts.URL, nil)
	t.Cleanup(slow.open) // first: closing a waits for its subscribe
	if err := c.Subscribe(context.Background(), &mcp.SubscribeParams{URI: other.uri}); err != nil {
		t.Fatal(err)
	}

	slowDone := make(chan error, 1)
	go func() { slowDone <- a.Subscribe(context.Background(), &mcp.SubscribeParams{URI: slow.uri}) }()
	slow.waitEntered(t)

	const prompt = 3 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), prompt)
	defer cancel()
	start := time.Now()
	if err := b.Subscribe(ctx, &mcp.SubscribeParams{URI: fast.uri}); err != nil {
		t.Fatalf("another session's subscribe to another server while one hangs: %v (after %v)", err, time.Since(start))
	}
	start = time.Now()
	closed := make(chan error, 1)
	go func() { closed <- c.Close() }() // DELETE
	select {
	case <-closed:
	case <-time.After(prompt):
		t.Fatal("DELETE of a third session hangs while one server's subscribe does")
	}
	select {
	case uri := <-other.unsubs:
		if uri != other.uri {
			t.Fatalf("upstream unsubscribed %q", uri)
		}
	case <-time.After(prompt - time.Since(start)):
		t.Fatal("the closed session's subscription was not released while one server's subscribe hangs")
	}

	slow.open()
	if err := <-slowDone; err != nil {
		t.Fatalf("the slow subscribe, once answered: %v", err)
	}
	if slow.held.Load() != 1 || fast.held.Load() != 1 || other.held.Load() != 0 {
		t.Fatalf("upstream subscriptions slow=%d fast=%d other=%d, want 1 1 0", slow.held.Load(), fast.held.Load(), other.held.Load())
	}
}

// A second session subscribes to a URI whose upstream subscribe is in
// flight, and the first session is deleted meanwhile (which cancels its
// request): the second is subscribed (asking again itself), gets the
// updates, and when it leaves too the upstream is unsubscribed.
func TestSubscriptionReleasedWhileUpstreamSubscribeInFlight(t *testing.T) {
	slow := newWatchServer(t, "slow", "slow://r", true)
	m := startMux(t, serversJSON(slow), proxy.Options{})
	var updates atomic.Int32
	a := connect(t, m.ts.URL, nil)
	b := connect(t, m.ts.URL, &mcp.ClientOptions{
		ResourceUpdatedHandler: func(context.Context, *mcp.ResourceUpdatedNotificationRequest) { updates.Add(1) },
	})
	aDone, bDone := make(chan error, 1), make(chan error, 1)
	go func() { aDone <- a.Subscribe(context.Background(), &mcp.SubscribeParams{URI: slow.uri}) }()
	slow.waitEntered(t)
	go func() { bDone <- b.Subscribe(context.Background(), &mcp.SubscribeParams{URI: slow.uri}) }()
	waitFor(t, "the second subscriber to wait", func() bool { return m.srv.SubscriptionHolders("w0", slow.uri) == 2 })
	deleteSession(t, m, a) // released while the upstream subscribe is in flight
	waitFor(t, "the deleted session's hold released", func() bool { return m.srv.SubscriptionHolders("w0", slow.uri) == 1 })
	slow.open()
	<-aDone
	if err := <-bDone; err != nil {
		t.Fatalf("second subscriber: %v", err)
	}
	waitFor(t, "the upstream subscribed", func() bool { return slow.held.Load() == 1 })
	if n := slow.calls.Load(); n > 2 {
		t.Fatalf("upstream got %d resources/subscribe for one URI, want at most 2 (the cancelled one and the second subscriber's)", n)
	}
	_ = slow.ResourceUpdated(context.Background(), &mcp.ResourceUpdatedNotificationParams{URI: slow.uri})
	waitFor(t, "the remaining subscriber's update", func() bool { return updates.Load() == 1 })
	_ = b.Close()
	waitFor(t, "the upstream unsubscribed after the last subscriber", func() bool { return slow.held.Load() == 0 })
}

// The only subscriber leaving (DELETE) while its upstream subscribe is in
// flight: once the server answers, mcp-mux unsubscribes again.
func TestSubscriptionAbandonedInFlightIsUndone(t *testing.T) {
	slow := newWatchServer(t, "slow", "slow://r", true)
	m := startMux(t, serversJSON(slow), proxy.Options{})
	a := connect(t, m.ts.URL, nil)
	done := make(chan error, 1)
	go func() { done <- a.Subscribe(context.Background(), &mcp.SubscribeParams{URI: slow.uri}) }()
	slow.waitEntered(t)
	deleteSession(t, m, a)
	waitFor(t, "the deleted session's hold released", func() bool { return m.srv.SubscriptionHolders("w0", slow.uri) == 0 })
	waitFor(t, "the upstream subscribe cancelled", func() bool { return slow.aborted.Load() == 1 })
	slow.open()
	<-done
	select {
	case <-slow.unsubs:
	case <-time.After(10 * time.Second):
		t.Fatal("the abandoned subscription was never undone upstream")
	}
	waitFor(t, "no upstream subscription left", func() bool { return slow.held.Load() == 0 })
	// And a later subscriber is subscribed afresh.
	b := connect(t, m.ts.URL, nil)
	if err := b.Subscribe(context.Background(), &mcp.SubscribeParams{URI: slow.uri}); err != nil {
		t.Fatal(err)
	}
	if n := slow.calls.Load(); n != 2 {
		t.Fatalf("upstream got %d resources/subscribe, want 2", n)
	}
}

// deleteSession ends cs's session with a DELETE of its own, as a client
// with a request in flight may (ClientSession.Close waits for it).
func deleteSession(t *testing.T, m *mux, cs *mcp.ClientSession) {
	t.Helper()
	code, _, body := rawRequest(t, http.MethodDelete, m.ts.URL+"/mcp",
		map[string]string{"Mcp-Session-Id": cs.ID(), "Mcp-Protocol-Version": "2025-11-25"}, "")
	if code != http.StatusNoContent {
		t.Fatalf("DELETE: HTTP %d %s", code, body)
	}
}

// Issue 17, attack 7: a session holds at most 256 resource subscriptions,
// each URI at most 8 KiB; past either the subscribe is refused naming the
// bound, and unsubscribing frees a place.
func TestSubscriptionsBoundedPerSession(t *testing.T) {
	w := newWatchServer(t, "many", "many://0", false)
	m := startMux(t, serversJSON(w), proxy.Options{})
	cs := connect(t, m.ts.URL, nil)
	ctx := context.Background()
	uri := func(i int) string { return fmt.Sprintf("many://%d", i) }
	for i := range 256 {
		if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: uri(i)}); err != nil {
			t.Fatalf("subscribe %d: %v", i, err)
		}
	}
	err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: uri(256)})
	if err == nil || !strings.Contains(err.Error(), "256 resource subscriptions") {
		t.Fatalf("257th subscribe: %v, want a refusal naming the bound of 256", err)
	}
	if n := w.calls.Load(); n != 256 {
		t.Fatalf("upstream got %d subscribes, want 256", n)
	}
	if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: uri(0)}); err != nil {
		t.Fatalf("subscribing again to a held URI: %v", err)
	}
	if err := cs.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: uri(0)}); err != nil {
		t.Fatal(err)
	}
	if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: uri(256)}); err != nil {
		t.Fatalf("subscribe after an unsubscribe freed a place: %v", err)
	}
	// Another session has its own places.
	if err := connect(t, m.ts.URL, nil).Subscribe(ctx, &mcp.SubscribeParams{URI: uri(300)}); err != nil {
		t.Fatalf("another session: %v", err)
	}

	long := "many://" + strings.Repeat("x", 8<<10)
	err = connect(t, m.ts.URL, nil).Subscribe(ctx, &mcp.SubscribeParams{URI: long})
	if err == nil || !strings.Contains(err.Error(), "at most 8192 bytes") {
		t.Fatalf("subscribe to a %d-byte URI: %v, want a refusal naming the 8192-byte bound", len(long), err)
	}
	if strings.Contains(err.Error(), strings.Repeat("x", 100)) {
		t.Fatal("the refusal echoes the URI")
	}
	if n := w.calls.Load(); n != 258 {
		t.Fatalf("upstream got %d subscribes, want 258 (the long URI never sent)", n)
	}
}

// A 2026-07-28 listen names at most 256 resource URIs of at most 8 KiB.
func TestModernListenResourceURIsBounded(t *testing.T) {
	w := newWatchServer(t, "many", "many://0", false)
	m := startMux(t, serversJSON(w), proxy.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	listen := func(uris []string) string {
		q := make([]string, len(uris))
		for i, u := range uris {
			q[i] = fmt.Sprintf("%q", u)
		}
		body := `{"jsonrpc":"2.0","id":"l","method":"subscriptions/listen","params":{` + modernMeta("{}") +
			`,"notifications":{"resourceSubscriptions":[` + strings.Join(q, ",") + `]}}}`
		lctx, lcancel := context.WithTimeout(ctx, 5*time.Second)
		defer lcancel()
		resp, err := testHTTP.Do(mcpRequest(t, lctx, http.MethodPost, m.ts.URL+"/mcp", modernHeaders("subscriptions/listen", ""), body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		r := bufio.NewReader(io.LimitReader(resp.Body, 1<<20))
		var first strings.Builder
		for !strings.Contains(first.String(), "jsonrpc") { // the error, or the acknowledgement
			line, err := r.ReadString('\n')
			first.WriteString(line)
			if err != nil {
				break
			}
		}
		return first.String()
	}
	var many []string
	for i := range 257 {
		many = append(many, fmt.Sprintf("many://%d", i))
	}
	if r := listen(many); !strings.Contains(r, "-32602") || !strings.Contains(r, "at most 256 per listen") {
		t.Fatalf("a listen naming 257 URIs: %v, want a refusal naming the bound", r)
	}
	if r := listen([]string{"many://" + strings.Repeat("x", 8<<10)}); !strings.Contains(r, "at most 8192 bytes") {
		t.Fatalf("a listen naming a long URI: %v, want a refusal naming the bound", r)
	}
	if n := w.calls.Load(); n != 0 {
		t.Fatalf("upstream got %d subscribes from refused listens", n)
	}
	if r := listen(many[:256]); !strings.Contains(r, "notifications/subscriptions/acknowledged") {
		t.Fatalf("a listen naming 256 URIs: %v", r)
	}
}

// A resource URI past the 8 KiB bound matches no template: matching one
// costs about 2 µs a byte per template, so a 1 MiB URI against a few
// templates took seconds of CPU per request.
func TestLongResourceURIMatchesNoTemplate(t *testing.T) {
	var urls []string
	for i := range 4 {
		srv := mcp.NewServer(&mcp.Implementation{Name: fmt.Sprintf("t%d", i), Version: "1"}, nil)
		srv.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: fmt.Sprintf("t%d://{id}", i), Name: "any"},
			func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
				return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, Text: "v"}}}, nil
			})
		urls = append(urls, fmt.Sprintf(`"t%d": {"type": "http", "url": %q}`, i, mcptest.ServeHTTP(t, srv).URL+"/mcp"))
	}
	m := startMux(t, `{"mcpServers": {`+strings.Join(urls, ", ")+`}}`, proxy.Options{})
	cs := connect(t, m.ts.URL, nil)
	if _, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: "t3://short"}); err != nil {
		t.Fatalf("a short URI through the last template: %v", err)
	}
	start := time.Now()
	_, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: "t3://" + strings.Repeat("x", 1<<20)})
	if took := time.Since(start); err == nil || took > 5*time.Second {
		t.Fatalf("a 1 MiB URI: err=%v after %v, want a prompt refusal", err, took)
	}
}
