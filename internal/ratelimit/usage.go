package ratelimit

import (
	"sort"
	"strings"

	"github.com/mcp-mux/mcp-mux/internal/status"
)

// noteRefusal counts a refusal of rule by kind, for Usage.
func (l *Limiter) noteRefusal(rule, kind string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.refusals == nil {
		l.refusals = map[string]map[string]int64{}
	}
	if l.refusals[rule] == nil {
		l.refusals[rule] = map[string]int64{}
	}
	l.refusals[rule][kind]++
}

// Usage is each rule of the current config as the status page shows it:
// its limits and, on this replica, the calls it refused (since start, by
// kind) and the calls in flight holding one of its slots now.
func (l *Limiter) Usage() []status.Limit {
	if !l.Active() {
		return nil
	}
	rs := l.rules.Load()
	running := l.running()
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]status.Limit, 0, len(rs.rules))
	for _, r := range rs.rules {
		u := status.Limit{Name: r.Name, Scope: r.scopeText(), Server: r.Server, Tool: r.Tool, Calls: r.Calls,
			PerSeconds: r.Per.Seconds(), InFlight: r.InFlight, Running: running[r.Name], Refused: map[string]int64{}}
		for k, n := range l.refusals[r.Name] {
			u.Refused[k] = n
		}
		out = append(out, u)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// running counts this replica's calls in flight by rule name.
func (l *Limiter) running() map[string]int {
	out := map[string]int{}
	if l.rdb == nil {
		l.mu.Lock()
		for key, n := range l.inflight {
			out[ruleOf(key)] += n
		}
		l.mu.Unlock()
		return out
	}
	l.leases.mu.Lock()
	defer l.leases.mu.Unlock()
	marker := l.prefix + "limit-inflight:"
	for s := range l.leases.held {
		out[ruleOf(strings.TrimPrefix(s.key, marker))]++
	}
	return out
}

// ruleOf is the rule name of a budget key "<rule>:<subject>".
func ruleOf(key string) string {
	name, _, _ := strings.Cut(key, ":")
	return name
}
