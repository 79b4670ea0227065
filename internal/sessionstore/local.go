package sessionstore

import (
	"context"
	"encoding/json"
	"slices"
	"sync"
	"time"
)

// Local is the Store of one replica: records and logs in process memory.
// A record expires TTL after its last Touch; Sweep removes expired ones.
type Local struct {
	replica string
	follow  followers

	mu      sync.Mutex
	ttl     time.Duration
	m       map[string]*localEntry
	byUser  map[string]int
	logs    map[string]*localLog
	seq     uint64
	onMsg   func(Message)
	nowFunc func() time.Time
}

type localEntry struct {
	rec     *Record // never handed out: callers get clones
	expires time.Time
}

// localLog is a session's bounded event log.
type localLog struct {
	events []Event
}

var _ Store = (*Local)(nil)

// NewLocal returns an empty Local store.
func NewLocal(o Options) *Local {
	if o.Replica == "" {
		o.Replica = NewReplica()
	}
	return &Local{replica: o.Replica, ttl: o.TTL, m: map[string]*localEntry{}, byUser: map[string]int{},
		logs: map[string]*localLog{}, onMsg: o.OnMessage, nowFunc: time.Now}
}

// Replica names this process.
func (s *Local) Replica() string { return s.replica }

// SetTTL changes how long an unused record lives.
func (s *Local) SetTTL(d time.Duration) {
	s.mu.Lock()
	s.ttl = d
	s.mu.Unlock()
}

func (s *Local) expiry() time.Time {
	if s.ttl <= 0 {
		return time.Time{}
	}
	return s.nowFunc().Add(s.ttl)
}

// liveLocked returns the entry of id unless it expired; s.mu is held.
func (s *Local) liveLocked(id string) *localEntry {
	e := s.m[id]
	if e == nil {
		return nil
	}
	if !e.expires.IsZero() && s.nowFunc().After(e.expires) {
		s.dropLocked(id, e)
		return nil
	}
	return e
}

func (s *Local) dropLocked(id string, e *localEntry) {
	delete(s.m, id)
	delete(s.logs, id)
	if n := s.byUser[e.rec.User]; n > 1 {
		s.byUser[e.rec.User] = n - 1
	} else {
		delete(s.byUser, e.rec.User)
	}
}

// Create stores r unless the sessions, in all or of r.User, are at b.
func (s *Local) Create(_ context.Context, r *Record, b Bounds) error {
	if err := r.check(); err != nil {
		return err
	}
	rec := &Record{ID: r.ID, User: r.User, Profile: r.Profile, Protocol: r.Protocol, Level: r.Level, Holder: r.Holder,
		Init: append(json.RawMessage(nil), r.Init...)}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sweepLocked()
	switch {
	case b.Limit > 0 && len(s.m) >= b.Limit:
		return &LimitError{}
	case b.Share > 0 && s.byUser[r.User] >= b.Share:
		return &LimitError{Share: true}
	}
	s.m[r.ID] = &localEntry{rec: rec, expires: s.expiry()}
	s.byUser[r.User]++
	return nil
}

// Get returns the record of id.
func (s *Local) Get(_ context.Context, id string) (*Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := s.liveLocked(id); e != nil {
		return e.rec.Clone(), nil
	}
	return nil, ErrNotFound
}

// fields returns the fields of r, its lists aside.
func fields(r *Record) *Record {
	return &Record{ID: r.ID, User: r.User, Profile: r.Profile, Protocol: r.Protocol, Level: r.Level, Holder: r.Holder, Rev: r.Rev}
}

// Update applies fn to the fields of the record of id.
func (s *Local) Update(_ context.Context, id string, fn func(*Record) bool) (*Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.liveLocked(id)
	if e == nil {
		return nil, ErrNotFound
	}
	r := fields(e.rec)
	if !fn(r) {
		return r, nil
	}
	if err := r.check(); err != nil {
		return nil, err
	}
	r.Rev++
	e.rec.Protocol, e.rec.Level, e.rec.Holder, e.rec.Rev = r.Protocol, r.Level, r.Holder, r.Rev
	return r, nil
}

