package callpath

import (
	"time"

	"github.com/mcp-mux/mcp-mux/internal/upstream"
)

// ListHint is the caching hint of the runtime's list of method (tools/list,
// prompts/list, resources/list, resources/templates/list) as its up
// servers gave theirs: the shortest TTL, private if any server's is; not
// Set when no server gave one.
func (rt *Runtime) ListHint(method string) upstream.CacheHint {
	var h upstream.CacheHint
	for _, b := range rt.Backends {
		if b.Up == nil {
			continue
		}
		l := b.Up.Lists()
		h = h.Narrow(l.Hints[method])
	}
	return h
}

// RefreshStale asks every server whose lists outlived the TTL it gave
// them to list again (at most one round at a time per server); the lists
// served meanwhile are the last ones. A server that gave no TTL relies on
// its list_changed notifications.
func (rt *Runtime) RefreshStale(now time.Time) {
	for _, b := range rt.Backends {
		if b.Up == nil {
			continue
		}
		if l := b.Up.Lists(); l.Stale(now) {
			b.Up.Rediscover()
		}
	}
}
