package ratelimit_test

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"

	"github.com/mcp-mux/mcp-mux/internal/config"
	"github.com/mcp-mux/mcp-mux/internal/mcptest"
	"github.com/mcp-mux/mcp-mux/internal/ratelimit"
)

var (
	alice = ratelimit.Call{Caller: "alice", Server: "web", Tool: "web_search"}
	bob   = ratelimit.Call{Caller: "bob", Server: "web", Tool: "web_search"}
)

func perCallerTool(calls, inFlight int) config.Limits {
	r := config.LimitRule{Name: "search-per-caller", Scope: config.LimitScopeCallerTool, Tool: "web_*", InFlight: inFlight}
	if calls > 0 {
		r.Calls, r.Per = calls, time.Minute
	}
	return config.Limits{Rules: []config.LimitRule{r}}
}

func newLimiter(t *testing.T, store *ratelimit.Store, reg prometheus.Registerer) *ratelimit.Limiter {
	t.Helper()
	l, err := ratelimit.New(ratelimit.Options{Store: store, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// storeTimeout is long enough for a burst of 400 on a loaded machine
// (a timeout fails open).
const storeTimeout = 10 * time.Second

func sharedStore(r *mcptest.Redis, prefix string) *ratelimit.Store {
	return &ratelimit.Store{Client: redis.NewClient(&redis.Options{Addr: r.Addr, MaxRetries: -1, ContextTimeoutEnabled: true}), KeyPrefix: prefix, Timeout: storeTimeout}
}

// burst fires n Admits at once, spread over ls, and returns how many of
// alice's were admitted and the refusals' messages.
func burst(ls []*ratelimit.Limiter, n int, c ratelimit.Call) (int, []string) {
	var admitted atomic.Int64
	var mu sync.Mutex
	var refused []string
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			d := ls[i%len(ls)].Admit(context.Background(), c)
			if d.Allowed {
				admitted.Add(1)
				d.Release()
				return
			}
			mu.Lock()
			refused = append(refused, d.Message)
			mu.Unlock()
		})
	}
	close(start)
	wg.Wait()
	return int(admitted.Load()), refused
}

// TestRateInProcess: 400 calls at once against 100 per minute admit 100,
// refuse the rest naming the rule and when to retry, leave another caller
// alone and count the rejections.
func TestRateInProcess(t *testing.T) {
	reg := prometheus.NewRegistry()
	l := newLimiter(t, nil, reg)
	l.SetRules(perCallerTool(100, 0))
	start := time.Now()
	got, refused := burst([]*ratelimit.Limiter{l}, 400, alice)
	refill := int(time.Since(start) / (600 * time.Millisecond))
	if got < 100 || got > 100+refill || len(refused) != 400-got {
		t.Fatalf("admitted %d, refused %d; want 100 (+%d refilled during the burst) and the rest", got, len(refused), refill)
	}
	want := `rate limit "search-per-caller" exceeded: 100 calls per 1m0s for each (caller, tool); retry after `
	if !strings.HasPrefix(refused[0], want) {
		t.Fatalf("refusal %q, want prefix %q", refused[0], want)
	}
	if d := l.Admit(context.Background(), bob); !d.Allowed {
		t.Fatalf("bob refused: %s", d.Message)
	}
	if d := l.Admit(context.Background(), ratelimit.Call{Caller: "alice", Server: "web", Tool: "other"}); !d.Allowed {
		t.Fatal("a tool the rule does not match was refused")
	}
	if n := testutil.ToFloat64(refusals(t, reg)); n != float64(len(refused)) {
		t.Fatalf("rejections counted %v, want %d", n, len(refused))
	}
}

func refusals(t *testing.T, reg *prometheus.Registry) prometheus.Collector {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "mcp_mux_limit_rejections_total" {
			for _, m := range mf.GetMetric() {
				labels := map[string]string{}
				for _, lp := range m.GetLabel() {
					labels[lp.GetName()] = lp.GetValue()
				}
				if labels["limit"] == "search-per-caller" && labels["kind"] == "rate" {
					c := prometheus.NewCounter(prometheus.CounterOpts{Name: "x"})
					c.Add(m.GetCounter().GetValue())
					return c
				}
			}
		}
	}
	t.Fatal("no mcp_mux_limit_rejections_total{limit=search-per-caller,kind=rate}")
	return nil
}

