package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Issue 17, attacks 6 and 7: resource subscriptions. One server's
// resources/subscribe hangs: how long do another session's subscribe to
// another server, and a third session's DELETE, take? Then one session
// subscribes to 20,000 URIs, and another to 1,500 URIs of 100 KB.

// watchUpstream is a go-sdk server with resources under prefix (a
// template, so every URI of it has an owner); its subscribe blocks until
// gate closes when gate is not nil, after a value on entered; each
// unsubscribe is a value on unsubscribed when that is not nil.
func watchUpstream(name, prefix string, gate, entered, unsubscribed chan struct{}) *httptest.Server {
	srv := mcp.NewServer(&mcp.Implementation{Name: name, Version: "1"}, &mcp.ServerOptions{
		SubscribeHandler: func(ctx context.Context, _ *mcp.SubscribeRequest) error {
			if gate != nil {
				select {
				case entered <- struct{}{}:
				default:
				}
				select {
				case <-gate:
				case <-ctx.Done():
				}
			}
			return nil
		},
		UnsubscribeHandler: func(context.Context, *mcp.UnsubscribeRequest) error {
			if unsubscribed != nil {
				select {
				case unsubscribed <- struct{}{}:
				default:
				}
			}
			return nil
		},
	})
	read := func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{}, nil
	}
	srv.AddResource(&mcp.Resource{URI: prefix + "r", Name: "r"}, read)
	srv.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: prefix + "{id}", Name: "any"}, read)
	return httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
}

func subscribeBody(id int, uri string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"resources/subscribe","params":{"uri":%q}}`, id, uri)
}

// subscribed reports whether a resources/subscribe answer is a success.
func subscribed(code int, body string) bool {
	return code == http.StatusOK && strings.Contains(body, `"result"`) && !strings.Contains(body, `"error"`)
}

func attackSubs(bin, dir string) error {
	gate := make(chan struct{})
	var gateOnce sync.Once
	open := func() { gateOnce.Do(func() { close(gate) }) }
	defer open()
	entered := make(chan struct{}, 1)
	released := make(chan struct{}, 1)
	slow := watchUpstream("slow", "slow://", gate, entered, nil)
	fast, other := watchUpstream("fast", "fast://", nil, nil, nil), watchUpstream("other", "other://", nil, nil, released)
	defer slow.Close()
	defer fast.Close()
	defer other.Close()
	m, err := startMux(bin, dir, fmt.Sprintf(`{"mcpServers": {"slow": {"type": "http", "url": %q}, "fast": {"type": "http", "url": %q}, "other": {"type": "http", "url": %q}}}`,
		slow.URL+"/mcp", fast.URL+"/mcp", other.URL+"/mcp"))
	if err != nil {
		return err
	}
	defer func() {
		if m.alive() {
			m.stop()
		}
	}()
	const v = "2025-11-25"
	before := m.stats()

	// Attack 6: a subscribe that hangs upstream.
	a, errA := m.session(v)
	b, errB := m.session(v)
	c, errC := m.session(v)
	if err := errors.Join(errA, errB, errC); err != nil {
		return err
	}
	if code, body, err := m.post(context.Background(), c, v, subscribeBody(2, "other://r")); err != nil || !subscribed(code, body) {
		return fmt.Errorf("subscribing the third session: HTTP %d %s %v", code, short(body), err)
	}
	hung, cancelHung := context.WithCancel(context.Background())
	defer cancelHung()
	go func() { _, _, _ = m.post(hung, a, v, subscribeBody(2, "slow://r")) }()
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		return errors.New("the subscribe never reached the slow server")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	start := time.Now()
	code, body, err := m.post(ctx, b, v, subscribeBody(2, "fast://r"))
	subTook, subOK := time.Since(start), err == nil && subscribed(code, body)
	cancel()
	ctx, cancel = context.WithTimeout(context.Background(), 10*time.Second)
	req, _ := http.NewRequestWithContext(ctx, http.MethodDelete, m.base+"/mcp", nil)
	req.Header.Set("Mcp-Session-Id", c)
	req.Header.Set("Mcp-Protocol-Version", v)
	start = time.Now()
	delCode := 0
	if resp, err := m.client.Do(req); err == nil {
		delCode = resp.StatusCode
		resp.Body.Close()
	}
	delTook := time.Since(start)
	cancel()
	relTook := "not within 10s"
	select {
	case <-released:
		relTook = time.Since(start).Round(time.Millisecond).String()
	case <-time.After(10 * time.Second):
	}
	fmt.Printf("a17-subs slow upstream subscribe hangs: another session's subscribe to another server ok=%v in %s; a third session's DELETE HTTP %d in %s, its subscription released upstream %s; alive=%v; %s\n",
		subOK, subTook.Round(time.Millisecond), delCode, delTook.Round(time.Millisecond), relTook, m.alive(), m.stats())
	open()
	cancelHung()

	// Attack 7: 20,000 subscribes, then 1,500 URIs of 100 KB.
	flood := func(n, workers int, uri func(int) string) (int, int, time.Duration) {
		sid, err := m.session(v)
		if err != nil {
			return 0, 0, 0
		}
		var ok, refused atomic.Int64
		var next atomic.Int64
		deadline := time.Now().Add(25 * time.Second)
		start := time.Now()
		var wg sync.WaitGroup
		for range workers {
			wg.Go(func() {
				for i := int(next.Add(1)); i <= n && time.Now().Before(deadline); i = int(next.Add(1)) {
					code, body, err := m.post(context.Background(), sid, v, subscribeBody(i, uri(i)))
					switch {
					case err != nil:
					case subscribed(code, body):
						ok.Add(1)
					default:
						refused.Add(1)
					}
				}
			})
		}
		wg.Wait()
		return int(ok.Load()), int(refused.Load()), time.Since(start)
	}
	mid := m.stats()
	okN, refN, took := flood(20000, 16, func(i int) string { return fmt.Sprintf("fast://%d", i) })
	fmt.Printf("a17-subs 20,000 subscribes on one session: accepted %d, refused %d in %s; alive=%v; before %s; after %s\n",
		okN, refN, took.Round(time.Millisecond), m.alive(), mid, m.stats())
	big := strings.Repeat("x", 100<<10)
	mid = m.stats()
	okN, refN, took = flood(1500, 8, func(i int) string { return fmt.Sprintf("fast://%d-%s", i, big) })
	fmt.Printf("a17-subs 1,500 subscribes of 100 KB URIs: accepted %d, refused %d in %s; alive=%v; before %s; after %s\n",
		okN, refN, took.Round(time.Millisecond), m.alive(), mid, m.stats())
	fmt.Printf("a17-subs started: %s\n", before)
	return nil
}
