package accounts

import (
	"context"
	"maps"
	"slices"
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

// counter returns server's counters; m.mu must be held.
func (m *Manager) counter(server string) *counters {
	c := m.stats[server]
	if c == nil {
		c = &counters{failures: map[string]int64{}}
		m.stats[server] = c
	}
	return c
}

// count counts a failure of server; reasons outside the fixed set are
// not counted (server names come from the configuration).
func (m *Manager) count(server, reason string) {
	if !slices.Contains(failureReasons, reason) {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.servers[server]; ok {
		m.counter(server).failures[reason]++
	}
}

func (m *Manager) countStarted(server string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.counter(server).started++
}

func (m *Manager) countRefresh(server string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.counter(server).refreshes++
}

// countOutcome counts a finished consent.
func (m *Manager) countOutcome(server, reason string) {
	m.mu.Lock()
	if reason == "" {
		m.counter(server).completed++
	} else {
		m.counter(server).failed++
	}
	m.mu.Unlock()
	if reason != "" {
		m.count(server, reason)
	}
}

// countExpired counts a consent started here that expired, once.
func (m *Manager) countExpired(id string) {
	m.mu.Lock()
	server, ok := m.local[id]
	delete(m.local, id)
	m.mu.Unlock()
	if ok {
		m.countOutcome(server, "expired")
	}
}

// Stats returns the numbers of every configured per-user server, sorted
// by name. They hold no token and no user id.
func (m *Manager) Stats(ctx context.Context) []ServerStats {
	m.mu.Lock()
	names := slices.Sorted(maps.Keys(m.servers))
	out := make([]ServerStats, 0, len(names))
	for _, n := range names {
		c := m.counter(n)
		out = append(out, ServerStats{Name: n, ConsentsStarted: c.started, ConsentsCompleted: c.completed,
			ConsentsFailed: c.failed, Refreshes: c.refreshes, Failures: maps.Clone(c.failures)})
	}
	m.mu.Unlock()
	for i := range out {
		if _, n, err := m.store.users(ctx, out[i].Name, 0); err == nil {
			out[i].Connected = n
		} else {
			m.log.Warn("counting a server's connected users", "server", out[i].Name, "err", err)
		}
	}
	return out
}
