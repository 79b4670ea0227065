package callpath

import (
	"sync"
	"sync/atomic"
)

// Life orders the calls in flight against shutdown: a call begins only
// until Close has begun, and Close can wait for those that did.
type Life struct {
	mu       sync.RWMutex // calls (and Shared) only exclude Close, not each other
	closed   atomic.Bool
	inflight sync.WaitGroup
}

// Begin counts a call in flight for Wait to drain, unless Close has begun:
// under the lock, so that no Add races Close's Wait.
func (l *Life) Begin() bool {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed.Load() {
		return false
	}
	l.inflight.Add(1)
	return true
}

// Done ends a call counted by Begin.
func (l *Life) Done() { l.inflight.Done() }

// Close refuses every later Begin, Shared and Exclusive.
func (l *Life) Close() {
	l.mu.Lock()
	l.closed.Store(true)
	l.mu.Unlock()
}

// Closed reports whether Close has begun.
func (l *Life) Closed() bool { return l.closed.Load() }

// Wait waits for the calls in flight.
func (l *Life) Wait() { l.inflight.Wait() }

// Shared runs fn unless Close has begun, ordered before Close but not
// against calls, and reports whether it ran.
func (l *Life) Shared(fn func()) bool {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed.Load() {
		return false
	}
	fn()
	return true
}

// Exclusive runs fn unless Close has begun, excluding calls beginning
// meanwhile, and reports whether it ran.
func (l *Life) Exclusive(fn func()) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed.Load() {
		return false
	}
	fn()
	return true
}
