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
// those a Follow replays, then each new one. Its reader takes them with
// Next when Notify's function says there may be some: an idle follower
// holds no buffer and needs no goroutine of its reader's.
type Follower struct {
	done  chan struct{}
	once  sync.Once
	close func()
	nonce string

	mu        sync.Mutex
	queue     []Event // delivered, not yet taken (Next)
	notify    func()  // called when an event is queued or the follower ends
	last      position
	replaying bool
	pending   []Event // live events that arrived during the replay
	overflow  atomic.Bool
}

var primeSeq atomic.Uint64

// newFollower returns a follower that buffers what it is offered until
// replayed; begin sets where it starts.
func newFollower(close func()) *Follower {
	return &Follower{done: make(chan struct{}), close: close, replaying: true,
		nonce: strconv.FormatUint(primeSeq.Add(1), 36)}
}

// begin sets the position the follower starts after.
func (f *Follower) begin(p position) {
	f.mu.Lock()
	f.last = p
	f.mu.Unlock()
}

// Notify sets fn, called (without blocking, perhaps with the follower's
// lock held: fn must not call into it) whenever an event is queued and
// when the follower ends. Set it before taking the first event with Next.
func (f *Follower) Notify(fn func()) {
	f.mu.Lock()
	f.notify = fn
	f.mu.Unlock()
}

// Next takes the oldest event delivered and not yet taken; false when
// there is none now. Events queued before the follower ended are taken
// after it ended too.
func (f *Follower) Next() (Event, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.queue) == 0 {
		return Event{}, false
	}
	e := f.queue[0]
	f.queue[0] = Event{}
	if f.queue = f.queue[1:]; len(f.queue) == 0 {
		f.queue = nil // an idle follower keeps no buffer
	}
	return e, true
}

// Len is how many events are delivered and not yet taken.
func (f *Follower) Len() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.queue)
}

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
		f.mu.Lock()
		fn := f.notify
		f.mu.Unlock()
		if fn != nil {
			fn()
		}
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
	if len(f.queue) >= followBuffer {
		f.overflowLocked()
		return
	}
	f.queue = append(f.queue, e)
	f.last = p
	if f.notify != nil {
		f.notify()
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
