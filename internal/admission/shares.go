// Package admission decides what one client may make mcp-mux hold: the
// global caps on sessions, listen streams and parked calls and each
// caller's share of them (Bounds, Counts; the session store admits new
// sessions within them, package sessionstore), the requests in flight per
// session (Calls), and the size and read deadline of request bodies
// (Bodies). Refusals are JSON-RPC errors
// that name the bound and the config key that sets it.
package admission

import "github.com/mcp-mux/mcp-mux/internal/config"

// Per-caller shares of the global caps.
//
// inbound.max_sessions bounds open downstream sessions and, counted apart,
// open 2026-07-28 subscriptions/listen streams; inbound.max_parked_calls
// bounds bridged calls waiting for their client's retry. Each cap also has
// a per-caller share (inbound.max_sessions_per_user, max_listens_per_user,
// max_parked_calls_per_user; a quarter of the cap by default), so that one
// caller who takes all it may still leaves the rest to the others. The
// caller is the authenticated user. Under auth mode none every request is
// user "default": there is nobody to be fair to (and remote addresses on a
// loopback-only listener would tell nobody apart), so that one caller's
// share is the whole cap.

const (
	// DefaultMaxSessions is inbound.max_sessions when unset.
	DefaultMaxSessions = 10000
	// DefaultMaxParked is inbound.max_parked_calls when unset: bridged
	// calls waiting for a retry.
	DefaultMaxParked = 1024
	// CodeLimit is the JSON-RPC error code of a request refused by a bound
	// (implementation-defined server error range).
	CodeLimit = -32000
)

// Bound is one global cap and one caller's share of it, with the config
// keys that set them (for the refusal's text).
type Bound struct {
	Limit, Share  int
	Key, ShareKey string
}

// Bounds are the caps of one config.
type Bounds struct {
	Sessions, Listens, Parked Bound
}

// Of returns the caps and shares that in sets.
func Of(in *config.Inbound) Bounds {
	sessions := in.MaxSessions
	if sessions <= 0 {
		sessions = DefaultMaxSessions
	}
	parked := in.MaxParkedCalls
	if parked <= 0 {
		parked = DefaultMaxParked
	}
	one := in.Auth.Mode == "" || in.Auth.Mode == config.AuthNone // one caller: the whole cap
	return Bounds{
		Sessions: Bound{sessions, share(one, in.MaxSessionsPerUser, sessions), "inbound.max_sessions", "inbound.max_sessions_per_user"},
		Listens:  Bound{sessions, share(one, in.MaxListensPerUser, sessions), "inbound.max_sessions", "inbound.max_listens_per_user"},
		Parked:   Bound{parked, share(one, in.MaxParkedCallsPerUser, parked), "inbound.max_parked_calls", "inbound.max_parked_calls_per_user"},
	}
}

// share is one caller's share of limit: the whole of it when there is one
// caller, else n (at most limit), or a quarter of limit when n is unset.
func share(one bool, n, limit int) int {
	switch {
	case one:
		return limit
	case n <= 0:
		return max(limit/4, 1)
	}
	return min(n, limit)
}

// Refusal says which bound a request would exceed: "" (none), the cap's
// key, or the caller's share's key.
func (b Bound) Refusal(total, mine int) string {
	switch {
	case total >= b.Limit:
		return b.Key
	case mine >= b.Share:
		return b.ShareKey
	}
	return ""
}

// Counts counts what each caller holds of one cap; the table that holds
// it guards it with its own lock. A caller holding nothing has no entry,
// so the map stays as small as the set of active callers.
type Counts map[string]int

// Add counts one more for user.
func (c *Counts) Add(user string) {
	if *c == nil {
		*c = make(Counts)
	}
	(*c)[user]++
}

// Done counts one less for user.
func (c Counts) Done(user string) {
	if n := c[user]; n > 1 {
		c[user] = n - 1
	} else {
		delete(c, user)
	}
}
