package upstream

import (
	"encoding/json"
	"time"
)

// MaxCacheTTL bounds the ttlMs mcp-mux takes from an upstream's list or
// read result: a longer one counts as this long.
const MaxCacheTTL = time.Hour

// CacheHint is the caching hint of a 2026-07-28 list or read result (its
// ttlMs and cacheScope), bounded.
type CacheHint struct {
	// Set is whether the result carried a usable ttlMs.
	Set bool
	// TTL is ttlMs, within 0..MaxCacheTTL.
	TTL time.Duration
	// Private is cacheScope "private" (or any value but "public": the
	// narrower reading of one mcp-mux does not know).
	Private bool
}

// HintOf reads the caching hint of a result; a result without an integer
// ttlMs has none (Set false), whatever its cacheScope.
func HintOf(ttlMs, scope json.RawMessage) CacheHint {
	var ms int64
	if len(ttlMs) == 0 || json.Unmarshal(ttlMs, &ms) != nil {
		return CacheHint{}
	}
	var sc string
	_ = json.Unmarshal(scope, &sc)
	ms = min(max(ms, 0), MaxCacheTTL.Milliseconds())
	return CacheHint{Set: true, TTL: time.Duration(ms) * time.Millisecond, Private: sc != "public"}
}

// Narrow combines two hints of one list (its pages, or several servers'):
// the shorter TTL of those set, private if either is.
func (h CacheHint) Narrow(o CacheHint) CacheHint {
	switch {
	case !o.Set:
		return h
	case !h.Set:
		return o
	}
	return CacheHint{Set: true, TTL: min(h.TTL, o.TTL), Private: h.Private || o.Private}
}

// MinRelist is the shortest time between two list rounds a TTL asks for:
// a server that says ttlMs 0 (do not cache) is listed again at most this
// often, however often clients list.
const MinRelist = time.Second

// Stale reports whether the lists outlived their hints at now: some
// list's TTL (at least MinRelist) has passed since they were fetched.
// Lists without hints are never stale (their server announces changes).
func (l *Lists) Stale(now time.Time) bool {
	for _, h := range l.Hints {
		if h.Set && now.Sub(l.At) > max(h.TTL, MinRelist) {
			return true
		}
	}
	return false
}
