package proxy_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mcp-mux/mcp-mux/internal/bounds"
	"github.com/mcp-mux/mcp-mux/proxy"
)

// Issue 32's attacks on shared 2025-11-25 sessions, each against two
// replicas on one private redis-server.

// redisOf is a client of rs's redis-server, closed when the test ends.
func redisOf(t *testing.T, rs *replicaSet) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: rs.redis.Addr})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// sessionBytes is the Redis memory of session sid's keys, its event log
// aside: its record and whatever is kept beside it.
func sessionBytes(t *testing.T, c *redis.Client, sid string) (total int64, keys []string) {
	t.Helper()
	ctx := context.Background()
	all, err := c.Keys(ctx, "test:{s:"+sid+"}*").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range all {
		if strings.HasSuffix(k, ":log") {
			continue
		}
		n, err := c.MemoryUsage(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		total += n
		keys = append(keys, fmt.Sprintf("%s=%d", strings.TrimPrefix(k, "test:{s:"+sid+"}"), n))
	}
	return total, keys
}

// busWatch records the largest message published on the replicas' bus.
type busWatch struct {
	ps      *redis.PubSub
	largest atomic.Int64
	count   atomic.Int64
	done    chan struct{}
}

func watchBus(t *testing.T, c *redis.Client) *busWatch {
	t.Helper()
	w := &busWatch{ps: c.Subscribe(context.Background(), "test:s:bus"), done: make(chan struct{})}
	if _, err := w.ps.Receive(context.Background()); err != nil { // the confirmation
		t.Fatal(err)
	}
	go func() {
		defer close(w.done)
		for m := range w.ps.Channel() {
			w.count.Add(1)
			if n := int64(len(m.Payload)); n > w.largest.Load() {
				w.largest.Store(n)
			}
		}
	}()
	t.Cleanup(w.stop)
	return w
}

func (w *busWatch) stop() {
	_ = w.ps.Close()
	<-w.done
}

// waitUntilFor is waitLong that reports instead of failing.
func waitUntilFor(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
	return true
}

// TestReplicasSessionRecordBounded (issue 32, attack 3): every call as a
// new thread used to add the thread to the session's record, which was
// rewritten and published whole to every replica (300 calls with 60 KB
// thread ids: records of MBs, GBs through Redis). Now 300 calls of an
// unknown tool, each as a new thread of bounds.Thread bytes, leave the
// session's record and what is kept beside it within a few KiB, every
// bus message within 2 KiB, and the other replica still knows the
// newest thread (task events of that thread reach the session there).
func TestReplicasSessionRecordBounded(t *testing.T) {
	rs := startReplicas(t, 2, `{"mcpServers": {}}`)
	a, b := rs.muxes[0].ts.URL, rs.muxes[1].ts.URL
	c := redisOf(t, rs)
	sid := rawInit(t, testHTTP, a, `{}`)
	ping := `{"jsonrpc":"2.0","id":7,"method":"ping"}`
	rawDo(t, testHTTP, b, sid, ping).Body.Close() // b keeps the session: it hears of changes
	bus := watchBus(t, c)
	const calls = 300
	thread := func(i int) string { return fmt.Sprintf("%04d", i) + strings.Repeat("t", bounds.Thread-4) }
	for i := range calls {
		req, _ := http.NewRequest(http.MethodPost, a+"/mcp", strings.NewReader(
			fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"nope","arguments":{}}}`, 10+i)))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Session-Id", sid)
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		req.Header.Set("X-Mux-Thread-Id", thread(i))
		resp, err := testHTTP.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("call %d: HTTP %d", i, resp.StatusCode)
		}
	}
	last := thread(calls - 1)
	known := waitUntilFor(20*time.Second, func() bool { return proxy.SessionHasThreadForTest(rs.muxes[1].srv, sid, last) })
	total, keys := sessionBytes(t, c, sid)
	t.Logf("after %d calls as new %d-byte threads: the session's keys use %d bytes of Redis %v; %d bus messages, the largest %d bytes",
		calls, bounds.Thread, total, keys, bus.count.Load(), bus.largest.Load())
	if total > 8<<10 {
		t.Errorf("the session's record and what is kept beside it use %d bytes of Redis, want at most 8 KiB", total)
	}
	if n := bus.largest.Load(); n > 2<<10 {
		t.Errorf("a change notice of %d bytes went to every replica, want at most 2 KiB", n)
	}
	if !known {
		t.Error("the other replica never learned of the newest thread the session called as")
	}
}
