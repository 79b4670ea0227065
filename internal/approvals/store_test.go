package approvals

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/mcp-mux/mcp-mux/internal/mcptest"
	"github.com/mcp-mux/mcp-mux/internal/secret"
	"github.com/mcp-mux/mcp-mux/internal/storeclient"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// forStores runs fn on a bbolt file, a Redis server and a Redis Cluster.
func forStores(t *testing.T, fn func(t *testing.T, s Store)) {
	t.Run("bolt", func(t *testing.T) {
		s, err := OpenBoltStore(BoltOptions{Dir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		fn(t, s)
	})
	t.Run("redis", func(t *testing.T) {
		rs := mcptest.StartRedis(t, false)
		c := storeclient.Wrap(redis.NewClient(&redis.Options{Addr: rs.Addr}))
		t.Cleanup(func() { _ = c.Close() })
		fn(t, NewRedisStore(RedisOptions{Client: c, KeyPrefix: "t:"}))
	})
	t.Run("cluster", func(t *testing.T) {
		cl := mcptest.StartRedisCluster(t, 3)
		c, err := storeclient.Open(storeclient.Options{Mode: storeclient.Cluster, URL: secret.Value(cl.URL())})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		fn(t, NewRedisStore(RedisOptions{Client: c, KeyPrefix: "t:"}))
	})
}

// clock is a settable time.
type clock struct{ ns atomic.Int64 }

func newClock() *clock {
	c := &clock{}
	c.ns.Store(time.Now().UnixNano())
	return c
}
func (c *clock) now() time.Time      { return time.Unix(0, c.ns.Load()) }
func (c *clock) add(d time.Duration) { c.ns.Add(int64(d)) }
func req(user, args string) Request {
	return Request{User: user, Server: "files", Tool: "files_delete", Method: "tools/call", Rule: "deletes",
		Args: json.RawMessage(args), Preview: args, Expires: time.Minute}
}

func TestAskDecideTake(t *testing.T) {
	forStores(t, func(t *testing.T, s Store) {
		ctx := context.Background()
		clk := newClock()
		m := New(Options{Store: s, Now: clk.now})
		rec, fresh, err := m.Ask(ctx, req("alice", `{"path": "/a", "force": true}`))
		if err != nil || !fresh || rec.State != Pending || !ValidID(rec.ID) {
			t.Fatalf("Ask = %+v, %v, %v", rec, fresh, err)
		}
		// The identical call (keys in another order) finds the same request.
		again, fresh, err := m.Ask(ctx, req("alice", `{"force":true,"path":"/a"}`))
		if err != nil || fresh || again.ID != rec.ID {
			t.Fatalf("identical Ask = %+v, %v, %v; want %s again", again, fresh, err, rec.ID)
		}
		// Other arguments, another caller: other requests.
		for _, q := range []Request{req("alice", `{"path":"/b","force":true}`), req("bob", `{"path":"/a","force":true}`)} {
			if other, _, err := m.Ask(ctx, q); err != nil || other.ID == rec.ID {
				t.Fatalf("Ask(%s %s) = %+v, %v: must be a request of its own", q.User, q.Args, other, err)
			}
		}
		if ok, err := m.Take(ctx, rec.ID); ok || err != nil {
			t.Fatalf("Take of a pending request = %v, %v", ok, err)
		}
		got, err := m.Decide(ctx, rec.ID, Approve, "ops", "looks fine")
		if err != nil || got.State != Approved || got.By != "ops" || got.Reason != "looks fine" {
			t.Fatalf("Decide = %+v, %v", got, err)
		}
		if _, err := m.Decide(ctx, rec.ID, Deny, "ops", ""); !errors.Is(err, ErrDecided) {
			t.Fatalf("second Decide: %v, want ErrDecided", err)
		}
		// Racing takes: exactly one.
		var won atomic.Int32
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				if ok, err := m.Take(ctx, rec.ID); err != nil {
					t.Error(err)
				} else if ok {
					won.Add(1)
				}
			})
		}
		wg.Wait()
		if won.Load() != 1 {
			t.Fatalf("%d racing takes won, want exactly 1", won.Load())
		}
		// Used: the identical call asks anew.
		next, fresh, err := m.Ask(ctx, req("alice", `{"path":"/a","force":true}`))
		if err != nil || !fresh || next.ID == rec.ID {
			t.Fatalf("Ask after use = %+v, %v, %v; want a new request", next, fresh, err)
		}
	})
}

