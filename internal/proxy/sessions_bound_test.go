package proxy_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mcp-mux/mcp-mux/internal/bounds"
	"github.com/mcp-mux/mcp-mux/internal/mcptest"
	"github.com/mcp-mux/mcp-mux/internal/proxy"
	"github.com/mcp-mux/mcp-mux/internal/sessionstore"
	"github.com/mcp-mux/mcp-mux/internal/storeclient"
	"github.com/mcp-mux/mcp-mux/internal/taskpoll"
)

// Issue 32's attacks on shared 2025-11-25 sessions, each against two
// replicas on one private redis-server.

// startReplicaSet is startReplicasWith with each replica's proxy options
// passed through opts too (nil: unchanged).
func startReplicaSet(t *testing.T, n int, cfg string, store func(i int, o *sessionstore.Options), opts func(i int, o *proxy.Options)) *replicaSet {
	t.Helper()
	rs := &replicaSet{redis: mcptest.StartRedis(t, false), hits: make([]atomic.Int64, n), trips: make([]atomic.Int64, n)}
	for i := range n {
		o := proxy.Options{StateKey: testStateKey, SessionStore: func(o sessionstore.Options) sessionstore.Store {
			if store != nil {
				store(i, &o)
			}
			c := redis.NewClient(&redis.Options{Addr: rs.redis.Addr})
			c.AddHook(tripCounter{&rs.trips[i]})
			return sessionstore.NewRedis(sessionstore.RedisOptions{Options: o, Client: c, KeyPrefix: "test:"})
		}}
		if opts != nil {
			opts(i, &o)
		}
		rs.muxes = append(rs.muxes, startMux(t, cfg, o))
	}
	return rs
}

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
	all, err := c.Keys(ctx, sessionstore.SessionKey("test:", sid)+"*").Result()
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
		keys = append(keys, fmt.Sprintf("%s=%d", strings.TrimPrefix(k, sessionstore.SessionKey("test:", sid)), n))
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

// TestReplicasDeleteBeatsFirstLoad (issue 32, attack 5): a replica whose
// first request of a session reads its record just before a DELETE on
// another replica, and hears of the end before registering it, must not
// keep the session (it answered 200 for as long as it was used).
func TestReplicasDeleteBeatsFirstLoad(t *testing.T) {
	ended := make(chan string, 4)
	rs := startReplicaSet(t, 2, `{"mcpServers": {}}`, func(i int, o *sessionstore.Options) {
		if i == 1 {
			inner := o.OnChange
			o.OnChange = func(c sessionstore.Change) {
				inner(c)
				if c.Ended {
					ended <- c.ID
				}
			}
		}
	}, nil)
	a, b := rs.muxes[0].ts.URL, rs.muxes[1].ts.URL
	sid := rawInit(t, testHTTP, a, `{}`)
	read, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	proxy.HoldSessionLoadsForTest(rs.muxes[1].srv, func(id string) {
		if id == sid {
			once.Do(func() { close(read); <-release })
		}
	})
	ping := `{"jsonrpc":"2.0","id":7,"method":"ping"}`
	first := make(chan int, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodPost, b+"/mcp", strings.NewReader(ping))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Session-Id", sid)
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		resp, err := testHTTP.Do(req)
		if err != nil {
			first <- 0
			return
		}
		resp.Body.Close()
		first <- resp.StatusCode
	}()
	<-read // b read the record; the DELETE comes now
	if code := deleteOn(t, a, sid); code != http.StatusNoContent {
		t.Fatalf("DELETE: HTTP %d", code)
	}
	select {
	case <-ended:
	case <-time.After(10 * time.Second):
		t.Fatal("b never heard of the end")
	}
	close(release)
	t.Logf("b's first request, racing the DELETE: HTTP %d", <-first)
	resp := rawDo(t, testHTTP, b, sid, ping)
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("b after a DELETE answered 204: HTTP %d, want 404 (the session lives on there)", resp.StatusCode)
	}
}

func deleteOn(t *testing.T, base, sid string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodDelete, base+"/mcp", nil)
	req.Header.Set("Mcp-Session-Id", sid)
	resp, err := testHTTP.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// deafness is whether a replica drops the change notices it receives
// (on), and whether it dropped the notice of a session's end (ended).
type deafness struct{ on, ended atomic.Bool }

