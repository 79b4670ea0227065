package upstream

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// pool holds call sessions by Key with a hard cap and an idle timeout.
// Creation is single-flight per key.
//
// The cap counts every session that holds a slot: ready ones, ones being
// dialed, and ones still closing (a stdio process that has not exited yet).
// A caller that needs a new session while all slots are taken evicts the
// least recently used idle session, or, when every session is busy, waits
// for one to become idle (bounded by its context: CallTimeout or the
// caller's own deadline). So max is also the bound on stdio processes.
type pool struct {
	u    *Upstream
	max  int
	idle time.Duration

	mu      sync.Mutex
	entries map[Key]*list.Element // of *entry
	lru     list.List             // front = most recently used
	closing int                   // sessions removed but not yet closed; they keep their slot
	freed   chan struct{}         // closed (and replaced) when a slot may have become free
	closed  bool                  // set by shutdown: no new sessions
	dials   sync.WaitGroup        // sessions being dialed
}

// errClosed is returned for calls on a closed Upstream.
var errClosed = errors.New("upstream is closed")

// errAllBusy marks a caller that gave up waiting for a session slot.
var errAllBusy = errors.New("every pooled session is busy")

type entry struct {
	key      Key
	ready    chan struct{} // closed when c or err is set
	c        *conn
	err      error
	inflight int
	lastUsed time.Time
}

func newPool(u *Upstream, max int, idle time.Duration) *pool {
	return &pool{u: u, max: max, idle: idle, entries: make(map[Key]*list.Element), freed: make(chan struct{})}
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
		if el, ok := p.entries[key]; ok {
			c, again, err := p.join(ctx, key, el)
			if !again {
				return c, err
			}
			continue
		}
		if len(p.entries)+p.closing < p.max {
			return p.open(ctx, key)
		}
		if err := p.waitFree(ctx); err != nil {
			return nil, err
		}
	}
}

// join takes a call slot on the session of el, once it is up. again
// reports a session that turned out dead (it is dropped): the caller looks
// again. Called with p.mu held; releases it.
func (p *pool) join(ctx context.Context, key Key, el *list.Element) (_ *conn, again bool, _ error) {
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
		if e.inflight == 0 {
			p.signalLocked()
		}
		p.mu.Unlock()
		return nil, false, ctx.Err()
	}
	if e.err != nil {
		return nil, false, e.err
	}
	if e.c.alive() {
		return e.c, false, nil
	}
	p.drop(key, e.c) // dead: replace it
	return nil, true, nil
}

// open adds the entry of a new session for key and dials it. Called with
// p.mu held; releases it.
func (p *pool) open(ctx context.Context, key Key) (*conn, error) {
	e := &entry{key: key, ready: make(chan struct{}), inflight: 1, lastUsed: time.Now()}
	p.entries[key] = p.lru.PushFront(e)
	p.dials.Add(1)
	p.mu.Unlock()
	return p.dial(ctx, e)
}

// waitFree makes room when every slot is taken: it retires the least
// recently used idle session, if any, and waits until a slot may be free
// (nil: look again) or ctx is done. Called with p.mu held; releases it.
func (p *pool) waitFree(ctx context.Context) error {
	if victim := p.idleVictimLocked(); victim != nil {
		p.retireLocked(victim)
	}
	wait := p.freed
	p.mu.Unlock()
	select {
	case <-wait:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%w (max_sessions %d): %w", errAllBusy, p.max, ctx.Err())
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
	if el, ok := p.entries[key]; ok {
		e := el.Value.(*entry)
		if c == nil || e.c == c {
			e.inflight--
			e.lastUsed = time.Now()
			if e.inflight == 0 {
				p.signalLocked() // a waiter may evict it now
			}
		}
	}
	p.mu.Unlock()
}

// drop removes and closes a broken session so the next call reconnects.
func (p *pool) drop(key Key, c *conn) {
	p.mu.Lock()
	if el, ok := p.entries[key]; ok && el.Value.(*entry).c == c {
		p.removeLocked(el.Value.(*entry))
	}
	p.closing++
	p.mu.Unlock()
	p.u.async.Go(func() { p.closeSlot(c) })
}

func (p *pool) removeLocked(e *entry) {
	if el, ok := p.entries[e.key]; ok && el.Value.(*entry) == e {
		p.lru.Remove(el)
		delete(p.entries, e.key)
		p.signalLocked()
	}
}

// signalLocked wakes every caller waiting for a slot.
func (p *pool) signalLocked() {
	close(p.freed)
	p.freed = make(chan struct{})
}

// idleVictimLocked returns the least recently used ready session with no
// call in flight, or nil.
func (p *pool) idleVictimLocked() *entry {
	for el := p.lru.Back(); el != nil; el = el.Prev() {
		e := el.Value.(*entry)
		if e.inflight > 0 {
			continue
		}
		select {
		case <-e.ready:
			return e
		default:
		}
	}
	return nil
}

// retireLocked removes e and closes its session in the background; the
// session keeps its slot until it is closed.
func (p *pool) retireLocked(e *entry) {
	p.removeLocked(e)
	if e.c == nil {
		return
	}
	p.closing++
	c := e.c
	p.u.async.Go(func() { p.closeSlot(c) })
}

// closeSlot closes c and frees the slot it held.
func (p *pool) closeSlot(c *conn) {
	c.close()
	p.mu.Lock()
	p.closing--
	p.signalLocked()
	p.mu.Unlock()
}

// closeWhere closes every ready session whose key matches and waits for them.
func (p *pool) closeWhere(match func(Key) bool) { p.close(match, false) }

// closeIdleWhere is closeWhere for the sessions without a call in flight.
func (p *pool) closeIdleWhere(match func(Key) bool) { p.close(match, true) }

// close closes the ready sessions whose key matches (only those without a
// call in flight when idleOnly) and waits for them.
func (p *pool) close(match func(Key) bool, idleOnly bool) {
	p.mu.Lock()
	var out []*conn
	for k, el := range p.entries {
		e := el.Value.(*entry)
		if !match(k) || idleOnly && e.inflight > 0 {
			continue
		}
		select {
		case <-e.ready:
			if e.c != nil {
				out = append(out, e.c)
				p.closing++
			}
			p.removeLocked(e)
		default:
		}
	}
	p.mu.Unlock()
	var wg sync.WaitGroup
	for _, c := range out {
		wg.Go(func() { p.closeSlot(c) })
	}
	wg.Wait()
}

// shutdown closes every session, refuses new ones and waits for dials in
// progress (Upstream.Close has cancelled them) to end.
func (p *pool) shutdown() {
	p.mu.Lock()
	p.closed = true
	p.signalLocked() // waiters see closed
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
			p.sweep(now)
		}
	}
}

// sweep retires the ready sessions without a call in flight that were
// last used more than the idle timeout before now.
func (p *pool) sweep(now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for el := p.lru.Back(); el != nil; {
		prev := el.Prev()
		e := el.Value.(*entry)
		if e.inflight <= 0 && e.c != nil && now.Sub(e.lastUsed) > p.idle {
			p.retireLocked(e)
		}
		el = prev
	}
}