// TestRateShared: two limiters on one Redis share 100 per minute: 400
// calls at once across both admit 100 ± 2.
func TestRateShared(t *testing.T) {
	r := mcptest.StartRedis(t, false)
	a, b := newLimiter(t, sharedStore(r, "rl-test:"), nil), newLimiter(t, sharedStore(r, "rl-test:"), nil)
	a.SetRules(perCallerTool(100, 0))
	b.SetRules(perCallerTool(100, 0))
	start := time.Now()
	got, refused := burst([]*ratelimit.Limiter{a, b}, 400, alice)
	refill := int(time.Since(start) / (600 * time.Millisecond)) // one call per 0.6 s meanwhile
	if got < 98 || got > 102+refill {
		t.Fatalf("admitted %d, want 100 ± 2 (+%d refilled during the burst)", got, refill)
	}
	if len(refused) != 400-got || !strings.Contains(refused[0], `rate limit "search-per-caller" exceeded`) {
		t.Fatalf("refusals %d, first %q", len(refused), refused[0])
	}
	if d := b.Admit(context.Background(), bob); !d.Allowed {
		t.Fatalf("bob refused: %s", d.Message)
	}
	if keys, _ := r.Do("KEYS", "rate:rl-test:limit:search-per-caller:*"); keys == "" {
		t.Fatal("no rate key under the key prefix")
	}
}

// TestInFlight: calls held at once never exceed the cap, in process and
// across two limiters sharing Redis; releasing frees the slots.
func TestInFlight(t *testing.T) {
	r := mcptest.StartRedis(t, false)
	for name, ls := range map[string][]*ratelimit.Limiter{
		"in process": {newLimiter(t, nil, nil)},
		"shared":     {newLimiter(t, sharedStore(r, "if-test:"), nil), newLimiter(t, sharedStore(r, "if-test:"), nil)},
	} {
		t.Run(name, func(t *testing.T) {
			for _, l := range ls {
				l.SetRules(perCallerTool(0, 4))
			}
			var cur, peak, admitted atomic.Int64
			var wg sync.WaitGroup
			for i := range 200 {
				wg.Go(func() {
					d := ls[i%len(ls)].Admit(context.Background(), alice)
					if !d.Allowed {
						if !strings.Contains(d.Message, `concurrency limit "search-per-caller" exceeded: 4 calls in flight`) {
							t.Errorf("refusal %q", d.Message)
						}
						return
					}
					admitted.Add(1)
					n := cur.Add(1)
					for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
					}
					time.Sleep(2 * time.Millisecond)
					cur.Add(-1)
					d.Release()
				})
			}
			wg.Wait()
			if peak.Load() > 4 || admitted.Load() < 4 {
				t.Fatalf("peak %d in flight (cap 4), %d admitted", peak.Load(), admitted.Load())
			}
			held := make([]ratelimit.Decision, 0, 4)
			for range 4 {
				d := ls[0].Admit(context.Background(), alice)
				if !d.Allowed {
					t.Fatalf("slots not freed: %s", d.Message)
				}
				held = append(held, d)
			}
			if d := ls[len(ls)-1].Admit(context.Background(), alice); d.Allowed {
				t.Fatal("a 5th call admitted")
			}
			if d := ls[0].Admit(context.Background(), bob); !d.Allowed {
				t.Fatal("bob refused")
			}
			// A reload keeps the count of calls in flight.
			for _, l := range ls {
				l.SetRules(perCallerTool(0, 4))
			}
			if d := ls[0].Admit(context.Background(), alice); d.Allowed {
				t.Fatal("a 5th call admitted after a reload")
			}
			for i := range held {
				held[i].Release()
			}
		})
	}
}

