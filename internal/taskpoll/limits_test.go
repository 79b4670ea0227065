package taskpoll

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcp-mux/mcp-mux/internal/mcptest"
	"github.com/mcp-mux/mcp-mux/internal/storeclient"
)

// Issue 17, attack 10: one caller submitted 5,000 durable tasks, and every
// record was kept (and the active ones polled) forever. A store caps each
// user's active tasks atomically, on every replica, and removes terminal
// records once their retention ended.

// limitedStores opens a store with a per-user cap twice, as two replicas.
type limitedStores func(t *testing.T, maxActive int) (a, b Store)

func limitedRedis(t *testing.T, maxActive int) (Store, Store) {
	r := mcptest.StartRedis(t, false)
	open := func() Store {
		c, err := storeclient.Dial(r.URL())
		if err != nil {
			t.Fatal(err)
		}
		s := NewRedisStore(RedisOptions{Client: c, KeyPrefix: "cap:", MaxActivePerUser: maxActive})
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	return open(), open()
}

func limitedBolt(t *testing.T, maxActive int) (Store, Store) {
	s, err := OpenBoltStore(BoltOptions{Dir: t.TempDir(), MaxActivePerUser: maxActive})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s, s
}

func TestRedisStoreLimits(t *testing.T) { limitsSuite(t, limitedRedis) }
func TestBoltStoreLimits(t *testing.T)  { limitsSuite(t, limitedBolt) }

func limitsSuite(t *testing.T, open limitedStores) {
	ctx := context.Background()
	t.Run("cap per user", func(t *testing.T) {
		a, b := open(t, 3)
		var alice []*Task
		for i := range 3 {
			tk := newTask("alice", "th", t0.Add(time.Duration(i)*time.Millisecond))
			if err := []Store{a, b}[i%2].Create(ctx, tk); err != nil {
				t.Fatal(err)
			}
			alice = append(alice, tk)
		}
		err := b.Create(ctx, newTask("alice", "other-thread", t0))
		var le *ActiveLimitError
		if !errors.As(err, &le) || le.Limit != 3 || !strings.Contains(err.Error(), "mcp_tasks.max_active_tasks_per_user") || !strings.Contains(err.Error(), "3") {
			t.Fatalf("4th active task of alice: %v", err)
		}
		if err := a.Create(ctx, newTask("bob", "th", t0)); err != nil {
			t.Fatalf("bob is not limited by alice's tasks: %v", err)
		}
		// A terminal record does not count (nor does creating one).
		done := newTask("alice", "th", t0)
		done.Status, done.CompletedAt = StatusCompleted, t0
		if err := a.Create(ctx, done); err != nil {
			t.Fatalf("a terminal record: %v", err)
		}

		// Finishing a task by Update frees its slot, on either replica.
		if _, err := a.Update(ctx, alice[0].ID, func(x *Task) error { x.Status = StatusFailed; return nil }); err != nil {
			t.Fatal(err)
		}
		next := newTask("alice", "th", t0)
		if err := b.Create(ctx, next); err != nil {
			t.Fatalf("after one finished: %v", err)
		}
		if err := b.Create(ctx, newTask("alice", "th", t0)); !errors.As(err, &le) {
			t.Fatalf("at the cap again: %v", err)
		}
		// So does a poll that finds it finished (Apply), and a cancel.
		ls, err := a.Claim(ctx, "p", t0.Add(time.Second), time.Minute, 10)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range ls {
			if l.Task.ID == alice[1].ID {
				res := l.Task.Clone()
				res.Status, res.CompletedAt = StatusCompleted, t0
				if ok, err := b.Apply(ctx, l, res, t0.Add(time.Second)); !ok || err != nil {
					t.Fatalf("apply: %v %v", ok, err)
				}
			}
		}
		if err := a.Create(ctx, newTask("alice", "th", t0)); err != nil {
			t.Fatalf("after a poll finished one: %v", err)
		}
		// A Create that fails otherwise gives its slot back.
		if _, err := a.Update(ctx, alice[2].ID, func(x *Task) error { x.Status = StatusCancelled; return nil }); err != nil {
			t.Fatal(err)
		}
		if err := a.Create(ctx, next); !errors.Is(err, ErrExists) {
			t.Fatalf("duplicate id: %v", err)
		}
		last := newTask("alice", "th", t0)
		if err := b.Create(ctx, last); err != nil {
			t.Fatalf("the slot a failed create took was not given back: %v", err)
		}
		if err := a.Create(ctx, newTask("alice", "th", t0)); !errors.As(err, &le) {
			t.Fatalf("the cap counts exactly: %v", err)
		}
	})

	t.Run("racing submits never exceed the cap", func(t *testing.T) {
		a, b := open(t, 10)
		for i := range 5 {
			if err := a.Create(ctx, newTask("alice", "th", t0.Add(time.Duration(i)))); err != nil {
				t.Fatal(err)
			}
		}
		var ok, refused atomic.Int64
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range 20 {
			wg.Go(func() {
				<-start
				err := []Store{a, b}[i%2].Create(ctx, newTask("alice", "th", t0))
				var le *ActiveLimitError
				switch {
				case err == nil:
					ok.Add(1)
				case errors.As(err, &le):
					refused.Add(1)
				default:
					t.Error(err)
				}
			})
		}
		close(start)
		wg.Wait()
		if ok.Load() != 5 || refused.Load() != 15 {
			t.Fatalf("%d accepted, %d refused; want 5 and 15", ok.Load(), refused.Load())
		}
		ts, err := b.List(ctx, Query{User: "alice", ActiveOnly: true, Limit: MaxListLimit})
		if err != nil || len(ts) != 10 {
			t.Fatalf("alice has %d active tasks (%v), want 10", len(ts), err)
		}
	})

	t.Run("retention removes terminal records", func(t *testing.T) {
		a, b := open(t, 100)
		done := t0.Add(time.Minute)
		var finished []*Task
		for i := range 3 {
			tk := newTask("alice", "th", t0.Add(time.Duration(i)))
			tk.RemoteID, tk.TTL = "r-"+tk.ID, 2*time.Second
			if err := a.Create(ctx, tk); err != nil {
				t.Fatal(err)
			}
			if _, err := b.Update(ctx, tk.ID, func(x *Task) error {
				x.Status, x.CompletedAt, x.NextPollAt = StatusCompleted, done, time.Time{}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			finished = append(finished, tk)
		}
		active := newTask("alice", "th", t0)
		active.TTL = time.Second // an active task is never removed
		if err := a.Create(ctx, active); err != nil {
			t.Fatal(err)
		}
		forever := newTask("alice", "th", t0) // no TTL: kept
		forever.Status, forever.CompletedAt = StatusFailed, t0
		if err := a.Create(ctx, forever); err != nil {
			t.Fatal(err)
		}

		if n, err := a.Sweep(ctx, done.Add(1999*time.Millisecond), 100); n != 0 || err != nil {
			t.Fatalf("swept %d (%v) before the retention ended", n, err)
		}
		if n, err := b.Sweep(ctx, done.Add(2*time.Second), 2); n != 2 || err != nil {
			t.Fatalf("a bounded sweep removed %d (%v), want 2", n, err)
		}
		if n, err := a.Sweep(ctx, done.Add(time.Hour), 100); n != 1 || err != nil {
			t.Fatalf("the rest: %d (%v), want 1", n, err)
		}
		for _, tk := range finished {
			if _, err := a.Get(ctx, tk.ID); !errors.Is(err, ErrNotFound) {
				t.Fatalf("an expired record is still there: %v", err)
			}
		}
		ts, err := b.List(ctx, Query{User: "alice"})
		if err != nil || len(ts) != 2 {
			t.Fatalf("list after the sweep: %d tasks (%v), want the active one and the one without TTL", len(ts), err)
		}
		counts, err := a.Counts(ctx)
		if err != nil || counts[StatusCompleted] != 0 || counts[StatusSubmitted] != 1 || counts[StatusFailed] != 1 {
			t.Fatalf("counts %v (%v)", counts, err)
		}
		// The remote handles were released with their records.
		again := newTask("alice", "th", t0)
		again.RemoteID = finished[0].RemoteID
		if err := a.Create(ctx, again); err != nil {
			t.Fatalf("the handle of a removed record is still taken: %v", err)
		}
		if n, err := a.Sweep(ctx, done.Add(48*time.Hour), 100); n != 0 || err != nil {
			t.Fatalf("nothing left to sweep: %d %v", n, err)
		}
	})
}

// The Service end to end on a real store and clock: a submit past the cap
// is refused before the upstream is called, a finished task frees a slot,
// its record is gone after the retention, and ttlMs is the retention.
func TestServiceCapAndRetention(t *testing.T) {
	for name, open := range map[string]limitedStores{"redis": limitedRedis, "bolt": limitedBolt} {
		t.Run(name, func(t *testing.T) {
			st, _ := open(t, 2)
			var finish atomic.Bool
			r := &remote{answer: func(c Call, _ int) (json.RawMessage, error) {
				if finish.Load() && c.Args != nil && strings.Contains(string(c.Args), "r-1") {
					return sc(`{"task_id":"r-1","status":"completed","result":{"ok":true}}`), nil
				}
				var a struct {
					TaskID string `json:"task_id"`
				}
				_ = json.Unmarshal(c.Args, &a)
				return sc(`{"task_id":"` + a.TaskID + `","status":"running"}`), nil
			}}
			s := newService(t, st, r, Config{PollInterval: 20 * time.Millisecond, Lease: 10 * time.Second, Retention: time.Second})
			s.Start()
			t.Cleanup(func() { _ = s.Stop(context.Background()) })
			ctx := context.Background()
			req := SubmitRequest{User: "alice", Thread: "th", Server: "jobs", Toolset: triple}

			var calls atomic.Int64
			submit := func(rid string) func(context.Context) (json.RawMessage, error) {
				return func(ctx context.Context) (json.RawMessage, error) {
					calls.Add(1)
					return submitOK(rid)(ctx)
				}
			}
			first, _, err := s.SubmitTask(ctx, req, submit("r-1"))
			if err != nil {
				t.Fatal(err)
			}
			if v := s.ExtensionView(first); v.TTLMs == nil || *v.TTLMs != 1000 {
				t.Fatalf("ttlMs %v, want the retention (1000)", v.TTLMs)
			}
			if _, _, err := s.SubmitTask(ctx, req, submit("r-2")); err != nil {
				t.Fatal(err)
			}
			_, _, err = s.SubmitTask(ctx, req, submit("r-3"))
			var le *ActiveLimitError
			if !errors.As(err, &le) || le.Limit != 2 || calls.Load() != 2 {
				t.Fatalf("3rd submit: %v; the upstream submit ran %d times, want 2", err, calls.Load())
			}
			bobReq := req
			bobReq.User = "bob"
			if _, _, err := s.SubmitTask(ctx, bobReq, submit("r-b")); err != nil {
				t.Fatalf("bob: %v", err)
			}

			finish.Store(true) // r-1 completes at its next poll
			waitFor(t, func() bool {
				t, err := s.Get(ctx, "alice", first.ID)
				return errors.Is(err, ErrNotFound) || (err == nil && t.Status == StatusCompleted)
			})
			// The slot is given back just after the terminal record is
			// written (Redis: one more round trip, the user's set being in
			// another slot): a submit is accepted within moments, and a
			// refusal meanwhile runs nothing upstream.
			var err4 error
			before := calls.Load()
			for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(10 * time.Millisecond) {
				if _, _, err4 = s.SubmitTask(ctx, req, submit("r-4")); err4 == nil || !errors.As(err4, &le) || time.Now().After(deadline) {
					break
				}
			}
			if err4 != nil || calls.Load() != before+1 {
				t.Fatalf("after a task finished: %v; the upstream submit ran %d times, want 1", err4, calls.Load()-before)
			}
			// Its record is removed once the retention (1 s) ended.
			waitFor(t, func() bool {
				_, err := s.Get(ctx, "alice", first.ID)
				return errors.Is(err, ErrNotFound)
			})
			if n := r.count("status"); n == 0 {
				t.Fatal("never polled")
			}
		})
	}
}
