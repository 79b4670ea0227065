package audit

import "github.com/mcp-mux/mcp-mux/internal/status"

// recentCalls is how many slow and how many failed calls are kept.
const recentCalls = 20

// ring keeps the last max calls, oldest first.
type ring struct {
	max   int
	calls []status.Call
}

func (r *ring) add(c status.Call) {
	if len(r.calls) == r.max {
		copy(r.calls, r.calls[1:])
		r.calls = r.calls[:r.max-1]
	}
	r.calls = append(r.calls, c)
}

// keep adds a finished request to the recent slow and failed ones; an
// anonymous caller's (hashed) default user is left out.
func (a *Auditor) keep(r *Record, anonymous, slow, failed bool) {
	c := status.Call{Time: r.Time, Kind: r.Kind, Server: r.Server, Target: r.Tool + r.Prompt + r.URI, Caller: r.Caller, Anonymous: anonymous,
		Outcome: r.Outcome, Denial: r.Denial, ErrorType: r.ErrorType, DurationMS: r.DurationMS, TraceID: r.TraceID, RequestID: r.RequestID}
	if anonymous {
		c.Caller = ""
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if slow {
		a.slow.add(c)
	}
	if failed {
		a.failed.add(c)
	}
}

// Recent returns the recent slow and failed requests, newest first.
func (a *Auditor) Recent() (slow, failed []status.Call) {
	if a == nil {
		return nil, nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return newestFirst(a.slow.calls), newestFirst(a.failed.calls)
}

func newestFirst(calls []status.Call) []status.Call {
	out := make([]status.Call, len(calls))
	for i, c := range calls {
		out[len(calls)-1-i] = c
	}
	return out
}
