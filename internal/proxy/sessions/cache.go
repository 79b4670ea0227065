package sessions

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcp-mux/mcp-mux/internal/proxy/callpath"
	"github.com/mcp-mux/mcp-mux/internal/sessionstore"
)

// cache is what the table keeps under one lock: the sessions built here,
// the reads of records in flight (one per id, shared by the requests that
// wait for it) and the sessions this replica holds (holder.go).
type cache struct {
	mu    sync.RWMutex
	byID  map[string]*entry
	loads map[string]*recordLoad
	held  map[string]bool
}

// entry is a session as the table keeps it: the callpath.Session the
// call path serves it with, and what only the table reads.
type entry struct {
	st *callpath.Session
	// rev is the revision of the session's record applied here last (a
	// change older than it is not applied).
	rev     atomic.Uint64
	started time.Time    // when this replica built it
	streams atomic.Int32 // its open GET streams here
}

// openStream records an open GET stream of e until the returned function
// is called.
func (e *entry) openStream() func() {
	e.streams.Add(1)
	return func() { e.streams.Add(-1); e.st.Touch() }
}

// recordLoad is one read of a record that concurrent requests share.
type recordLoad struct {
	done chan struct{}
	e    *entry
	err  error
	// latest is what changes another replica announced while the record
	// was being read (under cache.mu): applied after; reread says one did
	// not carry what changed.
	latest *sessionstore.Record
	reread bool
	// ended is set (under cache.mu) when the session ended while its
	// record was being read: the load registers nothing.
	ended bool
}

// note keeps a change announced while the record is being read (under
// cache.mu): the newest fields and everything the lists gained; a change
// too large for its notice (nil) has the record read again.
func (l *recordLoad) note(c *sessionstore.Record) {
	if c == nil {
		c = &sessionstore.Record{} // Rev 0: no fields, and a reread
		l.reread = true
	}
	if l.latest == nil {
		l.latest = c.Clone()
		return
	}
	merged := c.Clone()
	if l.latest.Rev > c.Rev {
		merged = l.latest.Clone()
	}
	merged.Threads = append(l.latest.Threads, c.Threads...)
	merged.Promoted = append(l.latest.Promoted, c.Promoted...)
	l.latest = merged
}

func (c *cache) get(id string) *entry {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.byID[id]
}

func (c *cache) count() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.byID)
}

func (c *cache) all() []*entry {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := make([]*entry, 0, len(c.byID))
	for _, e := range c.byID {
		out = append(out, e)
	}
	return out
}

// entryOf returns the entry of st: the cache's, or, for a session let go
// of meanwhile, one of its own.
func (c *cache) entryOf(st *callpath.Session) *entry {
	if e := c.get(st.ID); e != nil && e.st == st {
		return e
	}
	return &entry{st: st}
}

// put registers st unless another request registered it first (then that
// one stays).
func (c *cache) put(e *entry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byID == nil {
		c.byID = make(map[string]*entry)
	}
	if c.byID[e.st.ID] == nil {
		c.byID[e.st.ID] = e
	}
}

// take unregisters the session id (nil if there was none).
func (c *cache) take(id string) *entry {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.byID[id]
	delete(c.byID, id)
	delete(c.held, id)
	return e
}

// join returns the session id when it is here, or else the read of its
// record in flight, which the caller starts (first) when there was none.
func (c *cache) join(id string) (e *entry, l *recordLoad, first bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.byID[id]; e != nil {
		return e, nil, false
	}
	if c.loads == nil {
		c.loads = make(map[string]*recordLoad)
	}
	if l := c.loads[id]; l != nil {
		return nil, l, false
	}
	l = &recordLoad{done: make(chan struct{})}
	c.loads[id] = l
	return nil, l, true
}

// abandon ends the read of id in flight that failed.
func (c *cache) abandon(id string) {
	c.mu.Lock()
	delete(c.loads, id)
	c.mu.Unlock()
}

// finish ends the read l of id in flight: it returns the session now
// registered and what l learned meanwhile.
func (c *cache) finish(id string, l *recordLoad) (e *entry, latest *sessionstore.Record, ended, reread bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.loads, id)
	return c.byID[id], l.latest, l.ended, l.reread
}

// changed returns the session id, or notes a change rec of it (an end
// when ended) on the read of its record in flight.
func (c *cache) changed(id string, rec *sessionstore.Record, ended bool) *entry {
	c.mu.Lock()
	defer c.mu.Unlock()
	l := c.loads[id]
	if ended {
		if l != nil {
			l.ended = true
		}
		return nil
	}
	e := c.byID[id]
	if e == nil && l != nil {
		l.note(rec) // being read: applied once it is (load)
	}
	return e
}

// hold marks the session id held here and reports whether it was.
func (c *cache) hold(id string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.held == nil {
		c.held = make(map[string]bool)
	}
	was := c.held[id]
	c.held[id] = true
	return was
}

// unhold marks the session id no longer held here.
func (c *cache) unhold(id string) {
	c.mu.Lock()
	delete(c.held, id)
	c.mu.Unlock()
}

// holding returns the sessions this replica holds.
func (c *cache) holding() []*entry {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := make([]*entry, 0, len(c.held))
	for id := range c.held {
		if e := c.byID[id]; e != nil {
			out = append(out, e)
		}
	}
	return out
}
