package sessionstore

import (
	"strconv"
	"sync"
	"sync/atomic"
)

// followBuffer bounds the events a follower holds for a slow reader; past
// it the follower ends (its GET stream closes and the client resumes from
// the log with Last-Event-ID).
const followBuffer = 256

// Follower delivers one session's log events in order, each once: first
// those a Follow replays, then each new one.
type Follower struct {
	c     chan Event
	done  chan struct{}
	once  sync.Once
	close func()
	nonce string

	mu        sync.Mutex
	last      position
	replaying bool
	pending   []Event // live events that arrived during the replay
	overflow  atomic.Bool
}

var primeSeq atomic.Uint64

// newFollower returns a follower that buffers what it is offered until
// replayed; begin sets where it starts.
func newFollower(close func()) *Follower {
	return &Follower{c: make(chan Event, followBuffer), done: make(chan struct{}), close: close, replaying: true,
		nonce: strconv.FormatUint(primeSeq.Add(1), 36)}
}

// begin sets the position the follower starts after.
func (f *Follower) begin(p position) {
	f.mu.Lock()
	f.last = p
	f.mu.Unlock()
}

// Events delivers the events; Done tells when no more will come.
func (f *Follower) Events() <-chan Event { return f.c }

// Done is closed when the follower ended (Close, or a reader too slow).
func (f *Follower) Done() <-chan struct{} { return f.done }

// Prime is the id of a priming event for a GET stream: a client that
// resumes with it misses nothing logged after the last event delivered
// (or, before any, after the follower started).
func (f *Follower) Prime() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	// The priming id differs at every open (the nonce), so a client counts
	// a reconnection as progress (go-sdk gives up after retries without).
	return f.last.String() + "_" + f.nonce
}

// Overflowed reports whether the follower ended because its reader fell
// behind.
func (f *Follower) Overflowed() bool { return f.overflow.Load() }

// Close ends the follower.
func (f *Follower) Close() {
	f.once.Do(func() {
		f.close()
		close(f.done)
	})
}

// offer delivers a live event (ignored when already delivered).
func (f *Follower) offer(e Event) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.replaying {
		f.pending = append(f.pending, e)
		if len(f.pending) > followBuffer {
			f.overflowLocked()
		}
		return
	}
	f.sendLocked(e)
}

// replayed delivers the replay's events, then those that arrived meanwhile.
func (f *Follower) replayed(events []Event) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, e := range events {
		f.sendLocked(e)
	}
	for _, e := range f.pending {
		f.sendLocked(e)
	}
	f.pending, f.replaying = nil, false
}

// sendLocked delivers e if it is newer than the last delivered; f.mu is held.
func (f *Follower) sendLocked(e Event) {
	p, ok := parsePosition(e.ID)
	if !ok || !p.after(f.last) {
		return
	}
	select {
	case <-f.done:
		return
	default:
	}
	select {
	case f.c <- e:
		f.last = p
	default:
		f.overflowLocked()
	}
}

// overflowLocked ends a follower whose reader fell behind.
func (f *Follower) overflowLocked() {
	if f.overflow.Swap(true) {
		return
	}
	go f.Close() // not under f.mu: close takes the store's lock
}

// lastDelivered returns the position of the last event delivered.
func (f *Follower) lastDelivered() position {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.last
}

// followers are the local followers of each session.
type followers struct {
	mu sync.Mutex
	m  map[string]map[*Follower]bool
}

func (t *followers) add(id string, f *Follower) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m == nil {
		t.m = make(map[string]map[*Follower]bool)
	}
	if t.m[id] == nil {
		t.m[id] = make(map[*Follower]bool)
	}
	t.m[id][f] = true
}

func (t *followers) remove(id string, f *Follower) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.m[id], f)
	if len(t.m[id]) == 0 {
		delete(t.m, id)
	}
}

// of returns the followers of id.
func (t *followers) of(id string) []*Follower {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]*Follower, 0, len(t.m[id]))
	for f := range t.m[id] {
		out = append(out, f)
	}
	return out
}

// all returns every follower with its session id.
func (t *followers) all() map[*Follower]string {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make(map[*Follower]string)
	for id, fs := range t.m {
		for f := range fs {
			out[f] = id
		}
	}
	return out
}

// deliver offers e to id's followers.
func (t *followers) deliver(id string, e Event) {
	for _, f := range t.of(id) {
		f.offer(e)
	}
}

// end closes id's followers (the session ended).
func (t *followers) end(id string) {
	for _, f := range t.of(id) {
		f.Close()
	}
}
