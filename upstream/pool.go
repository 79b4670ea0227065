package upstream

import (
	"container/list"
	"context"
	"sync"
	"time"
)

// pool holds call sessions by Key with an LRU cap and an idle timeout.
// Creation is single-flight per key.
type pool struct {
	u    *Upstream
	max  int
	idle time.Duration

	mu      sync.Mutex
	entries map[Key]*list.Element // of *entry
	lru     list.List             // front = most recently used
}

type entry struct {
	key      Key
	ready    chan struct{} // closed when c or err is set
	c        *conn
	err      error
	inflight int
	lastUsed time.Time
}

func newPool(u *Upstream, max int, idle time.Duration) *pool {
	return &pool{u: u, max: max, idle: idle, entries: make(map[Key]*list.Element)}
}

func (p *pool) size() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.entries)
}

// get returns a live session for key, dialing one if needed. The caller
// must hand it back with release or drop.
func (p *pool) get(ctx context.Context, key Key) (*conn, error) {
	for {
		p.mu.Lock()
		el, ok := p.entries[key]
		if !ok {
			e := &entry{key: key, ready: make(chan struct{}), inflight: 1, lastUsed: time.Now()}
			p.entries[key] = p.lru.PushFront(e)
			evicted := p.evictLocked()
			p.mu.Unlock()
			closeAll(evicted)
			c, err := p.u.dial(ctx, key, false)
			p.mu.Lock()
			e.c, e.err = c, err
			if err != nil {
				p.removeLocked(e)
			}
			close(e.ready)
			p.mu.Unlock()
			return c, err
		}
		e := el.Value.(*entry)
		e.inflight++
		e.lastUsed = time.Now()
		p.lru.MoveToFront(el)
		p.mu.Unlock()
		select {
		case <-e.ready:
		case <-ctx.Done():
			p.release(key, nil)
			return nil, ctx.Err()
		}
		if e.err != nil {
			return nil, e.err
		}
		if e.c.alive() {
			return e.c, nil
		}
		p.drop(key, e.c) // dead: replace it
	}
}

// release hands a session back after a call.
func (p *pool) release(key Key, c *conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if el, ok := p.entries[key]; ok {
		e := el.Value.(*entry)
		if c == nil || e.c == c {
			e.inflight--
			e.lastUsed = time.Now()
		}
	}
}

// drop removes and closes a broken session so the next call reconnects.
func (p *pool) drop(key Key, c *conn) {
	p.mu.Lock()
	if el, ok := p.entries[key]; ok && el.Value.(*entry).c == c {
		p.removeLocked(el.Value.(*entry))
	}
	p.mu.Unlock()
	go c.close()
}

func (p *pool) removeLocked(e *entry) {
	if el, ok := p.entries[e.key]; ok && el.Value.(*entry) == e {
		p.lru.Remove(el)
		delete(p.entries, e.key)
	}
}

// evictLocked removes least recently used ready sessions above the cap.
func (p *pool) evictLocked() []*conn {
	var out []*conn
	for el := p.lru.Back(); el != nil && len(p.entries) > p.max; {
		prev := el.Prev()
		e := el.Value.(*entry)
		select {
		case <-e.ready:
			if e.c != nil {
				out = append(out, e.c)
			}
			p.removeLocked(e)
		default:
		}
		el = prev
	}
	return out
}

// closeWhere closes every session whose key matches.
func (p *pool) closeWhere(match func(Key) bool) {
	p.mu.Lock()
	var out []*conn
	for k, el := range p.entries {
		e := el.Value.(*entry)
		if !match(k) {
			continue
		}
		select {
		case <-e.ready:
			if e.c != nil {
				out = append(out, e.c)
			}
			p.removeLocked(e)
		default:
		}
	}
	p.mu.Unlock()
	closeAllWait(out)
}

// reap closes sessions idle for longer than the idle timeout.
func (p *pool) reap(ctx context.Context) {
	t := time.NewTicker(max(p.idle/4, 50*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			p.mu.Lock()
			var out []*conn
			for el := p.lru.Back(); el != nil; {
				prev := el.Prev()
				e := el.Value.(*entry)
				if e.inflight <= 0 && e.c != nil && now.Sub(e.lastUsed) > p.idle {
					out = append(out, e.c)
					p.removeLocked(e)
				}
				el = prev
			}
			p.mu.Unlock()
			closeAll(out)
		}
	}
}

func closeAll(cs []*conn) {
	for _, c := range cs {
		go c.close()
	}
}

func closeAllWait(cs []*conn) {
	var wg sync.WaitGroup
	for _, c := range cs {
		wg.Go(c.close)
	}
	wg.Wait()
}
