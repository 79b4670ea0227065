package upstream

import (
	"container/list"
	"context"
	"errors"
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
	closed  bool                  // set by shutdown: no new sessions
	dials   sync.WaitGroup        // sessions being dialed
}

// errClosed is returned for calls on a closed Upstream.
var errClosed = errors.New("upstream is closed")

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
		if p.closed {
			p.mu.Unlock()
			return nil, errClosed
		}
		el, ok := p.entries[key]
		if !ok {
			e := &entry{key: key, ready: make(chan struct{}), inflight: 1, lastUsed: time.Now()}
			p.entries[key] = p.lru.PushFront(e)
			evicted := p.evictLocked()
			p.dials.Add(1)
			p.mu.Unlock()
			p.closeAll(evicted)
			return p.dial(ctx, e)
		}
		e := el.Value.(*entry)
		e.inflight++
		e.lastUsed = time.Now()
		p.lru.MoveToFront(el)
		p.mu.Unlock()
		select {
		case <-e.ready:
		case <-ctx.Done():
			p.mu.Lock()
			e.inflight-- // e itself: the key may hold a newer entry by now
			p.mu.Unlock()
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

// dial brings up the session of the new entry e, which get added.
// Upstream.Close aborts the dial and waits for it.
func (p *pool) dial(ctx context.Context, e *entry) (*conn, error) {
	defer p.dials.Done()
	ctx, cancel := context.WithCancel(ctx)
	unwatch := context.AfterFunc(p.u.ctx, cancel)
	c, err := p.u.dial(ctx, e.key, false)
	unwatch()
	cancel()
	p.mu.Lock()
	var late *conn
	if err == nil && p.closed {
		late, c, err = c, nil, errClosed
	}
	e.c, e.err = c, err
	if err != nil {
		p.removeLocked(e)
	}
	close(e.ready)
	p.mu.Unlock()
	if late != nil {
		late.close()
	}
	return c, err
}

// peek returns the ready session for key without creating one.
func (p *pool) peek(key Key) *conn {
	p.mu.Lock()
	defer p.mu.Unlock()
	el, ok := p.entries[key]
	if !ok {
		return nil
	}
	e := el.Value.(*entry)
	select {
	case <-e.ready:
		return e.c
	default:
		return nil
	}
}

// release hands a session back after a call.
func (p *pool) release(key Key, c *conn) {
	p.mu.Lock()
	var evicted []*conn
	if el, ok := p.entries[key]; ok {
		e := el.Value.(*entry)
		if c == nil || e.c == c {
			e.inflight--
			e.lastUsed = time.Now()
			// Sessions kept over the cap while busy can go now.
			evicted = p.evictLocked()
		}
	}
	p.mu.Unlock()
	p.closeAll(evicted)
}

// drop removes and closes a broken session so the next call reconnects.
func (p *pool) drop(key Key, c *conn) {
	p.mu.Lock()
	if el, ok := p.entries[key]; ok && el.Value.(*entry).c == c {
		p.removeLocked(el.Value.(*entry))
	}
	p.mu.Unlock()
	p.u.async.Go(c.close)
}

func (p *pool) removeLocked(e *entry) {
	if el, ok := p.entries[e.key]; ok && el.Value.(*entry) == e {
		p.lru.Remove(el)
		delete(p.entries, e.key)
	}
}

// evictLocked removes least recently used idle sessions above the cap. A
// session with a call in flight is not evicted (that would fail the call), so
// the pool can exceed the cap while more than max sessions are busy.
func (p *pool) evictLocked() []*conn {
	var out []*conn
	for el := p.lru.Back(); el != nil && len(p.entries) > p.max; {
		prev := el.Prev()
		e := el.Value.(*entry)
		if e.inflight > 0 {
			el = prev
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

// shutdown closes every session, refuses new ones and waits for dials in
// progress (Upstream.Close has cancelled them) to end.
func (p *pool) shutdown() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.closeWhere(func(Key) bool { return true })
	p.dials.Wait()
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
			p.closeAll(out)
		}
	}
}

// closeAll closes sessions in the background; Upstream.Close waits for them.
func (p *pool) closeAll(cs []*conn) {
	for _, c := range cs {
		p.u.async.Go(c.close)
	}
}

func closeAllWait(cs []*conn) {
	var wg sync.WaitGroup
	for _, c := range cs {
		wg.Go(c.close)
	}
	wg.Wait()
}
