package callpath

import (
	"container/list"
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/mcp-mux/mcp-mux/internal/catalog"
	"github.com/mcp-mux/mcp-mux/internal/upstream"
)

// The bounds of the read cache.
const (
	maxReadEntries = 1024      // results kept
	maxReadEntry   = 256 << 10 // bytes of one result kept; a larger one is not
	maxReadBytes   = 32 << 20  // bytes of all results and their URIs kept
)

// readCacheStage answers a resources/read from the result its server gave
// for the same URI within the ttlMs that result carried (a 2026-07-28
// server's caching hint, at most upstream.MaxCacheTTL), so repeated reads
// do not reach the server. A result whose cacheScope is private, or of a
// server that gets each caller's own credentials, is kept for its caller
// only; a public one is shared. A result without a ttlMs (a 2025-11-25
// server), with ttlMs 0, or not complete (input_required) is not kept.
// It sits after every stage that decides whether the read may happen, so
// only the server is spared.
func readCacheStage(s *Router) Stage {
	return Stage{
		Name:    "readcache",
		Methods: ResourceRead,
		Wrap: func(next CallFunc) CallFunc {
			return func(ctx context.Context, c *Call) (json.RawMessage, error) {
				if c.Backend == nil {
					return next(ctx, c)
				}
				now := time.Now()
				if raw, ok := s.reads.get(c.Backend.Name, c.Name, c.Caller.User, now); ok {
					return raw, nil
				}
				raw, err := next(ctx, c)
				if err == nil {
					perCaller := c.Backend.PerUser || c.Backend.Detect || (c.Backend.Resolver != nil && c.Backend.Resolver.PerCaller())
					s.reads.put(c.Backend.Name, c.Name, c.Caller.User, perCaller, raw, now)
				}
				return raw, err
			}
		},
	}
}

// readKey is one kept result: its server, URI and (for a caller's own)
// the caller; "" for a shared one.
type readKey struct{ server, uri, user string }

// readEntry is one kept result and when it stops being served.
type readEntry struct {
	key   readKey
	raw   json.RawMessage
	until time.Time
}

// readCache keeps read results, least recently used dropped first past
// its bounds. The zero value is ready to use.
type readCache struct {
	mu    sync.Mutex
	lru   list.List // of *readEntry, most recently used first
	items map[readKey]*list.Element
	bytes int
}

// get returns the caller's own kept result of uri, else the shared one,
// while it is fresh.
func (rc *readCache) get(server, uri, user string, now time.Time) (json.RawMessage, bool) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	for _, k := range []readKey{{server, uri, user}, {server, uri, ""}} {
		el := rc.items[k]
		if el == nil {
			continue
		}
		e := el.Value.(*readEntry)
		if now.After(e.until) {
			rc.drop(el)
			continue
		}
		rc.lru.MoveToFront(el)
		return e.raw, true
	}
	return nil, false
}

// put keeps raw, a read result of uri, for the TTL it carries: for user
// alone when its scope is private or perCaller, else for everyone.
func (rc *readCache) put(server, uri, user string, perCaller bool, raw json.RawMessage, now time.Time) {
	if len(raw) > maxReadEntry || len(uri) > catalog.MaxResourceURI {
		return
	}
	var m struct {
		ResultType string          `json:"resultType"`
		TTL        json.RawMessage `json:"ttlMs"`
		Scope      json.RawMessage `json:"cacheScope"`
	}
	if json.Unmarshal(raw, &m) != nil || (m.ResultType != "" && m.ResultType != "complete") {
		return
	}
	h := upstream.HintOf(m.TTL, m.Scope)
	if !h.Set || h.TTL <= 0 {
		return
	}
	k := readKey{server, uri, ""}
	if h.Private || perCaller {
		k.user = user
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if rc.items == nil {
		rc.items = make(map[readKey]*list.Element)
	}
	if el := rc.items[k]; el != nil {
		rc.drop(el)
	}
	rc.items[k] = rc.lru.PushFront(&readEntry{key: k, raw: raw, until: now.Add(h.TTL)})
	rc.bytes += readSize(k, raw)
	for rc.lru.Len() > maxReadEntries || rc.bytes > maxReadBytes {
		rc.drop(rc.lru.Back())
	}
}

// drop forgets one kept result. rc.mu is held.
func (rc *readCache) drop(el *list.Element) {
	e := rc.lru.Remove(el).(*readEntry)
	delete(rc.items, e.key)
	rc.bytes -= readSize(e.key, e.raw)
}

// readSize is what one kept result counts against maxReadBytes.
func readSize(k readKey, raw json.RawMessage) int {
	return len(k.server) + len(k.uri) + len(k.user) + len(raw)
}