func TestExpiryAndForgery(t *testing.T) {
	forStores(t, func(t *testing.T, s Store) {
		ctx := context.Background()
		clk := newClock()
		m := New(Options{Store: s, Now: clk.now})
		rec, _, err := m.Ask(ctx, req("alice", `{}`))
		if err != nil {
			t.Fatal(err)
		}
		approved, _, _ := m.Ask(ctx, req("alice", `{"n":1}`))
		if _, err := m.Decide(ctx, approved.ID, Approve, "ops", ""); err != nil {
			t.Fatal(err)
		}
		clk.add(2 * time.Minute)
		if _, err := m.Decide(ctx, rec.ID, Approve, "ops", ""); !errors.Is(err, ErrExpired) {
			t.Fatalf("Decide after expiry: %v, want ErrExpired", err)
		}
		if ok, _ := m.Take(ctx, approved.ID); ok {
			t.Fatal("an expired approval was taken")
		}
		if recs, n, err := m.Pending(ctx, 10); err != nil || n != 0 || len(recs) != 0 {
			t.Fatalf("Pending after expiry = %v, %d, %v", recs, n, err)
		}
		// An expired request is not found again: the call asks anew.
		if next, fresh, err := m.Ask(ctx, req("alice", `{}`)); err != nil || !fresh || next.ID == rec.ID {
			t.Fatalf("Ask after expiry = %+v, %v, %v", next, fresh, err)
		}
		for _, id := range []string{"appr-00000000000000000000000000000000", rec.ID + "0", "../../etc", "", "appr-" + "zz"} {
			if _, err := m.Decide(ctx, id, Approve, "ops", ""); !errors.Is(err, ErrNotFound) {
				t.Errorf("Decide(%q): %v, want ErrNotFound", id, err)
			}
		}
		if _, err := m.Decide(ctx, rec.ID, "maybe", "ops", ""); err == nil {
			t.Error("a decision that is not approve or deny was accepted")
		}
	})
}

func TestPendingBounds(t *testing.T) {
	forStores(t, func(t *testing.T, s Store) {
		ctx := context.Background()
		m := New(Options{Store: s, MaxPerCaller: 3, MaxPending: 5})
		for i := range 3 {
			if _, _, err := m.Ask(ctx, req("mallory", `{"i":`+string(rune('0'+i))+`}`)); err != nil {
				t.Fatal(err)
			}
		}
		if _, _, err := m.Ask(ctx, req("mallory", `{"i":9}`)); !errors.Is(err, ErrTooManyUser) {
			t.Fatalf("4th pending of one caller: %v, want ErrTooManyUser", err)
		}
		// The flood leaves room for others, up to the fleet's bound.
		for _, u := range []string{"alice", "bob"} {
			if _, _, err := m.Ask(ctx, req(u, `{}`)); err != nil {
				t.Fatalf("%s: %v", u, err)
			}
		}
		if _, _, err := m.Ask(ctx, req("carol", `{}`)); !errors.Is(err, ErrTooMany) {
			t.Fatalf("6th pending in all: %v, want ErrTooMany", err)
		}
		recs, n, err := m.Pending(ctx, 2)
		if err != nil || n != 5 || len(recs) != 2 {
			t.Fatalf("Pending(2) = %d records, total %d, %v; want 2 of 5", len(recs), n, err)
		}
		// A decided request no longer counts.
		if _, err := m.Decide(ctx, recs[0].ID, Deny, "ops", ""); err != nil {
			t.Fatal(err)
		}
		if _, _, err := m.Ask(ctx, req("carol", `{}`)); err != nil {
			t.Fatalf("after a decision: %v", err)
		}
	})
}

func TestWait(t *testing.T) {
	forStores(t, func(t *testing.T, s Store) {
		ctx := context.Background()
		m := New(Options{Store: s, Poll: 10 * time.Millisecond})
		rec, _, err := m.Ask(ctx, req("alice", `{}`))
		if err != nil {
			t.Fatal(err)
		}
		short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		got, err := m.Wait(short, rec.ID)
		cancel()
		if err != nil || got.State != Pending {
			t.Fatalf("Wait that timed out = %+v, %v; want the pending record", got, err)
		}
		go func() {
			time.Sleep(30 * time.Millisecond)
			_, _ = m.Decide(ctx, rec.ID, Deny, "ops", "no")
		}()
		got, err = m.Wait(ctx, rec.ID)
		if err != nil || got.State != Denied || got.Reason != "no" {
			t.Fatalf("Wait = %+v, %v; want denied", got, err)
		}
	})
}
