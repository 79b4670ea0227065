package taskpoll

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/mcp-mux/mcp-mux/internal/mcptest"
	"github.com/mcp-mux/mcp-mux/internal/secret"
	"github.com/mcp-mux/mcp-mux/internal/storeclient"
)

// replicas opens a store twice, as two mux replicas would see it: for Redis
// two clients on one server, for bbolt one store (it serves one process).
type replicas func(t *testing.T) (a, b Store)

func redisReplicas(t *testing.T) (Store, Store) {
	r := mcptest.StartRedis(t, false)
	return newRedisFor(t, r.URL(), "suite:"), newRedisFor(t, r.URL(), "suite:")
}

func newRedisFor(t testing.TB, url, prefix string) *RedisStore {
	c, err := storeclient.Dial(url)
	if err != nil {
		t.Fatal(err)
	}
	s := NewRedisStore(RedisOptions{Client: c, KeyPrefix: prefix})
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func boltReplicas(t *testing.T) (Store, Store) {
	s, err := OpenBoltStore(BoltOptions{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s, s
}

// clusterReplicas are two stores on a Redis Cluster of three masters,
// each on its own shared client (sharded pub/sub), as two replicas serve.
func clusterReplicas(t *testing.T) (Store, Store) {
	c := mcptest.StartRedisCluster(t, 3)
	return openShared(t, storeclient.Cluster, c.URL(), 0), openShared(t, storeclient.Cluster, c.URL(), 0)
}

// sentinelReplicas are two stores on a primary with a replica behind three
// sentinels, each creation waiting for the replica (WAIT 1).
func sentinelReplicas(t *testing.T) (Store, Store) {
	s := mcptest.StartRedisSentinel(t)
	return openShared(t, storeclient.Sentinel, s.URL(), 1), openShared(t, storeclient.Sentinel, s.URL(), 1)
}

func openShared(t *testing.T, mode, url string, wait int) *RedisStore {
	rc, err := storeclient.Open(storeclient.Options{Mode: mode, URL: secret.Value(url)})
	if err != nil {
		t.Fatal(err)
	}
	s := NewRedisStore(RedisOptions{Client: rc, KeyPrefix: "suite:", WaitReplicas: wait})
	t.Cleanup(func() {
		_ = s.Close()
		_ = rc.Close()
	})
	return s
}

func TestRedisStore(t *testing.T)         { storeSuite(t, redisReplicas) }
func TestRedisClusterStore(t *testing.T)  { storeSuite(t, clusterReplicas) }
func TestRedisSentinelStore(t *testing.T) { storeSuite(t, sentinelReplicas) }
func TestBoltStore(t *testing.T)          { storeSuite(t, boltReplicas) }

var t0 = time.UnixMilli(1_800_000_000_000)

func newTask(user, thread string, created time.Time) *Task {
	return &Task{ID: NewID(), User: user, Thread: thread, Server: "jobs", Name: "report", StatusTool: "st", CancelTool: "ca",
		Status: StatusSubmitted, CreatedAt: created, UpdatedAt: created, NextPollAt: created}
}

func storeSuite(t *testing.T, open replicas) {
	ctx := context.Background()
	t.Run("round trip keeps every field", func(t *testing.T) {
		s, _ := open(t)
		tk := newTask("alice", "th", t0)
		tk.RemoteID, tk.StatusMessage, tk.TTL, tk.PollInterval = "r-1", "queued", time.Hour, 7*time.Second
		tk.Result, tk.ResultArtifact, tk.InputRequired = json.RawMessage(`{"a":[1,2]}`), json.RawMessage(`{"uri":"x"}`), json.RawMessage(`{"q":"?"}`)
		tk.LastPollError, tk.Version = "boom", 2
		if err := s.Create(ctx, tk); err != nil {
			t.Fatal(err)
		}
		got, err := s.Get(ctx, tk.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !got.CreatedAt.Equal(tk.CreatedAt) || !got.NextPollAt.Equal(tk.NextPollAt) {
			t.Fatalf("times: %v %v", got.CreatedAt, got.NextPollAt)
		}
		got.CreatedAt, got.UpdatedAt, got.NextPollAt = tk.CreatedAt, tk.UpdatedAt, tk.NextPollAt
		if !reflect.DeepEqual(got, tk) {
			t.Fatalf("got %+v\nwant %+v", got, tk)
		}
		if err := s.Create(ctx, tk); !errors.Is(err, ErrExists) {
			t.Fatalf("second create: %v", err)
		}
		if _, err := s.Get(ctx, NewID()); !errors.Is(err, ErrNotFound) {
			t.Fatalf("get missing: %v", err)
		}
		if _, err := s.Get(ctx, "../../etc"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("get hostile id: %v", err)
		}
	})

	t.Run("remote handle is unique per user and server", func(t *testing.T) {
		s, _ := open(t)
		a := newTask("alice", "th", t0)
		a.RemoteID = "r-1"
		if err := s.Create(ctx, a); err != nil {
			t.Fatal(err)
		}
		b := newTask("alice", "other", t0)
		b.RemoteID = "r-1"
		var dup *DuplicateRemoteError
		if err := s.Create(ctx, b); !errors.As(err, &dup) {
			t.Fatalf("duplicate create: %v", err)
		}
		if want := "Remote MCP task 'r-1' is already tracked for server 'jobs' by this user"; dup.Error() != want {
			t.Fatalf("message %q", dup.Error())
		}
		c := newTask("bob", "th", t0) // another user may have the same handle
		c.RemoteID = "r-1"
		if err := s.Create(ctx, c); err != nil {
			t.Fatal(err)
		}
		d := newTask("alice", "th", t0)
		d.Status = StatusPending
		if err := s.Create(ctx, d); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Update(ctx, d.ID, func(t *Task) error { t.RemoteID = "r-1"; return nil }); !errors.As(err, &dup) {
			t.Fatalf("duplicate bind: %v", err)
		}
		if _, err := s.Update(ctx, d.ID, func(t *Task) error { t.RemoteID = "r-2"; return nil }); err != nil {
			t.Fatal(err)
		}
		long := newTask("alice", "th", t0)
		long.RemoteID = string(make([]byte, 256))
		if err := s.Create(ctx, long); err == nil || err.Error() != "MCP task remote_task_id must not exceed 255 characters" {
			t.Fatalf("long remote id: %v", err)
		}
	})

	t.Run("update writes atomically and never touches a terminal task", func(t *testing.T) {
		s, _ := open(t)
		tk := newTask("alice", "th", t0)
		if err := s.Create(ctx, tk); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for range 20 {
			wg.Go(func() {
				if _, err := s.Update(ctx, tk.ID, func(t *Task) error { t.PollAttempts++; return nil }); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		got, _ := s.Get(ctx, tk.ID)
		if got.PollAttempts != 20 {
			t.Fatalf("lost updates: %d", got.PollAttempts)
		}
		boom := errors.New("boom")
		if _, err := s.Update(ctx, tk.ID, func(t *Task) error { t.Error = "x"; return boom }); !errors.Is(err, boom) {
			t.Fatal(err)
		}
		if got, _ := s.Get(ctx, tk.ID); got.Error != "" {
			t.Fatal("a failed update wrote")
		}
		if _, err := s.Update(ctx, tk.ID, func(t *Task) error { t.Status = StatusCompleted; return nil }); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Update(ctx, tk.ID, func(t *Task) error { t.Status = StatusWorking; return nil }); !errors.Is(err, ErrTerminal) {
			t.Fatalf("terminal update: %v", err)
		}
	})

	t.Run("claim leases due tasks once and reclaims expired leases", func(t *testing.T) {
		s, s2 := open(t)
		due := newTask("alice", "th", t0)
		later := newTask("alice", "th", t0)
		later.NextPollAt = t0.Add(time.Hour)
		done := newTask("alice", "th", t0)
		done.Status = StatusCompleted
		for _, tk := range []*Task{due, later, done} {
			if err := s.Create(ctx, tk); err != nil {
				t.Fatal(err)
			}
		}
		ls, err := s.Claim(ctx, "a", t0, time.Minute, 10)
		if err != nil || len(ls) != 1 || ls[0].Task.ID != due.ID || ls[0].Takeover {
			t.Fatalf("claim: %v %+v", err, ls)
		}
		if ls2, _ := s2.Claim(ctx, "b", t0.Add(30*time.Second), time.Minute, 10); len(ls2) != 0 {
			t.Fatalf("a live lease was claimed again: %+v", ls2)
		}
		ls2, err := s2.Claim(ctx, "b", t0.Add(61*time.Second), time.Minute, 10)
		if err != nil || len(ls2) != 1 || ls2[0].Task.ID != due.ID || !ls2[0].Takeover || ls2[0].Epoch <= ls[0].Epoch {
			t.Fatalf("expired lease not taken over: %v %+v", err, ls2)
		}
		// The first owner's result is discarded: its lease was superseded.
		res := ls[0].Task.Clone()
		res.Status = StatusCompleted
		if ok, err := s.Apply(ctx, ls[0], res, t0.Add(62*time.Second)); err != nil || ok {
			t.Fatalf("stale apply: %v %v", ok, err)
		}
		// The second owner's result lands once.
		res2 := ls2[0].Task.Clone()
		res2.Status, res2.NextPollAt = StatusWorking, t0.Add(2*time.Minute)
		if ok, err := s2.Apply(ctx, ls2[0], res2, t0.Add(62*time.Second)); err != nil || !ok {
			t.Fatalf("apply: %v %v", ok, err)
		}
		if ok, _ := s2.Apply(ctx, ls2[0], res2, t0.Add(63*time.Second)); ok {
			t.Fatal("a lease applied twice")
		}
		if ls, _ := s.Claim(ctx, "a", t0.Add(100*time.Second), time.Minute, 10); len(ls) != 0 {
			t.Fatalf("claimed before its next poll: %+v", ls)
		}
		ls3, _ := s.Claim(ctx, "a", t0.Add(2*time.Minute), time.Minute, 10)
		if len(ls3) != 1 || ls3[0].Takeover || ls3[0].Task.Status != StatusWorking {
			t.Fatalf("rescheduled claim: %+v", ls3)
		}
		// An apply after the lease expired is discarded.
		if ok, _ := s.Apply(ctx, ls3[0], res2, t0.Add(4*time.Minute)); ok {
			t.Fatal("expired lease applied")
		}
		// The same owner reclaiming it fences its own older poll out.
		ls4, _ := s.Claim(ctx, "a", t0.Add(4*time.Minute), time.Minute, 10)
		if len(ls4) != 1 || ls4[0].Epoch <= ls3[0].Epoch {
			t.Fatalf("reclaim: %+v", ls4)
		}
		if ok, _ := s.Apply(ctx, ls3[0], res2, t0.Add(4*time.Minute)); ok {
			t.Fatal("an older epoch of the same owner applied")
		}
	})

	t.Run("claim honours n and concurrent claimers never share a task", func(t *testing.T) {
		s, s2 := open(t)
		const n = 60
		for i := range n {
			if err := s.Create(ctx, newTask("alice", "th", t0.Add(time.Duration(i)*time.Millisecond))); err != nil {
				t.Fatal(err)
			}
		}
		if ls, _ := s.Claim(ctx, "x", t0, time.Minute, 0); len(ls) != 0 {
			t.Fatal("n=0 claimed")
		}
		var mu sync.Mutex
		seen := map[string]string{}
		var wg sync.WaitGroup
		for i, st := range []Store{s, s2, s, s2} {
			wg.Go(func() {
				owner := fmt.Sprint("o", i)
				for {
					ls, err := st.Claim(ctx, owner, t0.Add(time.Second), time.Minute, 7)
					if err != nil {
						t.Error(err)
						return
					}
					if len(ls) > 7 {
						t.Errorf("claimed %d > 7", len(ls))
					}
					if len(ls) == 0 {
						return
					}
					mu.Lock()
					for _, l := range ls {
						if prev, dup := seen[l.Task.ID]; dup {
							t.Errorf("%s claimed by %s and %s", l.Task.ID, prev, owner)
						}
						seen[l.Task.ID] = owner
					}
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		if len(seen) != n {
			t.Fatalf("claimed %d of %d", len(seen), n)
		}
	})

	t.Run("update supersedes a lease", func(t *testing.T) {
		s, _ := open(t)
		tk := newTask("alice", "th", t0)
		_ = s.Create(ctx, tk)
		ls, _ := s.Claim(ctx, "a", t0, time.Minute, 1)
		if len(ls) != 1 {
			t.Fatal("not claimed")
		}
		if _, err := s.Update(ctx, tk.ID, func(t *Task) error { t.CancelRequestedAt, t.NextPollAt = t0, t0; return nil }); err != nil {
			t.Fatal(err)
		}
		res := ls[0].Task.Clone()
		res.Status = StatusCompleted
		if ok, _ := s.Apply(ctx, ls[0], res, t0.Add(time.Second)); ok {
			t.Fatal("a poll result overwrote a cancel request")
		}
		ls, _ = s.Claim(ctx, "b", t0.Add(time.Second), time.Minute, 1)
		if len(ls) != 1 || !ls[0].Task.CancelRequested() || ls[0].Takeover {
			t.Fatalf("cancel work not claimable: %+v", ls)
		}
	})

	t.Run("release makes a task due at once for another owner", func(t *testing.T) {
		s, s2 := open(t)
		tk := newTask("alice", "th", t0)
		_ = s.Create(ctx, tk)
		ls, _ := s.Claim(ctx, "a", t0, time.Hour, 1)
		if err := s.Release(ctx, ls, t0.Add(time.Second)); err != nil {
			t.Fatal(err)
		}
		ls2, _ := s2.Claim(ctx, "b", t0.Add(time.Second), time.Hour, 1)
		if len(ls2) != 1 || ls2[0].Takeover {
			t.Fatalf("released task: %+v", ls2)
		}
		// Releasing a lease that is no longer held changes nothing.
		if err := s.Release(ctx, ls, t0.Add(2*time.Second)); err != nil {
			t.Fatal(err)
		}
		if ls3, _ := s.Claim(ctx, "a", t0.Add(2*time.Second), time.Hour, 1); len(ls3) != 0 {
			t.Fatal("a stale release freed the new owner's lease")
		}
		res := ls2[0].Task.Clone()
		res.Status = StatusCompleted
		if ok, _ := s2.Apply(ctx, ls2[0], res, t0.Add(3*time.Second)); !ok {
			t.Fatal("apply after a stale release failed")
		}
	})

	t.Run("list is per user and thread, newest first", func(t *testing.T) {
		s, _ := open(t)
		var alice []*Task
		for i := range 30 {
			tk := newTask("alice", fmt.Sprint("th", i%2), t0.Add(time.Duration(i)*time.Second))
			if i%3 == 0 {
				tk.Status = StatusCompleted
			}
			alice = append(alice, tk)
			_ = s.Create(ctx, tk)
		}
		_ = s.Create(ctx, newTask("bob", "th0", t0))
		all, err := s.List(ctx, Query{User: "alice"})
		if err != nil || len(all) != 30 {
			t.Fatalf("list: %v %d", err, len(all))
		}
		for i, tk := range all {
			if tk.ID != alice[29-i].ID {
				t.Fatalf("order at %d", i)
			}
		}
		th, _ := s.List(ctx, Query{User: "alice", Thread: "th1", Limit: 5})
		if len(th) != 5 || th[0].ID != alice[29].ID || th[4].ID != alice[21].ID {
			t.Fatalf("thread list: %d", len(th))
		}
		act, _ := s.List(ctx, Query{User: "alice", Thread: "th0", ActiveOnly: true})
		for _, tk := range act {
			if tk.Status.Terminal() || tk.Thread != "th0" {
				t.Fatalf("active list has %+v", tk)
			}
		}
		if len(act) != 10 {
			t.Fatalf("active list: %d", len(act))
		}
		if b, _ := s.List(ctx, Query{User: "bob", Thread: "th1"}); len(b) != 0 {
			t.Fatal("bob sees another thread")
		}
		if b, _ := s.List(ctx, Query{User: "carol"}); len(b) != 0 {
			t.Fatal("carol sees tasks")
		}
	})

	t.Run("counts by status", func(t *testing.T) {
		s, _ := open(t)
		a, b := newTask("u", "t", t0), newTask("u", "t", t0)
		_ = s.Create(ctx, a)
		_ = s.Create(ctx, b)
		_, _ = s.Update(ctx, b.ID, func(t *Task) error { t.Status = StatusFailed; return nil })
		c, err := s.Counts(ctx)
		if err != nil || !reflect.DeepEqual(c, map[Status]int{StatusSubmitted: 1, StatusFailed: 1}) {
			t.Fatalf("counts %v %v", c, err)
		}
	})

	t.Run("events reach every replica once per version", func(t *testing.T) {
		s, s2 := open(t)
		var mu sync.Mutex
		got := map[string][]Event{}
		for i, st := range []Store{s, s2} {
			unsub := st.Subscribe(func(e Event) {
				mu.Lock()
				got[fmt.Sprint(i)] = append(got[fmt.Sprint(i)], e)
				mu.Unlock()
			})
			t.Cleanup(unsub)
		}
		tk := newTask("alice", "th", t0)
		_ = s.Create(ctx, tk)
		_, _ = s.Update(ctx, tk.ID, func(t *Task) error { t.PollAttempts = 1; return nil }) // no new version: no event
		ls, _ := s.Claim(ctx, "a", t0, time.Minute, 1)
		res := ls[0].Task.Clone()
		res.Status, res.Version = StatusCompleted, 1
		if ok, _ := s2.Apply(ctx, ls[0], res, t0); !ok {
			t.Fatal("not applied")
		}
		waitFor(t, func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(got["0"]) >= 1 && len(got["1"]) >= 1
		})
		mu.Lock()
		defer mu.Unlock()
		for k, evs := range got {
			if len(evs) != 1 || evs[0].TaskID != tk.ID || evs[0].Status != StatusCompleted || evs[0].User != "alice" || evs[0].Thread != "th" || evs[0].Version != 1 {
				t.Fatalf("replica %s events %+v", k, evs)
			}
		}
	})
}

// waitFor polls cond until it holds (10 s at most).
func waitFor(t testing.TB, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
