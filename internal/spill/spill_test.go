package spill

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mcp-mux/mcp-mux/internal/mcptest"
	"github.com/mcp-mux/mcp-mux/internal/secret"
	"github.com/mcp-mux/mcp-mux/internal/storeclient"
)

// forStores runs fn on a Local store and on a Redis one; sleep lets a
// result's TTL pass (a clock step in process, real time on Redis).
func forStores(t *testing.T, fn func(t *testing.T, s Store, sleep func(time.Duration))) {
	t.Run("local", func(t *testing.T) {
		now := time.Unix(1000, 0)
		fn(t, NewLocal(func() time.Time { return now }), func(d time.Duration) { now = now.Add(d) })
	})
	t.Run("redis", func(t *testing.T) {
		rs := mcptest.StartRedis(t, false)
		rc := redis.NewClient(&redis.Options{Addr: rs.Addr})
		t.Cleanup(func() { _ = rc.Close() })
		fn(t, NewRedis(RedisOptions{Client: storeclient.Wrap(rc), KeyPrefix: "t:"}), time.Sleep)
	})
	t.Run("cluster", func(t *testing.T) { // the put script's keys share one slot
		cl := mcptest.StartRedisCluster(t, 3)
		c, err := storeclient.Open(storeclient.Options{Mode: storeclient.Cluster, URL: secret.Value(cl.URL())})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		fn(t, NewRedis(RedisOptions{Client: c, KeyPrefix: "t:"}), time.Sleep)
	})
}

// A result is its caller's only, until its TTL; too large is refused.
func TestStore(t *testing.T) {
	forStores(t, func(t *testing.T, s Store, sleep func(time.Duration)) {
		ctx := context.Background()
		id := NewID()
		if len(id) != 32 || id == NewID() {
			t.Fatalf("id %q", id)
		}
		if err := s.Put(ctx, "alice", id, []byte(`{"a":1}`), 1500*time.Millisecond); err != nil {
			t.Fatal(err)
		}
		if got, err := s.Get(ctx, "alice", id); err != nil || string(got) != `{"a":1}` {
			t.Errorf("alice reads %s, %v", got, err)
		}
		for user, id := range map[string]string{"bob": id, "alice": NewID()} {
			if _, err := s.Get(ctx, user, id); !errors.Is(err, ErrNotFound) {
				t.Errorf("%s reads %s: %v, want ErrNotFound", user, id, err)
			}
		}
		if err := s.Put(ctx, "alice", NewID(), make([]byte, MaxResult+1), time.Minute); !errors.Is(err, ErrTooLarge) {
			t.Errorf("a result over MaxResult: %v", err)
		}
		sleep(2 * time.Second)
		if _, err := s.Get(ctx, "alice", id); !errors.Is(err, ErrNotFound) {
			t.Errorf("after its TTL: %v, want ErrNotFound", err)
		}
	})
}

// Past MaxPerCaller results or MaxCallerBytes a caller's oldest go; other
// callers keep theirs.
func TestStoreCaps(t *testing.T) {
	forStores(t, func(t *testing.T, s Store, _ func(time.Duration)) {
		ctx := context.Background()
		ids := make([]string, MaxPerCaller+3)
		for i := range ids {
			ids[i] = NewID()
			if err := s.Put(ctx, "alice", ids[i], []byte(fmt.Sprint(i)), time.Hour+time.Duration(i)*time.Millisecond); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Put(ctx, "bob", "b1", []byte("bob's"), time.Hour); err != nil {
			t.Fatal(err)
		}
		kept := 0
		for i, id := range ids {
			_, err := s.Get(ctx, "alice", id)
			if err == nil {
				kept++
			}
			if i < 3 && err == nil {
				t.Errorf("alice's result %d of %d kept past the cap", i, len(ids))
			}
		}
		if kept != MaxPerCaller {
			t.Errorf("alice keeps %d results, want %d", kept, MaxPerCaller)
		}
		if b, err := s.Get(ctx, "bob", "b1"); err != nil || string(b) != "bob's" {
			t.Errorf("bob's result: %s, %v", b, err)
		}
		big := bytes.Repeat([]byte("x"), MaxResult)
		for i := 0; i < MaxCallerBytes/MaxResult+1; i++ {
			if err := s.Put(ctx, "carol", fmt.Sprint("c", i), big, time.Hour+time.Duration(i)*time.Millisecond); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := s.Get(ctx, "carol", "c0"); !errors.Is(err, ErrNotFound) {
			t.Errorf("carol's oldest result kept past %d bytes: %v", MaxCallerBytes, err)
		}
		if _, err := s.Get(ctx, "carol", fmt.Sprint("c", MaxCallerBytes/MaxResult)); err != nil {
			t.Errorf("carol's newest result: %v", err)
		}
	})
}
