package headers

import (
	"container/list"
	"sync"
	"time"

	"github.com/mcp-mux/mcp-mux/internal/secret"
)

// exchangeCache holds exchanged tokens, least recently used first out. It
// is bounded in total and per caller, so no caller can grow it or push
// every other caller's tokens out by sending new subject tokens.
type exchangeCache struct {
	max, perCaller int

	mu      sync.Mutex
	order   *list.List               // of *exchangeEntry, most recently used at the front
	byKey   map[string]*list.Element // exchangeKey → element
	callers map[string]int           // user → entries held
}

// exchangeEntry is one cached exchanged token.
type exchangeEntry struct {
	key, user string
	value     secret.Value // the upstream header value
	fresh     time.Time    // used until then; exchanged again after
}

// newExchangeCache returns an empty cache of at most max entries, at most
// perCaller of them for one user.
func newExchangeCache(max, perCaller int) *exchangeCache {
	return &exchangeCache{max: max, perCaller: perCaller, order: list.New(),
		byKey: map[string]*list.Element{}, callers: map[string]int{}}
}

// get returns the value under key when it is still fresh at now.
func (c *exchangeCache) get(key string, now time.Time) (secret.Value, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.byKey[key]
	if !ok {
		return "", false
	}
	e := el.Value.(*exchangeEntry)
	if !now.Before(e.fresh) {
		c.remove(el)
		return "", false
	}
	c.order.MoveToFront(el)
	return e.value, true
}

// put stores value under key for user until fresh, evicting user's least
// recently used entry when user holds perCaller, and the cache's when it
// holds max.
func (c *exchangeCache) put(key, user string, value secret.Value, fresh time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.byKey[key]; ok {
		c.remove(el)
	}
	if c.callers[user] >= c.perCaller {
		c.evictCaller(user)
	}
	if c.order.Len() >= c.max {
		c.remove(c.order.Back())
	}
	c.byKey[key] = c.order.PushFront(&exchangeEntry{key: key, user: user, value: value, fresh: fresh})
	c.callers[user]++
}

// evictCaller removes user's least recently used entry.
func (c *exchangeCache) evictCaller(user string) {
	for el := c.order.Back(); el != nil; el = el.Prev() {
		if el.Value.(*exchangeEntry).user == user {
			c.remove(el)
			return
		}
	}
}

// dropValue removes the entry whose value is v and reports whether there was one.
func (c *exchangeCache) dropValue(v string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for el := c.order.Front(); el != nil; el = el.Next() {
		if el.Value.(*exchangeEntry).value.Reveal() == v {
			c.remove(el)
			return true
		}
	}
	return false
}

// len returns the number of entries.
func (c *exchangeCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len()
}

// remove deletes el; c.mu is held.
func (c *exchangeCache) remove(el *list.Element) {
	e := c.order.Remove(el).(*exchangeEntry)
	delete(c.byKey, e.key)
	if c.callers[e.user]--; c.callers[e.user] <= 0 {
		delete(c.callers, e.user)
	}
}