// deafReplicas starts two replicas whose second one drops the change
// notices it receives while deaf is on (as when its link to Redis is
// down when they are published), rechecking its sessions every recheck.
func deafReplicas(t *testing.T, recheck time.Duration) (*replicaSet, *deafness) {
	t.Helper()
	deaf := &deafness{}
	rs := startReplicaSet(t, 2, `{"mcpServers": {}}`, func(i int, o *sessionstore.Options) {
		if i == 1 {
			inner := o.OnChange
			o.OnChange = func(c sessionstore.Change) {
				if !deaf.on.Load() {
					inner(c)
				} else if c.Ended {
					deaf.ended.Store(true)
				}
			}
		}
	}, func(_ int, o *proxy.Options) { o.SessionRecheck = recheck })
	return rs, deaf
}

// deleteUnheard opens a session on the first replica of rs, has the
// second use it, and DELETEs it on the first while the second is deaf
// (until the second has dropped the DELETE's notice, which reaches it
// after the DELETE is answered).
func deleteUnheard(t *testing.T, rs *replicaSet, deaf *deafness) string {
	t.Helper()
	a, b := rs.muxes[0].ts.URL, rs.muxes[1].ts.URL
	sid := rawInit(t, testHTTP, a, `{}`)
	ping := `{"jsonrpc":"2.0","id":7,"method":"ping"}`
	resp := rawDo(t, testHTTP, b, sid, ping)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("b: HTTP %d", resp.StatusCode)
	}
	deaf.on.Store(true)
	if code := deleteOn(t, a, sid); code != http.StatusNoContent {
		t.Fatalf("DELETE: HTTP %d", code)
	}
	if !waitUntilFor(5*time.Second, deaf.ended.Load) {
		t.Fatal("the DELETE's notice did not reach the second replica")
	}
	deaf.on.Store(false)
	return sid
}

// TestReplicasRecheckOnReconnect (issue 32, attack 5): a DELETE whose
// notice a replica missed while its pub/sub link was down used to leave
// the session alive there (answering with no record in Redis); the
// replica now checks its sessions against their records when the link
// comes back.
func TestReplicasRecheckOnReconnect(t *testing.T) {
	rs, deaf := deafReplicas(t, time.Hour) // no interval check within the test
	b := rs.muxes[1].ts.URL
	sid := deleteUnheard(t, rs, deaf)
	ping := `{"jsonrpc":"2.0","id":7,"method":"ping"}`
	resp := rawDo(t, testHTTP, b, sid, ping)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("b before its link reconnects: HTTP %d; the test expects it not to know yet", resp.StatusCode)
	}
	if err := redisOf(t, rs).Do(context.Background(), "CLIENT", "KILL", "TYPE", "pubsub").Err(); err != nil {
		t.Fatal(err)
	}
	if !waitUntilFor(10*time.Second, func() bool {
		resp := rawDo(t, testHTTP, b, sid, ping)
		resp.Body.Close()
		return resp.StatusCode == http.StatusNotFound
	}) {
		t.Fatal("b still serves a session DELETEd (204) before its pub/sub link reconnected, 10s after it reconnected")
	}
}

// TestReplicasRecheckOnInterval (issue 32, attack 5): with no reconnect
// to tell it, a replica that missed a DELETE's notice answers 404 within
// its recheck interval.
func TestReplicasRecheckOnInterval(t *testing.T) {
	const recheck = 300 * time.Millisecond
	rs, deaf := deafReplicas(t, recheck)
	b := rs.muxes[1].ts.URL
	sid := deleteUnheard(t, rs, deaf)
	ping := `{"jsonrpc":"2.0","id":7,"method":"ping"}`
	if !waitUntilFor(10*recheck+5*time.Second, func() bool {
		resp := rawDo(t, testHTTP, b, sid, ping)
		resp.Body.Close()
		return resp.StatusCode == http.StatusNotFound
	}) {
		t.Fatalf("b still serves a session DELETEd (204) whose notice it missed, %s after", 10*recheck+5*time.Second)
	}
}

