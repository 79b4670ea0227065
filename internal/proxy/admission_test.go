package proxy_test

import (
	"context"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/mcp-mux/mcp-mux/internal/proxy"
)

const rawInitialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`

// N initializes at once against inbound.max_sessions K open exactly K
// sessions: the others are refused with 503, however many were in flight.
// Every initialize is held just before the store admits its record until
// all N are held there, so all N are in flight together on every run, not
// only when the scheduler happens to interleave them.
func TestSessionAdmissionIsExact(t *testing.T) {
	const limit, n = 3, 32
	m := startMux(t, `{"mcpServers": {}, "inbound": {"max_sessions": 3}}`, proxy.Options{})
	const initialize = rawInitialize
	arrived, release := make(chan struct{}, n), make(chan struct{})
	proxy.HoldSessionCreatesForTest(m.srv, func() {
		arrived <- struct{}{}
		select {
		case <-release:
		case <-time.After(30 * time.Second):
			t.Error("a held session open was never released")
		}
	})
	var (
		wg        sync.WaitGroup
		start     = make(chan struct{})
		mu        sync.Mutex
		opened    []string
		refused   int
		unexpects []int
	)
	for range n {
		wg.Go(func() {
			<-start
			resp, err := rawPost(context.Background(), m.ts.URL, "", "", initialize)
			if err != nil {
				t.Error(err)
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				arrived <- struct{}{} // answered without reaching the hold
			}
			mu.Lock()
			defer mu.Unlock()
			switch sid := resp.Header.Get("Mcp-Session-Id"); {
			case resp.StatusCode == http.StatusOK && sid != "":
				opened = append(opened, sid)
			case resp.StatusCode == http.StatusServiceUnavailable:
				refused++
			default:
				unexpects = append(unexpects, resp.StatusCode)
			}
		})
	}
	close(start)
	deadline := time.After(30 * time.Second)
	for i := range n {
		select {
		case <-arrived:
		case <-deadline:
			t.Fatalf("only %d of %d initializes reached the session open or a refusal in 30s", i, n)
		}
	}
	close(release)
	wg.Wait()
	if len(opened) != limit || refused != n-limit || len(unexpects) > 0 {
		t.Fatalf("%d initializes at max_sessions %d: %d sessions, %d refused, other statuses %v", n, limit, len(opened), refused, unexpects)
	}
	// Every slot is taken: one more is refused.
	resp, err := rawPost(context.Background(), m.ts.URL, "", "", initialize)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("initialize past the limit: HTTP %d", resp.StatusCode)
	}
}
