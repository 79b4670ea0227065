package sessionstore_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mcp-mux/mcp-mux/internal/bounds"
	"github.com/mcp-mux/mcp-mux/internal/mcptest"
	"github.com/mcp-mux/mcp-mux/internal/secret"
	"github.com/mcp-mux/mcp-mux/internal/sessionstore"
	"github.com/mcp-mux/mcp-mux/internal/storeclient"
)

func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		if err := mcptest.LeakCheck(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// stores runs fn against a Local store and a Redis store on a private
// redis-server.
func stores(t *testing.T, fn func(t *testing.T, open func(o sessionstore.Options) sessionstore.Store)) {
	t.Run("local", func(t *testing.T) {
		fn(t, func(o sessionstore.Options) sessionstore.Store {
			s := sessionstore.NewLocal(o)
			t.Cleanup(func() { _ = s.Close() })
			return s
		})
	})
	t.Run("redis", func(t *testing.T) {
		rs := mcptest.StartRedis(t, false)
		fn(t, func(o sessionstore.Options) sessionstore.Store { return openRedis(t, rs, o) })
	})
	t.Run("cluster", func(t *testing.T) {
		c := mcptest.StartRedisCluster(t, 3)
		fn(t, func(o sessionstore.Options) sessionstore.Store { return openCluster(t, c, o) })
	})
}

// openCluster opens a store on a Redis Cluster, through the shared client
// serve builds (sharded pub/sub).
func openCluster(t *testing.T, c *mcptest.RedisCluster, o sessionstore.Options) *sessionstore.Redis {
	t.Helper()
	rc, err := storeclient.Open(storeclient.Options{Mode: storeclient.Cluster, URL: secret.Value(c.URL())})
	if err != nil {
		t.Fatal(err)
	}
	s := sessionstore.NewRedis(sessionstore.RedisOptions{Options: o, Client: rc, KeyPrefix: "test:"})
	t.Cleanup(func() {
		_ = s.Close()
		_ = rc.Close()
	})
	return s
}

func openRedis(t *testing.T, rs *mcptest.Redis, o sessionstore.Options) *sessionstore.Redis {
	t.Helper()
	s := sessionstore.NewRedis(sessionstore.RedisOptions{Options: o, Client: redis.NewClient(&redis.Options{Addr: rs.Addr}), KeyPrefix: "test:"})
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func record(user string) *sessionstore.Record {
	return &sessionstore.Record{ID: sessionstore.NewID(), User: user, Protocol: "2025-11-25", Init: json.RawMessage(`{"protocolVersion":"2025-11-25"}`)}
}

func TestRecordLifecycle(t *testing.T) {
	stores(t, func(t *testing.T, open func(sessionstore.Options) sessionstore.Store) {
		ctx := context.Background()
		s := open(sessionstore.Options{TTL: time.Minute})
		r := record("alice")
		if err := s.Create(ctx, r, sessionstore.Bounds{}); err != nil {
			t.Fatal(err)
		}
		got, err := s.Get(ctx, r.ID)
		if err != nil || got.User != "alice" || got.Protocol != "2025-11-25" || string(got.Init) != string(r.Init) || got.ID != r.ID {
			t.Fatalf("Get = %+v, %v", got, err)
		}
		up, n, err := s.Add(ctx, r.ID, sessionstore.ListPromoted, "a_x", "b_y")
		if err != nil || n != 2 || up.Rev != 1 || up.User != "alice" {
			t.Fatalf("Add = %+v, %d, %v", up, n, err)
		}
		// An addition that changes nothing writes nothing.
		if up, n, err = s.Add(ctx, r.ID, sessionstore.ListPromoted, "a_x"); err != nil || n != 0 || up.Rev != 1 {
			t.Fatalf("no-op Add = %+v, %d, %v", up, n, err)
		}
		if _, err := s.Update(ctx, r.ID, sessionstore.SetLevel("debug")); err != nil {
			t.Fatal(err)
		}
		got, _ = s.Get(ctx, r.ID)
		if got.Level != "debug" || len(got.Promoted) != 2 || got.Rev != 2 {
			t.Fatalf("after updates: %+v", got)
		}
		if n, _ := s.Count(ctx); n != 1 {
			t.Fatalf("Count = %d", n)
		}
		if err := s.Delete(ctx, r.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Get(ctx, r.ID); !errors.Is(err, sessionstore.ErrNotFound) {
			t.Fatalf("Get after Delete: %v", err)
		}
		if _, err := s.Update(ctx, r.ID, sessionstore.SetLevel("info")); !errors.Is(err, sessionstore.ErrNotFound) {
			t.Fatalf("Update after Delete: %v", err)
		}
		if err := s.Append(ctx, r.ID, json.RawMessage(`{}`)); !errors.Is(err, sessionstore.ErrNotFound) {
			t.Fatalf("Append after Delete: %v", err)
		}
		if n, _ := s.Count(ctx); n != 0 {
			t.Fatalf("Count after Delete = %d", n)
		}
	})
}

func TestCreateKeepsBounds(t *testing.T) {
	stores(t, func(t *testing.T, open func(sessionstore.Options) sessionstore.Store) {
		ctx := context.Background()
		s := open(sessionstore.Options{TTL: time.Minute})
		b := sessionstore.Bounds{Limit: 3, Share: 2}
		var alice []*sessionstore.Record
		for range 2 {
			r := record("alice")
			if err := s.Create(ctx, r, b); err != nil {
				t.Fatal(err)
			}
			alice = append(alice, r)
		}
		var le *sessionstore.LimitError
		if err := s.Create(ctx, record("alice"), b); !errors.As(err, &le) || !le.Share {
			t.Fatalf("third of alice's: %v, want the share refusal", err)
		}
		if err := s.Create(ctx, record("bob"), b); err != nil {
			t.Fatal(err)
		}
		if err := s.Create(ctx, record("carol"), b); !errors.As(err, &le) || le.Share {
			t.Fatalf("fourth session: %v, want the cap refusal", err)
		}
		// A deleted session frees its place at once.
		if err := s.Delete(ctx, alice[0].ID); err != nil {
			t.Fatal(err)
		}
		if err := s.Create(ctx, record("alice"), b); err != nil {
			t.Fatalf("after a delete: %v", err)
		}
	})
}

// recv returns the next event of f within 10 s.
func recv(t *testing.T, f *sessionstore.Follower) sessionstore.Event {
	t.Helper()
	sig := make(chan struct{}, 1)
	f.Notify(func() {
		select {
		case sig <- struct{}{}:
		default:
		}
	})
	timeout := time.After(10 * time.Second)
	for {
		if e, ok := f.Next(); ok {
			return e
		}
		select {
		case <-sig:
		case <-f.Done():
			if e, ok := f.Next(); ok {
				return e
			}
			t.Fatal("follower ended")
		case <-timeout:
			t.Fatal("no event within 10s")
		}
	}
}

func TestFollowReplaysAndDelivers(t *testing.T) {
	stores(t, func(t *testing.T, open func(sessionstore.Options) sessionstore.Store) {
		ctx := context.Background()
		s := open(sessionstore.Options{TTL: time.Minute})
		r := record("alice")
		if err := s.Create(ctx, r, sessionstore.Bounds{}); err != nil {
			t.Fatal(err)
		}
		live, err := s.Follow(ctx, r.ID, "")
		if err != nil {
			t.Fatal(err)
		}
		defer live.Close()
		prime := live.Prime()
		for i := range 3 {
			if err := s.Append(ctx, r.ID, json.RawMessage(fmt.Sprintf(`{"n":%d}`, i))); err != nil {
				t.Fatal(err)
			}
		}
		var ids []string
		for i := range 3 {
			e := recv(t, live)
			if string(e.Data) != fmt.Sprintf(`{"n":%d}`, i) {
				t.Fatalf("event %d = %s", i, e.Data)
			}
			ids = append(ids, e.ID)
		}
		// Resuming after the first event replays the other two, in order,
		// then goes on live.
		after, ok := sessionstore.LastEventID(ids[0])
		if !ok {
			t.Fatalf("LastEventID(%q) not ok", ids[0])
		}
		resumed, err := s.Follow(ctx, r.ID, after)
		if err != nil {
			t.Fatal(err)
		}
		defer resumed.Close()
		for i := 1; i < 3; i++ {
			if e := recv(t, resumed); e.ID != ids[i] {
				t.Fatalf("replayed %s, want %s", e.ID, ids[i])
			}
		}
		// The priming id resumes everything logged after the follower began.
		from, ok := sessionstore.LastEventID(prime)
		if !ok {
			t.Fatalf("LastEventID(%q) not ok", prime)
		}
		primed, err := s.Follow(ctx, r.ID, from)
		if err != nil {
			t.Fatal(err)
		}
		defer primed.Close()
		if e := recv(t, primed); e.ID != ids[0] {
			t.Fatalf("from the prime: %s, want %s", e.ID, ids[0])
		}
		if err := s.Append(ctx, r.ID, json.RawMessage(`{"n":3}`)); err != nil {
			t.Fatal(err)
		}
		for _, f := range []*sessionstore.Follower{live, resumed} {
			if e := recv(t, f); string(e.Data) != `{"n":3}` {
				t.Fatalf("live after replay: %s", e.Data)
			}
		}
		// Deleting the session ends its followers.
		if err := s.Delete(ctx, r.ID); err != nil {
			t.Fatal(err)
		}
		select {
		case <-live.Done():
		case <-time.After(10 * time.Second):
			t.Fatal("follower not ended by Delete")
		}
	})
}

func TestLogIsBounded(t *testing.T) {
	stores(t, func(t *testing.T, open func(sessionstore.Options) sessionstore.Store) {
		ctx := context.Background()
		s := open(sessionstore.Options{TTL: time.Minute})
		r := record("alice")
		if err := s.Create(ctx, r, sessionstore.Bounds{}); err != nil {
			t.Fatal(err)
		}
		for i := range 3 * sessionstore.MaxLogSize {
			if err := s.Append(ctx, r.ID, json.RawMessage(fmt.Sprintf(`{"n":%d}`, i))); err != nil {
				t.Fatal(err)
			}
		}
		f, err := s.Follow(ctx, r.ID, "0-0")
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		time.Sleep(200 * time.Millisecond)
		n := 0
		for _, ok := f.Next(); ok; _, ok = f.Next() {
			n++
		}
		if n < sessionstore.MaxLogSize || n > 2*sessionstore.MaxLogSize {
			t.Fatalf("replayed %d events of %d, want about %d", n, 3*sessionstore.MaxLogSize, sessionstore.MaxLogSize)
		}
	})
}

// TestReplicasShareSessions: what one replica writes, another sees: the
// record, log events at its followers, changes, and addressed messages.
func TestReplicasShareSessions(t *testing.T) {
	rs := mcptest.StartRedis(t, false)
	ctx := context.Background()
	var mu sync.Mutex
	var changes []sessionstore.Change
	var msgs []sessionstore.Message
	changed := make(chan struct{}, 16)
	a := openRedis(t, rs, sessionstore.Options{Replica: "a", TTL: time.Minute})
	b := openRedis(t, rs, sessionstore.Options{Replica: "b", TTL: time.Minute,
		OnChange: func(c sessionstore.Change) {
			mu.Lock()
			changes = append(changes, c)
			mu.Unlock()
			changed <- struct{}{}
		},
		OnMessage: func(m sessionstore.Message) {
			mu.Lock()
			msgs = append(msgs, m)
			mu.Unlock()
			changed <- struct{}{}
		}})
	r := record("alice")
	if err := a.Create(ctx, r, sessionstore.Bounds{}); err != nil {
		t.Fatal(err)
	}
	if got, err := b.Get(ctx, r.ID); err != nil || got.User != "alice" {
		t.Fatalf("b.Get = %+v, %v", got, err)
	}
	f, err := b.Follow(ctx, r.ID, "")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := a.Append(ctx, r.ID, json.RawMessage(`{"method":"x"}`)); err != nil {
		t.Fatal(err)
	}
	if e := recv(t, f); string(e.Data) != `{"method":"x"}` {
		t.Fatalf("b's follower got %s", e.Data)
	}
	wait := func() {
		t.Helper()
		select {
		case <-changed:
		case <-time.After(10 * time.Second):
			t.Fatal("nothing reached b")
		}
	}
	if _, err := a.Update(ctx, r.ID, sessionstore.SetLevel("info")); err != nil {
		t.Fatal(err)
	}
	wait()
	if err := a.Send(ctx, "b", sessionstore.Message{Kind: "answer", Session: r.ID, Body: json.RawMessage(`{"id":"x"}`)}); err != nil {
		t.Fatal(err)
	}
	wait()
	if err := a.Send(ctx, "nobody", sessionstore.Message{Kind: "answer"}); !errors.Is(err, sessionstore.ErrNoReplica) {
		t.Fatalf("Send to a missing replica: %v", err)
	}
	if err := a.Delete(ctx, r.ID); err != nil {
		t.Fatal(err)
	}
	wait()
	<-f.Done()
	mu.Lock()
	defer mu.Unlock()
	if len(changes) != 2 || changes[0].ID != r.ID || changes[0].Rev != 1 || changes[0].From != "a" || changes[0].Record == nil ||
		changes[0].Record.Level != "info" || !changes[1].Ended {
		t.Fatalf("changes = %+v", changes)
	}
	if len(msgs) != 1 || msgs[0].Kind != "answer" || string(msgs[0].Body) != `{"id":"x"}` {
		t.Fatalf("messages = %+v", msgs)
	}
}

// TestConcurrentUpdatesAllLand: updates racing on two replicas all land.
func TestConcurrentUpdatesAllLand(t *testing.T) {
	rs := mcptest.StartRedis(t, false)
	ctx := context.Background()
	a := openRedis(t, rs, sessionstore.Options{Replica: "a", TTL: time.Minute})
	b := openRedis(t, rs, sessionstore.Options{Replica: "b", TTL: time.Minute})
	r := record("alice")
	if err := a.Create(ctx, r, sessionstore.Bounds{}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range 20 {
		s := sessionstore.Store(a)
		if i%2 == 1 {
			s = b
		}
		wg.Go(func() {
			if i%4 < 2 {
				if _, _, err := s.Add(ctx, r.ID, sessionstore.ListPromoted, fmt.Sprintf("t%d", i)); err != nil {
					t.Error(err)
				}
			} else if _, err := s.Update(ctx, r.ID, sessionstore.SetLevel(fmt.Sprintf("l%d", i))); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	got, err := a.Get(ctx, r.ID)
	if err != nil || len(got.Promoted) != 10 || got.Rev != 20 {
		t.Fatalf("after 20 concurrent changes: %d promoted, rev %d, %v", len(got.Promoted), got.Rev, err)
	}
}

// TestTouchKeepsSessionsAlive: a record lives TTL after its last Touch.
func TestTouchKeepsSessionsAlive(t *testing.T) {
	stores(t, func(t *testing.T, open func(sessionstore.Options) sessionstore.Store) {
		ctx := context.Background()
		s := open(sessionstore.Options{TTL: 600 * time.Millisecond})
		kept, dropped := record("alice"), record("alice")
		for _, r := range []*sessionstore.Record{kept, dropped} {
			if err := s.Create(ctx, r, sessionstore.Bounds{}); err != nil {
				t.Fatal(err)
			}
		}
		deadline := time.Now().Add(20 * time.Second)
		for {
			s.Touch(kept.ID, kept.User)
			if _, err := s.Get(ctx, dropped.ID); errors.Is(err, sessionstore.ErrNotFound) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("an untouched session did not expire")
			}
			time.Sleep(50 * time.Millisecond) // keep touching, as requests would
		}
		if _, err := s.Get(ctx, kept.ID); err != nil {
			t.Fatalf("a touched session expired: %v", err)
		}
	})
}

// TestFollowerCatchesUpAfterRedisRestart: events appended while a
// replica's subscription was reconnecting reach its followers.
func TestFollowerCatchesUpAfterRedisRestart(t *testing.T) {
	rs := mcptest.StartRedis(t, true)
	ctx := context.Background()
	a := openRedis(t, rs, sessionstore.Options{Replica: "a", TTL: time.Minute})
	b := openRedis(t, rs, sessionstore.Options{Replica: "b", TTL: time.Minute})
	r := record("alice")
	if err := a.Create(ctx, r, sessionstore.Bounds{}); err != nil {
		t.Fatal(err)
	}
	f, err := b.Follow(ctx, r.ID, "")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rs.Stop()
	rs.Start()
	deadline := time.Now().Add(20 * time.Second)
	for a.Append(ctx, r.ID, json.RawMessage(`{"after":"restart"}`)) != nil {
		if time.Now().After(deadline) {
			t.Fatal("Redis did not come back")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if e := recv(t, f); string(e.Data) != `{"after":"restart"}` {
		t.Fatalf("after the restart: %s", e.Data)
	}
}

func TestLastEventID(t *testing.T) {
	for in, want := range map[string]string{
		"1-2": "1-2", "17-0_ab": "17-0", "x": "", "": "", "1-": "", "-1": "", "abc_1": "",
		// The last position a log may hand out; past it, none follows.
		"253402300799999-18446744073709551615":      "253402300799999-18446744073709551615",
		"253402300800000-0":                         "",
		"18446744073709551615-18446744073709551615": "",
		"1-2_" + strings.Repeat("x", 300):           "", // past bounds.LastEventID
	} {
		got, ok := sessionstore.LastEventID(in)
		if got != want || ok != (want != "") {
			t.Errorf("LastEventID(%q) = %q, %v; want %q", in, got, ok, want)
		}
	}
}

func TestValidID(t *testing.T) {
	if !sessionstore.ValidID(sessionstore.NewID()) {
		t.Fatal("NewID is not ValidID")
	}
	for _, bad := range []string{"", "short", "ABCDEFGHIJKLMNOP}", "ABCDEFGHIJKLMNOP QR", string(make([]byte, 65))} {
		if sessionstore.ValidID(bad) {
			t.Errorf("ValidID(%q) = true", bad)
		}
	}
}

// FuzzLastEventID: a Last-Event-ID is client input; whatever it is, it
// parses to a log position that prints back as itself, or to nothing.
func FuzzLastEventID(f *testing.F) {
	for _, s := range []string{"1-2", "17-0_ab", "", "_", "-", "1-", "18446744073709551615-18446744073709551615", "call.ImEi"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, h string) {
		pos, ok := sessionstore.LastEventID(h)
		if !ok {
			if pos != "" {
				t.Fatalf("LastEventID(%q) = %q but not ok", h, pos)
			}
			return
		}
		again, ok2 := sessionstore.LastEventID(pos)
		if !ok2 || again != pos {
			t.Fatalf("LastEventID(%q) = %q, which parses to %q, %v", h, pos, again, ok2)
		}
		// Within its bound, and a position after which events can follow.
		ms, _, _ := strings.Cut(pos, "-")
		if len(h) > bounds.LastEventID || len(ms) > 15 || len(ms) == 15 && ms > "253402300799999" {
			t.Fatalf("LastEventID(%q) = %q: past the bound or the range", h, pos)
		}
	})
}

// TestRecordStaysBounded (issue 32, attack 3): whatever a caller sends,
// a record's fields stay within MaxRecord, a session keeps the newest
// MaxThreads thread digests, and a list refuses a value past its bound.
func TestRecordStaysBounded(t *testing.T) {
	stores(t, func(t *testing.T, open func(sessionstore.Options) sessionstore.Store) {
		ctx := context.Background()
		s := open(sessionstore.Options{TTL: time.Minute})
		r := record(strings.Repeat("u", bounds.User))
		r.Profile = strings.Repeat("p", bounds.Profile)
		if err := s.Create(ctx, r, sessionstore.Bounds{}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Update(ctx, r.ID, sessionstore.SetHolder(strings.Repeat("h", 32), true)); err != nil {
			t.Fatal(err)
		}
		digest := func(i int) string { return fmt.Sprintf("%064d", i) }
		for i := range 300 {
			if _, _, err := s.Add(ctx, r.ID, sessionstore.ListThreads, digest(i)); err != nil {
				t.Fatal(err)
			}
		}
		got, err := s.Get(ctx, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		if len(got.Threads) != sessionstore.MaxThreads || !slices.Contains(got.Threads, digest(299)) || slices.Contains(got.Threads, digest(0)) {
			t.Fatalf("after 300 threads the record keeps %d (newest kept: %v)", len(got.Threads), slices.Contains(got.Threads, digest(299)))
		}
		var be *bounds.Error
		if _, _, err := s.Add(ctx, r.ID, sessionstore.ListThreads, digest(1)+"x"); !errors.As(err, &be) {
			t.Fatalf("a 65-byte thread digest: %v, want a bound error", err)
		}
		if _, _, err := s.Add(ctx, r.ID, sessionstore.ListSubs, "file:///"+strings.Repeat("x", bounds.URI)); !errors.As(err, &be) {
			t.Fatalf("a URI past bounds.URI: %v, want a bound error", err)
		}
		for i := range sessionstore.MaxList + 10 {
			if _, _, err := s.Add(ctx, r.ID, sessionstore.ListPromoted, fmt.Sprintf("tool_%d", i)); err != nil {
				t.Fatal(err)
			}
		}
		if got, _ := s.Get(ctx, r.ID); len(got.Promoted) != sessionstore.MaxList {
			t.Fatalf("%d promotions kept, want %d", len(got.Promoted), sessionstore.MaxList)
		}
		big := record(strings.Repeat("u", bounds.User+1))
		if err := s.Create(ctx, big, sessionstore.Bounds{}); !errors.As(err, &be) || strings.Contains(err.Error(), big.User) {
			t.Fatalf("a user past bounds.User: %v, want a bound error that does not echo it", err)
		}
		big = record("alice")
		big.Init = json.RawMessage(`"` + strings.Repeat("i", sessionstore.MaxInit) + `"`)
		if err := s.Create(ctx, big, sessionstore.Bounds{}); !errors.As(err, &be) {
			t.Fatalf("initialize params past MaxInit: %v, want a bound error", err)
		}
	})
}

// TestRedisRecordSize: the record itself, at its largest, is within
// MaxRecord of Redis memory; its initialize params and lists are beside it.
func TestRedisRecordSize(t *testing.T) {
	rs := mcptest.StartRedis(t, false)
	ctx := context.Background()
	s := openRedis(t, rs, sessionstore.Options{TTL: time.Minute})
	r := record(strings.Repeat("u", bounds.User))
	r.Profile = strings.Repeat("p", bounds.Profile)
	r.Level = "emergency"
	r.Protocol = strings.Repeat("v", 64)
	if err := s.Create(ctx, r, sessionstore.Bounds{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Update(ctx, r.ID, sessionstore.SetHolder(strings.Repeat("h", 64), true)); err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		if _, _, err := s.Add(ctx, r.ID, sessionstore.ListThreads, fmt.Sprintf("%064d", i)); err != nil {
			t.Fatal(err)
		}
	}
	c := redis.NewClient(&redis.Options{Addr: rs.Addr})
	defer c.Close()
	n, err := c.MemoryUsage(ctx, sessionstore.SessionKey("test:", r.ID)+":r").Result()
	if err != nil || n > sessionstore.MaxRecord {
		t.Fatalf("the record uses %d bytes of Redis (%v), want at most %d", n, err, sessionstore.MaxRecord)
	}
	if got, _ := s.Get(ctx, r.ID); got.Rev != 101 {
		t.Fatalf("rev %d after a holder and 100 threads, want 101", got.Rev)
	}
}

// TestNoticesAreSmall (issue 32, attack 3): a change reaches the other
// replicas as a notice of the record's fields and what a list gained,
// never the record; past MaxNotice bytes of values, a notice says to read
// the record again.
func TestNoticesAreSmall(t *testing.T) {
	rs := mcptest.StartRedis(t, false)
	ctx := context.Background()
	changes := make(chan sessionstore.Change, 16)
	a := openRedis(t, rs, sessionstore.Options{Replica: "a", TTL: time.Minute})
	_ = openRedis(t, rs, sessionstore.Options{Replica: "b", TTL: time.Minute, OnChange: func(c sessionstore.Change) { changes <- c }})
	c := redis.NewClient(&redis.Options{Addr: rs.Addr})
	defer c.Close()
	bus := c.Subscribe(ctx, "test:s:bus")
	defer bus.Close()
	if _, err := bus.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	r := record("alice")
	r.Init = json.RawMessage(`{"protocolVersion":"2025-11-25","pad":"` + strings.Repeat("x", 8<<10) + `"}`)
	if err := a.Create(ctx, r, sessionstore.Bounds{}); err != nil {
		t.Fatal(err)
	}
	next := func() sessionstore.Change {
		t.Helper()
		select {
		case ch := <-changes:
			return ch
		case <-time.After(10 * time.Second):
			t.Fatal("no change notice")
		}
		return sessionstore.Change{}
	}
	largest := func(n int) int {
		t.Helper()
		most := 0
		for range n {
			m, err := bus.ReceiveMessage(ctx)
			if err != nil {
				t.Fatal(err)
			}
			most = max(most, len(m.Payload))
		}
		return most
	}
	if _, err := a.Update(ctx, r.ID, sessionstore.SetLevel("info")); err != nil {
		t.Fatal(err)
	}
	if ch := next(); ch.Record == nil || ch.Record.Level != "info" || ch.Rev != 1 {
		t.Fatalf("level change: %+v", ch)
	}
	if _, _, err := a.Add(ctx, r.ID, sessionstore.ListThreads, "d1"); err != nil {
		t.Fatal(err)
	}
	if ch := next(); ch.Record == nil || !slices.Equal(ch.Record.Threads, []string{"d1"}) || ch.Record.Level != "info" || ch.Rev != 2 {
		t.Fatalf("thread added: %+v", ch.Record)
	}
	var names []string
	for i := range 40 {
		names = append(names, fmt.Sprintf("server_tool_with_a_long_name_%03d", i))
	}
	if _, _, err := a.Add(ctx, r.ID, sessionstore.ListPromoted, names...); err != nil {
		t.Fatal(err)
	}
	if ch := next(); ch.Record != nil || ch.Rev != 3 {
		t.Fatalf("a promotion past MaxNotice: %+v, want a notice to read the record again", ch)
	}
	if _, _, err := a.Add(ctx, r.ID, sessionstore.ListSubs, "file:///"+strings.Repeat("s", 4<<10)); err != nil {
		t.Fatal(err)
	}
	if n := largest(3); n > sessionstore.MaxNotice+512 {
		t.Fatalf("a notice of %d bytes", n)
	}
	select {
	case ch := <-changes:
		t.Fatalf("a subscription was announced: %+v", ch)
	default:
	}
}

// TestAdmissionSetsLiveWithTheirSessions (issue 32, attack 6): sessions
// in use keep the admission sets alive, so the caps hold however long
// nobody opens a session.
func TestAdmissionSetsLiveWithTheirSessions(t *testing.T) {
	rs := mcptest.StartRedis(t, false)
	ctx := context.Background()
	const ttl = time.Second // records touched every ttl/8 (flushEvery) live on however busy the machine
	s := openRedis(t, rs, sessionstore.Options{TTL: ttl})
	b := sessionstore.Bounds{Limit: 10, Share: 2}
	var live []*sessionstore.Record
	for range 2 {
		r := record("alice")
		if err := s.Create(ctx, r, b); err != nil {
			t.Fatal(err)
		}
		live = append(live, r)
	}
	for end := time.Now().Add(3 * ttl); time.Now().Before(end); time.Sleep(ttl / 20) { // in use
		for _, r := range live {
			s.Touch(r.ID, r.User)
		}
	}
	for _, r := range live {
		if _, err := s.Get(ctx, r.ID); err != nil {
			t.Fatalf("a session in use: %v", err)
		}
	}
	var le *sessionstore.LimitError
	if err := s.Create(ctx, record("alice"), b); !errors.As(err, &le) || !le.Share {
		t.Fatalf("a third session of alice's after %s in use: %v, want the share refusal", 3*ttl, err)
	}
	if n, _ := s.Count(ctx); n != 2 {
		t.Fatalf("Count = %d, want 2", n)
	}
}

func TestRevisions(t *testing.T) {
	stores(t, func(t *testing.T, open func(sessionstore.Options) sessionstore.Store) {
		ctx := context.Background()
		s := open(sessionstore.Options{TTL: time.Minute})
		a, b := record("alice"), record("bob")
		for _, r := range []*sessionstore.Record{a, b} {
			if err := s.Create(ctx, r, sessionstore.Bounds{}); err != nil {
				t.Fatal(err)
			}
		}
		if _, _, err := s.Add(ctx, a.ID, sessionstore.ListThreads, "d"); err != nil {
			t.Fatal(err)
		}
		if err := s.Delete(ctx, b.ID); err != nil {
			t.Fatal(err)
		}
		revs, err := s.Revisions(ctx, []string{a.ID, b.ID, sessionstore.NewID()})
		if err != nil || len(revs) != 1 || revs[a.ID] != 1 {
			t.Fatalf("Revisions = %v, %v; want only %s at 1", revs, err, a.ID)
		}
	})
}

// TestSharedKeyKeptAcrossRedisRestart (issue 32): a replica that kept
// running puts its requestState key back when Redis restarted empty, or
// adopts the one a replica started since put there first: they agree.
func TestSharedKeyKeptAcrossRedisRestart(t *testing.T) {
	rs := mcptest.StartRedis(t, false)
	ctx := context.Background()
	c := redis.NewClient(&redis.Options{Addr: rs.Addr})
	defer c.Close()
	k1, err := sessionstore.SharedKey(ctx, c, "test:")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	current := k1
	_ = openRedis(t, rs, sessionstore.Options{TTL: time.Minute, SharedKey: k1, OnSharedKey: func(k string) {
		mu.Lock()
		current = k
		mu.Unlock()
	}})
	rs.Stop()
	rs.Start()
	var k2 string
	deadline := time.Now().Add(10 * time.Second)
	for k2, err = sessionstore.SharedKey(ctx, c, "test:"); err != nil; k2, err = sessionstore.SharedKey(ctx, c, "test:") {
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	for {
		mu.Lock()
		agreed := current == k2
		mu.Unlock()
		if agreed {
			break
		}
		if time.Now().After(deadline.Add(10 * time.Second)) {
			t.Fatalf("the running replica keeps its key; one started after Redis restarted empty has %s", map[bool]string{true: "the same", false: "another"}[k1 == k2])
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// FuzzRecordLists: whatever values a caller makes a session add to its
// lists, each list stays within its bound in count and bytes, or the
// value is refused with an error naming the bound, not the value.
func FuzzRecordLists(f *testing.F) {
	f.Add("t", "abc", 3)
	f.Add("p", strings.Repeat("n", 200), 300)
	f.Add("sub", "file:///x", 1)
	f.Add("q", "", 0)
	f.Fuzz(func(t *testing.T, list, value string, n int) {
		if n < 0 || n > 400 {
			return
		}
		ctx := context.Background()
		s := sessionstore.NewLocal(sessionstore.Options{})
		r := record("alice")
		if err := s.Create(ctx, r, sessionstore.Bounds{}); err != nil {
			t.Fatal(err)
		}
		l := sessionstore.List(list)
		for i := range n {
			_, _, err := s.Add(ctx, r.ID, l, fmt.Sprintf("%s%d", value, i))
			if err != nil {
				if len(value) > 8 && strings.Contains(err.Error(), value) {
					t.Fatalf("the error echoes the value: %v", err)
				}
				return
			}
		}
		got, _ := s.Get(ctx, r.ID)
		for _, c := range []struct {
			vals       []string
			count, max int
		}{{got.Threads, sessionstore.MaxThreads, 64}, {got.Promoted, sessionstore.MaxList, bounds.Name}, {got.Subs, sessionstore.MaxList, bounds.URI}} {
			if len(c.vals) > c.count {
				t.Fatalf("a list keeps %d values, past %d", len(c.vals), c.count)
			}
			for _, v := range c.vals {
				if len(v) > c.max {
					t.Fatalf("a list keeps a value of %d bytes, past %d", len(v), c.max)
				}
			}
		}
	})
}

// TestClusterReplicasAndAdmission (issue 34): on a Redis Cluster of three
// masters, two replicas share sessions through sharded pub/sub (a change
// notice, a log event, a message to one replica), every script runs
// single-slot (a CROSSSLOT or non-local key fails it), admission is exact
// over the groups (a cap of 20 admits exactly 20, then refuses), and the
// keys land on every master.
func TestClusterReplicasAndAdmission(t *testing.T) {
	c := mcptest.StartRedisCluster(t, 3)
	ctx := context.Background()
	changed := make(chan sessionstore.Change, 64)
	got := make(chan sessionstore.Message, 4)
	a := openCluster(t, c, sessionstore.Options{Replica: "a", TTL: time.Minute})
	b := openCluster(t, c, sessionstore.Options{Replica: "b", TTL: time.Minute,
		OnChange: func(ch sessionstore.Change) { changed <- ch }, OnMessage: func(m sessionstore.Message) { got <- m }})
	bounds := sessionstore.Bounds{Limit: 20, Share: 15}
	var ids []string
	for i := range 25 {
		r := record(fmt.Sprintf("user-%d", i%2))
		err := a.Create(ctx, r, bounds)
		var le *sessionstore.LimitError
		switch {
		case errors.As(err, &le):
			continue
		case err != nil:
			t.Fatalf("create %d: %v", i, err)
		}
		ids = append(ids, r.ID)
	}
	if len(ids) != 20 {
		t.Fatalf("a cap of 20 over 16 groups admitted %d of 25", len(ids))
	}
	if n, err := b.Count(ctx); err != nil || n != 20 {
		t.Fatalf("Count = %d, %v; want 20", n, err)
	}
	for _, id := range ids {
		if _, err := b.Get(ctx, id); err != nil {
			t.Fatalf("b.Get(%s): %v", id, err)
		}
	}
	id := ids[0]
	f, err := b.Follow(ctx, id, "")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := a.Append(ctx, id, json.RawMessage(`{"method":"x"}`)); err != nil {
		t.Fatal(err)
	}
	if ev := recv(t, f); string(ev.Data) != `{"method":"x"}` { // via the sharded bus
		t.Fatalf("event %s", ev.Data)
	}
	if _, err := a.Update(ctx, id, sessionstore.SetHolder("a", true)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := a.Add(ctx, id, sessionstore.ListPromoted, "web_search"); err != nil {
		t.Fatal(err)
	}
	for want := 2; want > 0; {
		select {
		case ch := <-changed:
			if ch.ID == id {
				want--
			}
		case <-time.After(5 * time.Second):
			t.Fatal("b never got a's change notices (sharded bus)")
		}
	}
	if err := a.Send(ctx, "b", sessionstore.Message{Session: id}); err != nil {
		t.Fatal(err)
	}
	select {
	case m := <-got:
		if m.Session != id {
			t.Fatalf("message for %q", m.Session)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("b never got a's message (sharded replica channel)")
	}
	if _, err := a.Remove(ctx, id, sessionstore.ListPromoted, "web_search"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Revisions(ctx, ids); err != nil {
		t.Fatal(err)
	}
	a.Touch(id, "user-0")
	if err := a.Delete(ctx, id); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Get(ctx, id); !errors.Is(err, sessionstore.ErrNotFound) {
		t.Fatalf("after Delete: %v", err)
	}
	for i, n := range c.Keys() {
		if n == 0 {
			t.Fatalf("master %d holds no key: %v", i, c.Keys())
		}
	}
}
