package taskpoll

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Store keeps task records, the due-time index and the per-task leases.
// Both implementations (NewRedisStore, OpenBoltStore) pass the same suite.
//
// Leases are fenced: Claim gives each claimed task a new epoch, and Apply
// writes only while the lease it names is still the task's current one and
// has not expired. Anything that changes a task outside a lease (Update)
// supersedes the lease, so a poll in flight cannot overwrite it.
//
// Writes whose Version is greater than the stored one publish the task's
// Event to every Subscribe callback, on every replica sharing the store.
type Store interface {
	// Create records a new task. ErrExists if the id is taken; a
	// *DuplicateRemoteError if its (User, Server, RemoteID) is; an
	// *ActiveLimitError if the task is active and its user already has the
	// store's MaxActivePerUser active tasks (checked and counted atomically,
	// on every replica sharing the store).
	Create(ctx context.Context, t *Task) error
	// Get returns a copy of the task, or ErrNotFound.
	Get(ctx context.Context, id string) (*Task, error)
	// Update applies fn to the current record and writes the result
	// atomically (retrying fn when the task changed meanwhile). A terminal
	// task is never written: ErrTerminal. An error from fn is returned as
	// is and nothing is written. Giving a task its RemoteID claims the
	// (User, Server, RemoteID) handle, or fails with *DuplicateRemoteError.
	Update(ctx context.Context, id string, fn func(*Task) error) (*Task, error)
	// List returns a user's tasks (of one thread when q.Thread is set),
	// newest first.
	List(ctx context.Context, q Query) ([]*Task, error)
	// Claim leases up to n tasks whose NextPollAt is due at now and whose
	// lease is free or expired, for owner, until now+lease.
	Claim(ctx context.Context, owner string, now time.Time, lease time.Duration, n int) ([]*Lease, error)
	// Apply writes t, the result of work done under l, and frees the lease,
	// if l is still the task's lease at now and the task is not terminal.
	// It reports whether t was written; false means the result was
	// discarded (the lease expired or was superseded).
	Apply(ctx context.Context, l *Lease, t *Task, now time.Time) (bool, error)
	// Release frees leases still held, making their tasks due at now.
	Release(ctx context.Context, leases []*Lease, now time.Time) error
	// Sweep removes up to n terminal records whose retention (their TTL,
	// counted from CompletedAt) ended at now, with their index entries,
	// and reports how many it removed. A record with no TTL is kept.
	Sweep(ctx context.Context, now time.Time, n int) (int, error)
	// Counts returns the number of tasks by status.
	Counts(ctx context.Context) (map[Status]int, error)
	// Subscribe calls fn with every event, from any replica, until the
	// returned function is called. fn must not block.
	Subscribe(fn func(Event)) (unsubscribe func())
	// Ping reports whether the store is reachable.
	Ping(ctx context.Context) error
	// Close releases the store's connections or file.
	Close() error
}

// Lease is a claim on one task.
type Lease struct {
	Task    *Task // the record as claimed
	Owner   string
	Epoch   int64
	Expires time.Time
	// Takeover is set when the task's previous lease had expired without
	// being released (its owner died or hung).
	Takeover bool
}

// Query selects tasks for List.
type Query struct {
	User   string // required
	Thread string // "" = all of the user's threads
	// ActiveOnly keeps tasks that are not terminal.
	ActiveOnly bool
	// Limit bounds the result (1..MaxListLimit; 0 = DefaultListLimit).
	Limit int
}

// List bounds.
const (
	DefaultListLimit = 50
	MaxListLimit     = 100
	// maxListScan bounds how many of a user's newest tasks an ActiveOnly
	// list looks through (per Redis shard).
	maxListScan = 1000
	// maxUpdateRetries bounds Update's optimistic retries.
	maxUpdateRetries = 16
)

func (q Query) limit() int {
	if q.Limit <= 0 {
		return DefaultListLimit
	}
	return min(q.Limit, MaxListLimit)
}

// selects reports whether q lists t: the user's, in q's thread when set,
// and not terminal when q is ActiveOnly.
func (q Query) selects(t *Task) bool {
	return t.User == q.User && (q.Thread == "" || t.Thread == q.Thread) && !(q.ActiveOnly && t.Status.Terminal())
}

// applyUpdate applies an Update's fn to a copy of old and keeps the fields
// fn may not change; rebind reports a remote id set for the first time,
// which the store must bind.
func applyUpdate(old *Task, fn func(*Task) error) (t *Task, rebind bool, err error) {
	t = old.Clone()
	if err := fn(t); err != nil {
		return nil, false, err
	}
	t.ID, t.User, t.Thread, t.CreatedAt = old.ID, old.User, old.Thread, old.CreatedAt
	if err := checkTask(t); err != nil {
		return nil, false, err
	}
	if t.RemoteID == old.RemoteID {
		return t, false, nil
	}
	if old.RemoteID != "" {
		return nil, false, errors.New("an MCP task's remote id cannot change")
	}
	return t, true, nil
}

// checkTask validates what a store will write.
func checkTask(t *Task) error {
	switch {
	case !ValidID(t.ID):
		return fmt.Errorf("invalid MCP task id %q", t.ID)
	case t.User == "" || len(t.User) > MaxUserLen:
		return fmt.Errorf("MCP task user must contain 1 to %d bytes", MaxUserLen)
	case len(t.Thread) > MaxThreadLen:
		return fmt.Errorf("MCP task thread must contain at most %d bytes", MaxThreadLen)
	case t.Server == "" || len(t.Server) > MaxServerNameLen:
		return fmt.Errorf("MCP task server name must contain 1 to %d characters", MaxServerNameLen)
	case len(t.Name) > MaxTaskNameLen:
		return fmt.Errorf("MCP task name must contain at most %d characters", MaxTaskNameLen)
	case len(t.RemoteID) > MaxRemoteIDLen:
		return fmt.Errorf("MCP task remote_task_id must not exceed %d characters", MaxRemoteIDLen)
	}
	return nil
}

// dueAt is the due-index score of t: NextPollAt in Unix milliseconds, or -1
// when the task is never polled again.
func dueAt(t *Task) int64 {
	if t.Status.Terminal() || t.NextPollAt.IsZero() {
		return -1
	}
	return t.NextPollAt.UnixMilli()
}

// expiresAt is when a terminal t's record may be removed (zero: never).
func expiresAt(t *Task) time.Time {
	if !t.Status.Terminal() || t.TTL <= 0 {
		return time.Time{}
	}
	done := t.CompletedAt
	if done.IsZero() {
		done = t.UpdatedAt
	}
	return done.Add(t.TTL)
}

func ms(d time.Duration) int64 { return d.Milliseconds() }

func fromMS(v int64) time.Time {
	if v <= 0 {
		return time.Time{}
	}
	return time.UnixMilli(v)
}
