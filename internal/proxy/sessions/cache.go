package sessions

import (
	"sync"

	"github.com/mcp-mux/mcp-mux/internal/proxy/callpath"
	"github.com/mcp-mux/mcp-mux/internal/sessionstore"
)

// cache is what the table keeps under one lock: the sessions built here,
// the reads of records in flight (one per id, shared by the requests that
// wait for it) and the sessions this replica holds (holder.go).
type cache struct {
	mu    sync.RWMutex
	byID  map[string]*callpath.Session
	loads map[string]*recordLoad
	held  map[string]bool
}

// recordLoad is one read of a record that concurrent requests share.
type recordLoad struct {
	done chan struct{}
	st   *callpath.Session
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

func (c *cache) get(id string) *callpath.Session {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.byID[id]
}

func (c *cache) count() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.byID)
}

func (c *cache) all() []*callpath.Session {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := make([]*callpath.Session, 0, len(c.byID))
	for _, st := range c.byID {
		out = append(out, st)
	}
	return out
}

// put registers st unless another request registered it first (then that
// one stays).
func (c *cache) put(st *callpath.Session) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byID == nil {
		c.byID = make(map[string]*callpath.Session)
	}
	if c.byID[st.ID] == nil {
		c.byID[st.ID] = st
	}
}

// take unregisters the session id (nil if there was none).
func (c *cache) take(id string) *callpath.Session {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.byID[id]
	delete(c.byID, id)
	delete(c.held, id)
	return st
}

// join returns the session id when it is here, or else the read of its
// record in flight, which the caller starts (first) when there was none.
func (c *cache) join(id string) (st *callpath.Session, l *recordLoad, first bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if st := c.byID[id]; st != nil {
		return st, nil, false
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
func (c *cache) finish(id string, l *recordLoad) (st *callpath.Session, latest *sessionstore.Record, ended, reread bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.loads, id)
	return c.byID[id], l.latest, l.ended, l.reread
}

// changed returns the session id, or notes a change rec of it (an end
// when ended) on the read of its record in flight.
func (c *cache) changed(id string, rec *sessionstore.Record, ended bool) *callpath.Session {
	c.mu.Lock()
	defer c.mu.Unlock()
	l := c.loads[id]
	if ended {
		if l != nil {
			l.ended = true
		}
		return nil
	}
	st := c.byID[id]
	if st == nil && l != nil {
		l.note(rec) // being read: applied once it is (load)
	}
	return st
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
func (c *cache) holding() []*callpath.Session {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := make([]*callpath.Session, 0, len(c.held))
	for id := range c.held {
		if st := c.byID[id]; st != nil {
			out = append(out, st)
		}
	}
	return out
}