// TestReplicasSessionCapsHold (issue 32, attack 6): the admission sets
// used to expire one idle timeout after the last admission while their
// sessions lived on, so a caller with a share of 5 could open 5 more
// each timeout. Now, with sessions kept in use for three idle timeouts,
// the caller's share and the count still hold.
func TestReplicasSessionCapsHold(t *testing.T) {
	cfg := `{"mcpServers": {}, "inbound": {"auth": {"mode": "trusted_header"}, "user_header": "X-User",
		"max_sessions_per_user": 5, "session_idle_timeout_seconds": 1}}`
	rs := startReplicas(t, 2, cfg)
	alice := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		r = r.Clone(r.Context())
		r.Header.Set("X-User", "alice")
		return testHTTP.Transport.RoundTrip(r)
	})}
	base := func(i int) string { return rs.muxes[i%2].ts.URL }
	var sids []string
	for i := range 5 {
		sids = append(sids, rawInit(t, alice, base(i), `{}`))
	}
	initialize := func(i int) int {
		resp := rawDo(t, alice, base(i), "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := initialize(0); code != http.StatusServiceUnavailable {
		t.Fatalf("a sixth session at once: HTTP %d, want 503", code)
	}
	// Three idle timeouts in which nobody opens a session and alice's five
	// stay in use, on both replicas.
	ping := `{"jsonrpc":"2.0","id":7,"method":"ping"}`
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); {
		for i, sid := range sids {
			resp := rawDo(t, alice, base(i+1), sid, ping)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("session %d in use: HTTP %d", i, resp.StatusCode)
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	opened := 0
	for i := range 10 {
		if initialize(i) == http.StatusOK {
			opened++
		}
	}
	if opened > 0 {
		var n int64 // every caller's set: alice is the only caller
		c := redisOf(t, rs)
		keys, _ := c.Keys(context.Background(), "test:{su:*").Result()
		for _, k := range keys {
			m, _ := c.ZCard(context.Background(), k).Result()
			n += m
		}
		t.Fatalf("with 5 sessions in use and a share of 5, alice opened %d more after three idle timeouts (Redis counts %d)", opened, n)
	}
}

// TestLastEventIDOutOfRange (issue 32): a Last-Event-ID no log can hand
// out is the client's error (400 naming the header), not the store's
// (503 "unreachable").
func TestLastEventIDOutOfRange(t *testing.T) {
	rs := startReplicas(t, 1, `{"mcpServers": {}}`)
	base := rs.muxes[0].ts.URL
	sid := rawInit(t, testHTTP, base, `{}`)
	for _, id := range []string{"18446744073709551615-18446744073709551615", "18446744073709551615-18446744073709551615_x"} {
		req, _ := http.NewRequest(http.MethodGet, base+"/mcp", nil)
		req.Header.Set("Accept", "text/event-stream")
		req.Header.Set("Mcp-Session-Id", sid)
		req.Header.Set("Last-Event-ID", id)
		resp, err := testHTTP.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body := make([]byte, 512)
		n, _ := resp.Body.Read(body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body[:n]), "Last-Event-ID") {
			t.Fatalf("Last-Event-ID %s: HTTP %d %q, want 400 naming the header", id, resp.StatusCode, body[:n])
		}
	}
}

