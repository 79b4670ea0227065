package accounts

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sync"
	"time"
)

// Store keeps what connected accounts share across replicas: pending
// consents (with the per-user and fleet-wide bounds), consent results,
// the token vault and client registrations. Every value it holds is
// sealed by the Manager before it gets here; user ids reach it only as
// keyed hashes. NewRedisStore and OpenBoltStore make one; its methods are
// the Manager's alone.
type Store interface {
	// reserve counts a new pending consent of user hash uh for ttl,
	// refused with errTooManyUser or errTooManyAll past the bounds;
	// expired ones do not count.
	reserve(ctx context.Context, uh, id string, ttl time.Duration, maxUser, maxAll int) error
	// release undoes a reserve whose consent did not start.
	release(ctx context.Context, uh, id string) error
	// putPending stores the record of a reserved consent for ttl.
	putPending(ctx context.Context, uh, id string, rec []byte, ttl time.Duration) error
	// takePending returns and deletes the record in one step (nil when
	// there is none: taken, expired or never stored).
	takePending(ctx context.Context, uh, id string) ([]byte, error)
	// putResult stores a consent's state for ttl and, with wake, tells
	// every listening Manager (every replica on Redis).
	putResult(ctx context.Context, id string, res []byte, ttl time.Duration, wake bool) error
	// result returns what putResult stored (nil: nothing).
	result(ctx context.Context, id string) ([]byte, error)
	// getToken, putToken and deleteToken read and write the vault entry
	// of (uh, server); putToken and deleteToken keep the server's set of
	// connected users.
	getToken(ctx context.Context, uh, server string) ([]byte, error)
	putToken(ctx context.Context, uh, server string, rec []byte) error
	deleteToken(ctx context.Context, uh, server string) (bool, error)
	// servers lists the servers uh has a vault entry for.
	servers(ctx context.Context, uh string) ([]string, error)
	// users returns up to n user hashes connected to server and how many
	// there are.
	users(ctx context.Context, server string, n int) ([]string, int, error)
	// getReg and putReg read and write a client registration.
	getReg(ctx context.Context, key string) ([]byte, error)
	putReg(ctx context.Context, key string, rec []byte) error
	// lock takes the short refresh lock of (uh, server) across replicas;
	// ok is false when another holds it. unlock releases it.
	lock(ctx context.Context, uh, server string, ttl time.Duration) (unlock func(), ok bool, err error)
	// listen calls fn with the id of every result stored with wake until
	// the returned stop is called.
	listen(fn func(id string)) (stop func())
	// Close releases the store's resources (not a client it was given).
	Close() error
}

// Bounds of the store's values.
const (
	// MaxRecord bounds a sealed vault entry (tokens, scopes, client).
	MaxRecord = 32 << 10
	// usersShown bounds the user hashes AnyToken tries.
	usersShown = 8
)

var (
	errTooManyUser = errors.New("too many pending consents for this user")
	errTooManyAll  = errors.New("too many pending consents")
)

// listeners are the functions a store's listen registered, each by its
// own pointer. It is safe for concurrent use.
type listeners struct {
	mu  sync.Mutex
	fns map[*func(string)]struct{}
}

// add registers fn and returns its removal.
func (l *listeners) add(fn func(string)) (remove func()) {
	key := &fn
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fns == nil {
		l.fns = map[*func(string)]struct{}{}
	}
	l.fns[key] = struct{}{}
	return func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		delete(l.fns, key)
	}
}

// call calls every listener with id, outside the lock.
func (l *listeners) call(id string) {
	l.mu.Lock()
	keys := slices.Collect(maps.Keys(l.fns))
	l.mu.Unlock()
	for _, fn := range keys {
		(*fn)(id)
	}
}