// Add adds values to the list l of id.
func (s *Local) Add(_ context.Context, id string, l List, values ...string) (*Record, int, error) {
	if err := l.check(values); err != nil {
		return nil, 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.liveLocked(id)
	if e == nil {
		return nil, 0, ErrNotFound
	}
	list := e.rec.list(l)
	added := l.add(list, values)
	if len(added) > 0 && l != ListSubs {
		e.rec.Rev++
	}
	return fields(e.rec), len(added), nil
}

// Remove removes value from the list l of id.
func (s *Local) Remove(_ context.Context, id string, l List, value string) (*Record, error) {
	if err := l.check([]string{value}); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.liveLocked(id)
	if e == nil {
		return nil, ErrNotFound
	}
	list := e.rec.list(l)
	*list = slices.DeleteFunc(*list, func(v string) bool { return v == value })
	return fields(e.rec), nil
}

// Revisions returns the revision of every live record of ids.
func (s *Local) Revisions(_ context.Context, ids []string) (map[string]uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]uint64, len(ids))
	for _, id := range ids {
		if e := s.liveLocked(id); e != nil {
			out[id] = e.rec.Rev
		}
	}
	return out, nil
}

// Delete removes the record and log of id and ends its followers.
func (s *Local) Delete(_ context.Context, id string) error {
	s.mu.Lock()
	if e := s.m[id]; e != nil {
		s.dropLocked(id, e)
	}
	s.mu.Unlock()
	s.follow.end(id)
	return nil
}

// Touch restarts the TTL of id.
func (s *Local) Touch(id, _ string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := s.liveLocked(id); e != nil {
		e.expires = s.expiry()
	}
}

// Count returns the number of live sessions.
func (s *Local) Count(context.Context) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sweepLocked()
	return len(s.m), nil
}

// Sweep removes expired records and returns their ids.
func (s *Local) Sweep() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sweepLocked()
}

func (s *Local) sweepLocked() []string {
	var gone []string
	now := s.nowFunc()
	for id, e := range s.m {
		if !e.expires.IsZero() && now.After(e.expires) {
			s.dropLocked(id, e)
			gone = append(gone, id)
		}
	}
	return gone
}

// Append adds msg to the log of id and hands it to its followers.
func (s *Local) Append(_ context.Context, id string, msg json.RawMessage) error {
	if len(msg) > MaxEvent {
		return ErrTooLarge
	}
	s.mu.Lock()
	if s.liveLocked(id) == nil {
		s.mu.Unlock()
		return ErrNotFound
	}
	l := s.logs[id]
	if l == nil {
		l = &localLog{}
		s.logs[id] = l
	}
	s.seq++
	e := Event{ID: position{seq: s.seq}.String(), Data: append(json.RawMessage(nil), msg...)}
	if len(l.events) >= MaxLogSize {
		l.events = append(l.events[:0], l.events[1:]...)
	}
	l.events = append(l.events, e)
	s.mu.Unlock()
	s.follow.deliver(id, e)
	return nil
}

// Follow returns a follower of id's log from after.
func (s *Local) Follow(_ context.Context, id, after string) (*Follower, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.liveLocked(id) == nil {
		return nil, ErrNotFound
	}
	var start position
	var replay []Event
	if p, ok := parsePosition(after); ok {
		start = p
		if l := s.logs[id]; l != nil {
			for _, e := range l.events {
				if q, _ := parsePosition(e.ID); q.after(p) {
					replay = append(replay, e)
				}
			}
		}
	} else {
		start = position{seq: s.seq}
	}
	var f *Follower
	f = newFollower(func() { s.follow.remove(id, f) })
	f.begin(start)
	s.follow.add(id, f)
	f.replayed(replay)
	return f, nil
}

// Send delivers m to this replica: the only one there is.
func (s *Local) Send(_ context.Context, replica string, m Message) error {
	if replica != s.replica || s.onMsg == nil {
		return ErrNoReplica
	}
	s.onMsg(m)
	return nil
}

// Close ends every follower.
func (s *Local) Close() error {
	for f := range s.follow.all() {
		f.Close()
	}
	return nil
}
