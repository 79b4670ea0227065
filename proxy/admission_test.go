package proxy_test

import (
	"context"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/proxy"
)

const rawInitialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`

// N initializes at once against inbound.max_sessions K open exactly K
// sessions: the others are refused with 503, however many were in flight.
// Every initialize that got past admission is held just before its session
// is registered until all N are either held there or refused, so all N are
// in flight together on every run, not only when the scheduler happens to
// interleave them.
func TestSessionAdmissionIsExact(t *testing.T) {
	const limit, n = 3, 32
	m := startMux(t, `{"mcpServers": {}, "inbound": {"max_sessions": 3}}`, proxy.Options{})
	const initialize = rawInitialize
	arrived, release := make(chan struct{}, n), make(chan struct{})
	proxy.HoldSessionOpensForTest(m.srv, func(*mcp.ServerSession) {
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

// A second open of a session that is being opened (two opens of one SDK
// session, both past the "already open?" check before either registered)
// counts it once: closing it gives its admission slot back, so the next
// initialize at inbound.max_sessions 1 opens a session instead of a 503.
func TestSessionOpensOnce(t *testing.T) {
	m := startMux(t, `{"mcpServers": {}, "inbound": {"max_sessions": 1}}`, proxy.Options{})
	var (
		opens  atomic.Int32
		second sync.WaitGroup
		past   = make(chan struct{}) // the second open is past its check too
	)
	proxy.HoldSessionOpensForTest(m.srv, func(ss *mcp.ServerSession) {
		switch opens.Add(1) {
		case 1: // the initialize's own open starts the second one and waits for it
			second.Go(func() { proxy.OpenSessionForTest(m.srv, ss) })
			select {
			case <-past:
			case <-time.After(30 * time.Second):
				t.Error("the second open of the session never reached registration")
			}
		case 2:
			close(past)
		}
	})
	resp, err := rawPost(context.Background(), m.ts.URL, "", "", rawInitialize)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	sid := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || sid == "" {
		t.Fatalf("initialize: HTTP %d, session %q", resp.StatusCode, sid)
	}
	second.Wait()
	if status, _, body := rawRequest(t, http.MethodDelete, m.ts.URL+"/mcp", map[string]string{"Mcp-Session-Id": sid}, ""); status/100 != 2 {
		t.Fatalf("DELETE: HTTP %d %s", status, body)
	}
	deadline := time.Now().Add(10 * time.Second)
	for m.srv.Status().Sessions != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the deleted session is still open after 10s: %d sessions", m.srv.Status().Sessions)
		}
		time.Sleep(5 * time.Millisecond)
	}
	next, err := rawPost(context.Background(), m.ts.URL, "", "", rawInitialize)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, next.Body)
	next.Body.Close()
	if next.StatusCode != http.StatusOK {
		t.Fatalf("initialize after the only session closed, at max_sessions 1: HTTP %d (the double open kept its slot)", next.StatusCode)
	}
}
