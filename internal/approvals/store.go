package approvals

import (
	"context"
	"slices"
	"time"
)

// Store keeps the records. NewRedisStore and OpenBoltStore make one; its
// methods are the Manager's alone.
type Store interface {
	// create stores rec (pending) unless a live record that is not used
	// has its binding — then it returns that one — within maxUser
	// pending requests of rec.User and maxAll in total (ErrTooManyUser,
	// ErrTooMany).
	create(ctx context.Context, rec *Record, maxUser, maxAll int, now time.Time) (*Record, error)
	// get returns the record of id, nil when there is none.
	get(ctx context.Context, id string) (*Record, error)
	// decide sets the pending, live record of id to state (Approved or
	// Denied) and returns it; ErrNotFound, ErrDecided (with the record)
	// or ErrExpired otherwise.
	decide(ctx context.Context, id, state, by, reason string, now time.Time) (*Record, error)
	// take sets the approved, live record of id to Used: false when it is
	// not approved or has expired.
	take(ctx context.Context, id string, now time.Time) (bool, error)
	// pending returns up to n pending live records, oldest first, and how
	// many there are.
	pending(ctx context.Context, now time.Time, n int) ([]*Record, int, error)
	// Close releases the store's resources (not a client it was given).
	Close() error
}

// ttl is how long a store keeps rec after now.
func ttl(rec *Record, now time.Time) time.Duration {
	return rec.Expires.Sub(now) + keepAfter
}

// sortOldest orders recs by creation, oldest first.
func sortOldest(recs []*Record) {
	slices.SortFunc(recs, func(a, b *Record) int { return a.Created.Compare(b.Created) })
}