// TestReplicasAgreeOnSharedKeyAfterRedisRestart (issue 32): the
// requestState key replicas share through Redis (no
// inbound.request_state_key) is lost when Redis restarts empty; a replica
// started then made a new one while those still running kept the old, so
// neither opened the other's requestStates (nor task ids). Now they agree
// again.
func TestReplicasAgreeOnSharedKeyAfterRedisRestart(t *testing.T) {
	up := mcptest.ServeHTTP(t, mcptest.NewServer("web"))
	r := mcptest.StartRedis(t, false)
	cfg := fmt.Sprintf(`{"mcpServers": {"web": {"type": "http", "url": %q}}}`, up.URL+"/mcp")
	start := func() *mux {
		t.Helper()
		c := redis.NewClient(&redis.Options{Addr: r.Addr})
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		key, err := sessionstore.SharedKey(ctx, c, "test:")
		cancel()
		_ = c.Close()
		if err != nil {
			t.Fatal(err)
		}
		return startMux(t, cfg, proxy.Options{StateKey: key, SessionStore: func(o sessionstore.Options) sessionstore.Store {
			return sessionstore.NewRedis(sessionstore.RedisOptions{Options: o, Client: redis.NewClient(&redis.Options{Addr: r.Addr}), KeyPrefix: "test:"})
		}})
	}
	// forwarded reports whether a call parked on from continues on to.
	forwarded := func(from, to *mux) bool {
		const caps = `{"elicitation":{}}`
		_, res := modernCall(t, from.ts.URL+"/mcp", nil, caps, "tools/call", "web_elicit", `"name":"web_elicit","arguments":{"tag":"k"}`)
		reqs, state := inputRequiredOf(t, res)
		var key string
		for k := range reqs {
			key = k
		}
		answer := `"inputResponses":{"` + key + `":{"action":"accept","content":{"answer":"yes"}}}`
		_, res = modernCall(t, to.ts.URL+"/mcp", nil, caps, "tools/call", "web_elicit",
			`"name":"web_elicit","arguments":{"tag":"k"},`+answer+`,"requestState":`+mustQuote(state))
		return res.Error == nil && strings.Contains(string(res.Result), "elicited accept yes")
	}
	a, b := start(), start()
	if !forwarded(a, b) {
		t.Fatal("two replicas on one shared key do not continue each other's calls")
	}
	r.Stop()
	r.Start() // empty: the shared key is gone
	c := start()
	agreed := false
	for range 60 {
		if forwarded(a, c) && forwarded(c, a) {
			agreed = true
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	if !agreed {
		t.Fatal("after Redis restarted empty, a replica that kept running and one started since never opened each other's requestStates")
	}
}

// TestReplicasTaskEventsReachThreadsElsewhere (issue 32, attack 3): what
// the threads are in the record for still works across replicas with
// digests. A session called as many threads on one replica and submitted
// a durable task as the last; the task's completion reaches the
// session's GET stream, held by the other replica, which knows the thread
// only from the record's notices.
func TestReplicasTaskEventsReachThreadsElsewhere(t *testing.T) {
	job := &mcptest.TaskServer{PollsToComplete: 1}
	upTS := mcptest.ServeHTTP(t, job.MCP())
	r := mcptest.StartRedis(t, false)
	cfg := `{"mcpServers": {"jobs": ` + mcptest.TaskServerJSON(upTS.URL+"/mcp", "") + `}, "mcp_tasks": {"enabled": true}}`
	var ms []*mux
	for range 2 {
		tc, err := storeclient.Dial(r.URL())
		if err != nil {
			t.Fatal(err)
		}
		store := taskpoll.NewRedisStore(taskpoll.RedisOptions{Client: tc, KeyPrefix: "tasks:"})
		t.Cleanup(func() { _ = store.Close() })
		ms = append(ms, startMux(t, cfg, proxy.Options{StateKey: testStateKey,
			TaskStore: store, TaskConfig: taskpoll.Config{PollInterval: 20 * time.Millisecond, Lease: 10 * time.Second},
			SessionStore: func(o sessionstore.Options) sessionstore.Store {
				return sessionstore.NewRedis(sessionstore.RedisOptions{Options: o, Client: redis.NewClient(&redis.Options{Addr: r.Addr}), KeyPrefix: "test:"})
			}}))
	}
	a, b := ms[0].ts.URL, ms[1].ts.URL
	sid := rawInit(t, testHTTP, a, `{}`)
	rawDo(t, testHTTP, a, sid, `{"jsonrpc":"2.0","id":2,"method":"logging/setLevel","params":{"level":"info"}}`).Body.Close()
	stream := openEvents(t, b, sid, "")
	if _, data := stream.next(t); data != "" {
		t.Fatalf("first event %q, want the priming event", data)
	}
	as := func(thread, body string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, a+"/mcp", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Session-Id", sid)
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		req.Header.Set("X-Mux-Thread-Id", thread)
		resp, err := testHTTP.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("call as %.8s…: HTTP %d", thread, resp.StatusCode)
		}
	}
	for i := range 2 * bounds.SessionThreads {
		as(fmt.Sprintf("%04d", i)+strings.Repeat("o", bounds.Thread-4), fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"nope","arguments":{}}}`, 10+i))
	}
	as("th-"+strings.Repeat("x", bounds.Thread-3), `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"jobs_submit_job","arguments":{"input":"x"}}}`)
	for {
		_, data := stream.next(t)
		if strings.Contains(data, `"notifications/message"`) && strings.Contains(data, "mcp-mux.tasks") && strings.Contains(data, `completed`) {
			return
		}
	}
}