// TestLeaseExpiry: a replica killed while holding slots frees them
// within the lease.
func TestLeaseExpiry(t *testing.T) {
	r := mcptest.StartRedis(t, false)
	l, err := ratelimit.New(ratelimit.Options{Store: sharedStore(r, "lease:"), LeaseTTL: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	l.SetRules(perCallerTool(0, 1))
	d := l.Admit(context.Background(), alice)
	if !d.Allowed {
		t.Fatal(d.Message)
	}
	time.Sleep(500 * time.Millisecond) // renewed meanwhile
	if d := l.Admit(context.Background(), alice); d.Allowed {
		t.Fatal("a held, renewed lease expired")
	}
	_ = l.Close() // stops renewing: as a killed replica
	other := newLimiter(t, sharedStore(r, "lease:"), nil)
	other.SetRules(perCallerTool(0, 1))
	time.Sleep(400 * time.Millisecond)
	if d := other.Admit(context.Background(), alice); !d.Allowed {
		t.Fatalf("a dead replica's lease still holds the slot: %s", d.Message)
	}
}

// TestStoreDown: with Redis stopped, limits fail open or closed as
// configured, and Health says so.
func TestStoreDown(t *testing.T) {
	r := mcptest.StartRedis(t, false)
	l := newLimiter(t, sharedStore(r, "down:"), nil)
	lim := perCallerTool(100, 4)
	l.SetRules(lim)
	if h := l.Health(); h != "ok (shared)" {
		t.Fatalf("health %q", h)
	}
	r.Stop()
	if d := l.Admit(context.Background(), alice); !d.Allowed {
		t.Fatalf("failing open refused: %s", d.Message)
	}
	if h := l.Health(); h != "degraded: store unreachable, failing open" {
		t.Fatalf("health %q", h)
	}
	lim.FailClosed = true
	l.SetRules(lim)
	d := l.Admit(context.Background(), alice)
	if d.Allowed || d.Kind != ratelimit.KindStore || !strings.Contains(d.Message, "limit store is unreachable") {
		t.Fatalf("failing closed: %+v", d)
	}
	if h := l.Health(); h != "degraded: store unreachable, failing closed" {
		t.Fatalf("health %q", h)
	}
	r.Start()
	waitHealth(t, l, "ok (shared)") // the background probe sees it back, no call needed
	// A store that hangs: the probe notices it with no call made, and
	// Health answers from memory all along.
	r.Pause()
	defer r.Resume()
	waitHealth(t, l, "degraded: store unreachable, failing closed")
	r.Resume()
	waitHealth(t, l, "ok (shared)")
	if d := l.Admit(context.Background(), alice); !d.Allowed {
		t.Fatalf("after restart: %s", d.Message)
	}
}

// waitHealth waits up to 5 s for l.Health() to say want.
func waitHealth(t *testing.T, l *ratelimit.Limiter, want string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		h := l.Health()
		if h == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("health %q, want %q within 5 s", h, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestNoMatchAllocatesNothing: the call path pays nothing when no rule
// matches (or none is configured).
func TestNoMatchAllocatesNothing(t *testing.T) {
	l := newLimiter(t, nil, nil)
	other := ratelimit.Call{Caller: "alice", Server: "db", Tool: "db_query"}
	check := func(what string) {
		if n := testing.AllocsPerRun(1000, func() {
			d := l.Admit(context.Background(), other)
			d.Release()
		}); n != 0 {
			t.Fatalf("%s: %v allocations per call", what, n)
		}
	}
	check("no rules")
	l.SetRules(config.Limits{Rules: []config.LimitRule{
		{Name: "a", Scope: config.LimitScopeCallerTool, Tool: "web_*", Calls: 10, Per: time.Minute},
		{Name: "b", Scope: config.LimitScopeServer, Server: "web", InFlight: 2},
	}})
	check("no rule matching")
}

func BenchmarkAdmit(b *testing.B) {
	for _, tc := range []struct {
		name string
		lim  config.Limits
	}{
		{"none", config.Limits{}},
		{"in_process", perCallerTool(1_000_000, 0)},
	} {
		b.Run(tc.name, func(b *testing.B) {
			l, _ := ratelimit.New(ratelimit.Options{})
			l.SetRules(tc.lim)
			b.ReportAllocs()
			for b.Loop() {
				d := l.Admit(context.Background(), alice)
				d.Release()
			}
		})
	}
}
