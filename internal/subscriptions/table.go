package subscriptions

import (
	"cmp"
	"context"
	"errors"
	"sync"
	"time"
)

// table is one upstream server's subscribed URIs.
type table struct {
	mu                 sync.Mutex
	uris               map[string]*entry
	unsubscribeTimeout time.Duration // Options.UnsubscribeTimeout
}

// entry is one URI: the holders holding it and the upstream's state.
type entry struct {
	holders map[*Holder]struct{}
	on      Upstream // the upstream that holds the subscription; nil: none
	// stale may hold it: its subscribe was cancelled in flight, after the
	// request may have reached it. It is unsubscribed once nobody holds the URI.
	stale Upstream
	op    *trip // the round trip in flight; nil: none
}

// trip is one upstream subscribe or unsubscribe.
type trip struct {
	on   bool
	done chan struct{} // closed when it ended; err is set by then
	err  error
}

// failsWaiters reports whether a subscribe that ended fails those waiting
// for it: it failed, and not because its own caller went away (the next
// waiter then asks again).
func (op *trip) failsWaiters() bool {
	return op.on && op.err != nil && !errors.Is(op.err, context.Canceled) && !errors.Is(op.err, context.DeadlineExceeded)
}

// hold marks uri subscribed for h and counts h as its holder in t.
// wait: the caller waits for the upstream (await); added: this call made
// the hold (a holder holds a URI once, however often it subscribes). A
// holder holding the URI on another server's table has nothing to wait
// for. Past MaxPerHolder it is refused.
func (t *table) hold(h *Holder, uri string) (wait, added bool, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.uris[uri]
	if h.uris[uri] {
		_, here := e.heldBy(h)
		return here, false, nil
	}
	if err := h.take(uri); err != nil {
		return false, false, err
	}
	if e == nil {
		e = &entry{holders: make(map[*Holder]struct{})}
		t.uris[uri] = e
	}
	e.holders[h] = struct{}{}
	return true, true, nil
}

// heldBy reports whether h holds e (a nil e has no holders).
func (e *entry) heldBy(h *Holder) (*entry, bool) {
	if e == nil {
		return nil, false
	}
	_, ok := e.holders[h]
	return e, ok
}

// drop removes h from uri's holders; true when h was one. The caller
// settles the entry after letting go of h.mu.
func (t *table) drop(h *Holder, uri string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	e, ok := t.uris[uri].heldBy(h)
	if ok {
		delete(e.holders, h)
	}
	return ok
}

// await returns once up holds uri while h holds it: at once when it does,
// after the round trip in flight, or after subscribing itself when none
// is. A subscribe that failed fails its waiters too, unless it failed
// because its own caller went away (the next waiter then asks again).
func (t *table) await(ctx context.Context, h *Holder, up Upstream, uri string) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	for {
		e, ok := t.uris[uri].heldBy(h)
		var done bool
		var err error
		switch {
		case !ok:
			return errHoldLost
		case e.on == up && e.op == nil:
			return nil
		case e.op != nil:
			done, err = t.wait(ctx, e.op)
		default:
			err = t.subscribe(ctx, e, up, uri)
			done = err != nil
		}
		if done {
			return err
		}
	}
}

// wait waits, with t.mu released, for op to end; done when the waiter is
// done: its ctx ended, or op failed in a way that fails its waiters. Called
// and returns with t.mu held.
func (t *table) wait(ctx context.Context, op *trip) (done bool, err error) {
	t.mu.Unlock()
	select {
	case <-op.done:
	case <-ctx.Done():
		t.mu.Lock()
		return true, ctx.Err()
	}
	t.mu.Lock()
	if op.failsWaiters() {
		return true, op.err
	}
	return false, nil
}

// subscribe asks up to subscribe to uri, e's, idle, and settles e after:
// the error is the subscribe's, else the settling unsubscribe's. Called
// and returns with t.mu held.
func (t *table) subscribe(ctx context.Context, e *entry, up Upstream, uri string) error {
	err := t.roundTrip(ctx, e, up, uri, true)
	settleErr := t.settleLocked(ctx, uri, e)
	if err != nil {
		return err
	}
	return settleErr
}

// roundTrip asks up to subscribe to (on) or unsubscribe from uri, with
// t.mu released for the duration; e is the URI's entry, idle. Called and
// returns with t.mu held.
func (t *table) roundTrip(ctx context.Context, e *entry, up Upstream, uri string, on bool) error {
	op := &trip{on: on, done: make(chan struct{})}
	e.op = op
	t.mu.Unlock()
	op.err = up.Subscribe(ctx, uri, on)
	t.mu.Lock()
	e.op = nil
	switch {
	case !on:
		e.on, e.stale = nil, nil // the upstream forgets it either way (Upstream.Subscribe)
	case op.err == nil:
		e.on, e.stale = up, nil
	case errors.Is(op.err, context.Canceled) || errors.Is(op.err, context.DeadlineExceeded):
		e.stale = up
	}
	close(op.done)
	return op.err
}

// settle settles uri's entry, if any (settleLocked).
func (t *table) settle(ctx context.Context, uri string) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e := t.uris[uri]; e != nil {
		return t.settleLocked(ctx, uri, e)
	}
	return nil
}

// settleLocked unsubscribes a URI nobody holds any more (from the upstream
// that holds it, or may), unless a round trip is in flight (its end
// settles), and forgets an idle entry without holders. Called and returns
// with t.mu held; the unsubscribe is bounded by unsubscribeTimeout whether
// or not ctx is done.
func (t *table) settleLocked(ctx context.Context, uri string, e *entry) error {
	var err error
	if up := cmp.Or(e.on, e.stale); len(e.holders) == 0 && e.op == nil && up != nil {
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), t.unsubscribeTimeout)
		err = t.roundTrip(uctx, e, up, uri, false)
		cancel()
	}
	if len(e.holders) == 0 && e.op == nil && e.on == nil && e.stale == nil && t.uris[uri] == e {
		delete(t.uris, uri)
	}
	return err
}
