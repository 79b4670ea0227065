package proxy

import "github.com/mcp-mux/mcp-mux/config"

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

// capBound is one global cap and one caller's share of it, with the config
// keys that set them (for the refusal's text).
type capBound struct {
	limit, share  int
	key, shareKey string
}

// callerBounds are the caps of the config applied now.
type callerBounds struct {
	sessions, listens, parked capBound
}

// bounds returns the caps and shares of the config applied now.
func (s *Server) bounds() callerBounds {
	return boundsOf(&s.rt.Load().cfg.Inbound)
}

func boundsOf(in *config.Inbound) callerBounds {
	sessions := in.MaxSessions
	if sessions <= 0 {
		sessions = defaultMaxSessions
	}
	parked := in.MaxParkedCalls
	if parked <= 0 {
		parked = defaultMaxParked
	}
	one := in.Auth.Mode == "" || in.Auth.Mode == config.AuthNone // one caller: the whole cap
	share := func(n, limit int) int {
		switch {
		case one:
			return limit
		case n <= 0:
			return max(limit/4, 1)
		}
		return min(n, limit)
	}
	return callerBounds{
		sessions: capBound{sessions, share(in.MaxSessionsPerUser, sessions), "inbound.max_sessions", "inbound.max_sessions_per_user"},
		listens:  capBound{sessions, share(in.MaxListensPerUser, sessions), "inbound.max_sessions", "inbound.max_listens_per_user"},
		parked:   capBound{parked, share(in.MaxParkedCallsPerUser, parked), "inbound.max_parked_calls", "inbound.max_parked_calls_per_user"},
	}
}

// callerCounts counts what each caller holds of one cap; the table that
// holds it guards it with its own lock. A caller holding nothing has no
// entry, so the map stays as small as the set of active callers.
type callerCounts map[string]int

func (c *callerCounts) add(user string) {
	if *c == nil {
		*c = make(callerCounts)
	}
	(*c)[user]++
}

func (c callerCounts) done(user string) {
	if n := c[user]; n > 1 {
		c[user] = n - 1
	} else {
		delete(c, user)
	}
}

// refusal says which bound a request would exceed: "" (none), the cap's
// key, or the caller's share's key.
func (b capBound) refusal(total, mine int) string {
	switch {
	case total >= b.limit:
		return b.key
	case mine >= b.share:
		return b.shareKey
	}
	return ""
}
