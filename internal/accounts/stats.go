package accounts

import (
	"context"
	"maps"
	"slices"
	"sync"
	"time"
)

// Failure reasons of ServerStats.Failures.
var failureReasons = []string{"denied", "expired", "state", "iss", "exchange", "discovery", "registration", "refresh", "too_many"}

// ServerStats are one per-user server's numbers: Connected from the
// store, the rest counted by this process since it started.
type ServerStats struct {
	Name              string
	Connected         int
	ConsentsStarted   int64
	ConsentsCompleted int64
	ConsentsFailed    int64
	Refreshes         int64
	Failures          map[string]int64 // by reason
}

// counters are a server's numbers in this process.
type counters struct {
	started, completed, failed, refreshes int64
	failures                              map[string]int64
}

// tally counts per server in this process. It is safe for concurrent use.
type tally struct {
	mu sync.Mutex
	by map[string]*counters
}

// get returns server's counters; t.mu must be held.
func (t *tally) get(server string) *counters {
	if t.by == nil {
		t.by = map[string]*counters{}
	}
	c := t.by[server]
	if c == nil {
		c = &counters{failures: map[string]int64{}}
		t.by[server] = c
	}
	return c
}

// add applies fn to server's counters.
func (t *tally) add(server string, fn func(*counters)) {
	t.mu.Lock()
	defer t.mu.Unlock()
	fn(t.get(server))
}

// fail counts a failure of server; reasons outside the fixed set are not
// counted.
func (t *tally) fail(server, reason string) {
	if slices.Contains(failureReasons, reason) {
		t.add(server, func(c *counters) { c.failures[reason]++ })
	}
}

// outcome counts a finished consent.
func (t *tally) outcome(server, reason string) {
	t.add(server, func(c *counters) {
		if reason == "" {
			c.completed++
			return
		}
		c.failed++
		if slices.Contains(failureReasons, reason) {
			c.failures[reason]++
		}
	})
}

// snapshot returns the numbers of the servers named.
func (t *tally) snapshot(names []string) []ServerStats {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]ServerStats, 0, len(names))
	for _, n := range names {
		c := t.get(n)
		out = append(out, ServerStats{Name: n, ConsentsStarted: c.started, ConsentsCompleted: c.completed,
			ConsentsFailed: c.failed, Refreshes: c.refreshes, Failures: maps.Clone(c.failures)})
	}
	return out
}

// forget drops a finished consent started here; one that expired is
// counted (once: the first to see it here).
func (m *Manager) forget(id string, expired bool) {
	m.mu.Lock()
	c, ok := m.local[id]
	delete(m.local, id)
	m.mu.Unlock()
	if ok && expired {
		m.tally.outcome(c.server, "expired")
	}
}

// remember records a consent started here; those past their expiry are
// forgotten (another replica may have completed them), so the record is
// bounded.
func (m *Manager) remember(id, server string, expires time.Time) {
	now := m.o.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	maps.DeleteFunc(m.local, func(_ string, c localConsent) bool { return now.After(c.expires.Add(resultGrace)) })
	m.local[id] = localConsent{server: server, expires: expires}
}

// Stats returns the numbers of every configured per-user server, sorted
// by name. They hold no token and no user id.
func (m *Manager) Stats(ctx context.Context) []ServerStats {
	m.mu.Lock()
	names := slices.Sorted(maps.Keys(m.servers))
	m.mu.Unlock()
	out := m.tally.snapshot(names)
	for i := range out {
		if _, n, err := m.store.users(ctx, out[i].Name, 0); err == nil {
			out[i].Connected = n
		} else {
			m.log.Warn("counting a server's connected users", "server", out[i].Name, "err", err)
		}
	}
	return out
}
