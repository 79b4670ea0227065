package upstream_test

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcp-mux/mcp-mux/internal/mcptest"
	"github.com/mcp-mux/mcp-mux/internal/upstream"
	"github.com/mcp-mux/mcp-mux/internal/wire"
)

// Forty threads calling one stdio server at once never run more than
// max_sessions (default 16) call processes; the callers over the cap wait
// for a session to come free, and every call succeeds.
func TestStdioCapHoldsWhileBusy(t *testing.T) {
	name := fmt.Sprintf("capped-%d", time.Now().UnixNano())
	u := start(t, stdioOptions(name, mcptest.StdioOptions{}))
	var peak atomic.Int64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			if n := int64(len(mcptest.StdioServers(name))); n > peak.Load() {
				peak.Store(n)
			}
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
		}
	}()
	const threads = 40
	var wg sync.WaitGroup
	errs := make(chan error, threads)
	for i := range threads {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			raw, err := call(ctx, u, upstream.Key{User: "u", Thread: fmt.Sprint("t", i)}, "sleep", `{"ms":150}`)
			if err == nil && !strings.Contains(string(raw), "slept") {
				err = fmt.Errorf("unexpected result %s", raw)
			}
			if err != nil {
				errs <- fmt.Errorf("thread %d: %w", i, err)
			}
		})
	}
	wg.Wait()
	close(stop)
	<-sampled
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	// One more process is the discovery session's.
	if p := peak.Load() - 1; p > 16 || p < 2 {
		t.Errorf("peak call processes = %d, want 2..16", p)
	}
	if n := u.Sessions(); n > 16 {
		t.Errorf("Sessions() = %d above the default cap 16", n)
	}
	t.Logf("peak call processes: %d", peak.Load()-1)
}

// A caller that finds every session busy gives up at its deadline with an
// error that says why.
func TestPoolWaitBoundedByCallTimeout(t *testing.T) {
	bs := newBlockingServer()
	o := httpOptions(t, bs.Server)
	o.MaxSessions = 1
	o.CallTimeout = 300 * time.Millisecond
	u := start(t, o)
	done := make(chan error, 1)
	go func() { // Request: not bounded by CallTimeout
		_, err := u.Request(context.Background(), "tools/call", upstream.Call{Key: upstream.Key{Thread: "a"}, Params: wire.AppendCallParams(nil, "block", nil, nil)})
		done <- err
	}()
	recv(t, bs.entered, 10*time.Second, "block call to start")
	begin := time.Now()
	_, err := call(context.Background(), u, upstream.Key{Thread: "b"}, "count", "")
	if err == nil || !strings.Contains(err.Error(), "waiting for a free session (all 1 are busy)") {
		t.Errorf("err = %v, want a timeout naming the busy pool", err)
	}
	if d := time.Since(begin); d > 3*time.Second {
		t.Errorf("waiting caller returned after %s", d)
	}
	close(bs.release)
	if err := <-done; err != nil {
		t.Errorf("the busy call: %v", err)
	}
	// Once a is idle, b takes its slot (Request: unbounded by CallTimeout on a busy machine).
	raw, err := u.Request(context.Background(), "tools/call", upstream.Call{Key: upstream.Key{Thread: "b"}, Params: wire.AppendCallParams(nil, "count", nil, nil)})
	if err != nil || resultText(t, raw) != "1" {
		t.Errorf("count on b once a is idle = %s, %v; want 1", raw, err)
	}
	if n := u.Sessions(); n != 1 {
		t.Errorf("Sessions() = %d, want 1", n)
	}
}

// An idle pooled HTTP call session costs no goroutine of mcp-mux's (its
// SDK side does no I/O once initialized: calls go direct), and still ends
// as a session should: the idle sweep closes it with a DELETE the server
// sees, and the next call on its key opens a new one.
func TestIdleHTTPCallSessionsHoldNoMuxGoroutine(t *testing.T) {
	srv := mcptest.NewServer("web")
	o := httpOptions(t, srv)
	o.IdleTimeout = 2 * time.Second
	u := start(t, o)
	serverSessions := func() int {
		n := 0
		for range srv.Sessions() {
			n++
		}
		return n
	}
	base := settledMuxGoroutines(t)
	const n = 4
	for i := range n {
		if got := callText(t, u, upstream.Key{Thread: fmt.Sprint("t", i)}, "count", ""); got != "1" {
			t.Fatalf("count on thread %d = %s, want 1", i, got)
		}
	}
	if s := u.Sessions(); s != n {
		t.Fatalf("Sessions() = %d, want %d", s, n)
	}
	if got := settledMuxGoroutines(t); got > base {
		t.Errorf("mcp-mux goroutines %d → %d with %d idle call sessions, want none added", base, got, n)
	}
	// The discovery session stays; the sweep DELETEs the idle call sessions.
	waitFor(t, 20*time.Second, "the idle sweep to close the call sessions on the server", func() bool {
		return u.Sessions() == 0 && serverSessions() == 1
	})
	if got := callText(t, u, upstream.Key{Thread: "t0"}, "count", ""); got != "1" {
		t.Errorf("count on a new session after the sweep = %s, want 1", got)
	}
}

// settledMuxGoroutines counts the goroutines running mcp-mux's upstream
// code once the count holds still (what earlier tests left winds down).
func settledMuxGoroutines(t *testing.T) int {
	t.Helper()
	count := func() int {
		buf := make([]byte, 1<<20)
		for {
			n := runtime.Stack(buf, true)
			if n < len(buf) {
				buf = buf[:n]
				break
			}
			buf = make([]byte, 2*len(buf))
		}
		c := 0
		for g := range strings.SplitSeq(string(buf), "\n\n") {
			if strings.Contains(g, "mcp-mux/internal/upstream.") {
				c++
			}
		}
		return c
	}
	last := count()
	for range 100 {
		time.Sleep(50 * time.Millisecond)
		c := count()
		if c == last {
			return c
		}
		last = c
	}
	t.Fatalf("the goroutine count did not settle (last %d)", last)
	return 0
}
