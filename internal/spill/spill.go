// Package spill keeps the full results the result guards spilled: each
// under its caller and a random id, for a TTL, bounded in size and per
// caller (the oldest of a caller's results go first). In process (Local)
// or in Redis, shared by every replica on it (Redis). Who may read a
// result is the caller it was stored under: the call path hands out its
// id only inside a token sealed for that caller.
package spill

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"sync"
	"time"
)

// Bounds of what is kept.
const (
	// MaxResult is the largest result kept; a larger one is not spilled.
	MaxResult = 8 << 20
	// MaxPerCaller and MaxCallerBytes bound one caller's results: past
	// either, the caller's oldest are dropped.
	MaxPerCaller   = 32
	MaxCallerBytes = 64 << 20
	// MaxLocalBytes bounds every caller's results in one process (Local).
	MaxLocalBytes = 512 << 20
	// MaxTTL is the longest a result is kept.
	MaxTTL = 24 * time.Hour
)

var (
	// ErrNotFound reports a result that is not there: never stored, stored
	// for another caller, expired or dropped.
	ErrNotFound = errors.New("spilled result not found")
	// ErrTooLarge reports a result over MaxResult.
	ErrTooLarge = errors.New("result too large to spill")
)

// Store keeps spilled results.
type Store interface {
	// Put keeps data for user under id for ttl (at most MaxTTL).
	Put(ctx context.Context, user, id string, data []byte, ttl time.Duration) error
	// Get returns user's result id.
	Get(ctx context.Context, user, id string) ([]byte, error)
}

// NewID is a random 128-bit id.
func NewID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return hex.EncodeToString(b)
}

// check bounds a Put's arguments.
func check(data []byte, ttl time.Duration) (time.Duration, error) {
	if len(data) > MaxResult {
		return 0, ErrTooLarge
	}
	if ttl <= 0 || ttl > MaxTTL {
		ttl = MaxTTL
	}
	return ttl, nil
}

// Local is the Store of one process. It is safe for concurrent use.
type Local struct {
	now func() time.Time

	mu      sync.Mutex
	entries []entry // oldest first
	bytes   int
}

// entry is one result of Local.
type entry struct {
	user, id string
	data     []byte
	expires  time.Time
}

// NewLocal returns an empty Local; now is its clock (nil: time.Now).
func NewLocal(now func() time.Time) *Local {
	if now == nil {
		now = time.Now
	}
	return &Local{now: now}
}

// Put keeps data, dropping expired results, then user's oldest past
// MaxPerCaller or MaxCallerBytes, then anyone's oldest past MaxLocalBytes.
func (l *Local) Put(_ context.Context, user, id string, data []byte, ttl time.Duration) error {
	ttl, err := check(data, ttl)
	if err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	l.keep(func(e *entry) bool { return now.Before(e.expires) })
	count, bytes := 1, len(data)
	for i := len(l.entries) - 1; i >= 0; i-- { // newest first: the oldest are over
		e := &l.entries[i]
		if e.user != user {
			continue
		}
		if count+1 > MaxPerCaller || bytes+len(e.data) > MaxCallerBytes {
			e.expires = time.Time{}
			continue
		}
		count, bytes = count+1, bytes+len(e.data)
	}
	l.keep(func(e *entry) bool { return !e.expires.IsZero() })
	total := l.bytes + len(data)
	for i := range l.entries {
		if total <= MaxLocalBytes {
			break
		}
		if e := &l.entries[i]; !e.expires.IsZero() {
			e.expires, total = time.Time{}, total-len(e.data)
		}
	}
	l.keep(func(e *entry) bool { return !e.expires.IsZero() })
	l.entries = append(l.entries, entry{user: user, id: id, data: data, expires: now.Add(ttl)})
	l.bytes += len(data)
	return nil
}

// keep keeps the entries ok reports true for.
func (l *Local) keep(ok func(*entry) bool) {
	kept := l.entries[:0]
	for i := range l.entries {
		if e := &l.entries[i]; ok(e) {
			kept = append(kept, *e)
		} else {
			l.bytes -= len(e.data)
		}
	}
	clear(l.entries[len(kept):])
	l.entries = kept
}

// Get returns user's result id, if it has not expired.
func (l *Local) Get(_ context.Context, user, id string) ([]byte, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	for i := range l.entries {
		if e := &l.entries[i]; e.id == id && e.user == user && now.Before(e.expires) {
			return e.data, nil
		}
	}
	return nil, ErrNotFound
}
