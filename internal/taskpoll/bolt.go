package taskpoll

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/mcp-mux/mcp-mux/internal/boltfile"
)

// BoltOptions configure OpenBoltStore.
type BoltOptions struct {
	// Dir is the data directory (--data-dir); the file is Dir/tasks.db.
	Dir string
	// OpenTimeout bounds waiting for another process's lock on the file
	// (default 5s): only one mux may use an embedded store.
	OpenTimeout time.Duration
	// MaxActivePerUser caps each user's active tasks
	// (mcp_tasks.max_active_tasks_per_user; 0: no cap).
	MaxActivePerUser int
}

// BoltStore is the embedded single-node Store: one bbolt file, leases and
// events within one process.
type BoltStore struct {
	db        *bolt.DB
	maxActive int
	mu        sync.Mutex
	subs      map[int]func(Event)
	next      int
}

var (
	bTasks  = []byte("tasks")  // id → boltRecord
	bDue    = []byte("due")    // be64(ms) id → ""
	bThread = []byte("thread") // h(user, thread) be64(created) id → ""
	bUser   = []byte("user")   // h(user) be64(created) id → ""
	bRemote = []byte("remote") // h(user, server, remote) → id
	bCounts = []byte("counts") // status → be64
	bActive = []byte("active") // h(user) → be64 count of active tasks
	bExpiry = []byte("expiry") // be64(ms) id → "": terminal records' retention end
)

// boltRecord is a task with its lease and due score.
type boltRecord struct {
	T     *Task  `json:"t"`
	Owner string `json:"owner,omitempty"`
	Epoch int64  `json:"epoch"`
	Exp   int64  `json:"exp,omitempty"` // lease expiry, ms
	Due   int64  `json:"due"`           // due-index score, -1: none
}

var _ Store = (*BoltStore)(nil)

// OpenBoltStore opens (creating) the embedded store in o.Dir.
func OpenBoltStore(o BoltOptions) (*BoltStore, error) {
	db, err := boltfile.Open(boltfile.Options{Dir: o.Dir, OpenTimeout: o.OpenTimeout}, "tasks.db", "task store")
	if err != nil {
		return nil, err
	}
	err = db.Update(func(tx *bolt.Tx) error {
		fresh := tx.Bucket(bActive) == nil
		if err := boltfile.Buckets(tx, bTasks, bDue, bThread, bUser, bRemote, bCounts, bActive, bExpiry); err != nil {
			return err
		}
		if fresh {
			return countActive(tx) // a file from before the per-user cap
		}
		return nil
	})
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("initializing the embedded task store: %w", err)
	}
	return &BoltStore{db: db, maxActive: o.MaxActivePerUser, subs: make(map[int]func(Event))}, nil
}

// countActive fills the per-user active counts from the records.
func countActive(tx *bolt.Tx) error {
	act := tx.Bucket(bActive)
	return tx.Bucket(bTasks).ForEach(func(k, v []byte) error {
		var r boltRecord
		if json.Unmarshal(v, &r) != nil || r.T == nil || r.T.Status.Terminal() {
			return nil
		}
		return addActive(act, r.T.User, 1)
	})
}

// Close closes the file.
func (s *BoltStore) Close() error { return s.db.Close() }

// Ping always succeeds once the file is open.
func (s *BoltStore) Ping(context.Context) error {
	return s.db.View(func(*bolt.Tx) error { return nil })
}

// Subscribe registers fn for events of this process.
func (s *BoltStore) Subscribe(fn func(Event)) func() {
	s.mu.Lock()
	defer s.mu.Unlock()
	id := s.next
	s.next++
	s.subs[id] = fn
	return func() {
		s.mu.Lock()
		delete(s.subs, id)
		s.mu.Unlock()
	}
}

func (s *BoltStore) publish(evs []Event) {
	if len(evs) == 0 {
		return
	}
	s.mu.Lock()
	fns := make([]func(Event), 0, len(s.subs))
	for _, fn := range s.subs {
		fns = append(fns, fn)
	}
	s.mu.Unlock()
	for _, e := range evs {
		for _, fn := range fns {
			fn(e)
		}
	}
}

func be64(v int64) []byte {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(v))
	return b[:]
}

func hashKey(parts ...string) []byte {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return h.Sum(nil)[:16]
}

func indexKey(prefix []byte, created int64, id string) []byte {
	k := make([]byte, 0, len(prefix)+8+len(id))
	k = append(k, prefix...)
	k = append(k, be64(created)...)
	return append(k, id...)
}

func dueKey(due int64, id string) []byte { return append(be64(due), id...) }

func getRecord(tx *bolt.Tx, id string) (*boltRecord, error) {
	v := tx.Bucket(bTasks).Get([]byte(id))
	if v == nil {
		return nil, ErrNotFound
	}
	var r boltRecord
	if err := json.Unmarshal(v, &r); err != nil {
		return nil, fmt.Errorf("decoding MCP task %s: %w", id, err)
	}
	return &r, nil
}

// recordIndexes are the steps putRecord takes before it writes a record:
// each moves one index entry of the task from old (nil: new) to r.
var recordIndexes = [...]func(tx *bolt.Tx, old, r *boltRecord) error{moveDue, moveActive, addExpiry, moveCount}

// putRecord writes r, moving its due entry, active slot, expiry entry and
// status count from old (nil: new).
func putRecord(tx *bolt.Tx, old, r *boltRecord) error {
	for _, move := range recordIndexes {
		if err := move(tx, old, r); err != nil {
			return err
		}
	}
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return tx.Bucket(bTasks).Put([]byte(r.T.ID), b)
}

// moveDue replaces old's due entry (if any) with r's (if any).
func moveDue(tx *bolt.Tx, old, r *boltRecord) error {
	due := tx.Bucket(bDue)
	if old != nil && old.Due >= 0 {
		if err := due.Delete(dueKey(old.Due, r.T.ID)); err != nil {
			return err
		}
	}
	if r.Due < 0 {
		return nil
	}
	return due.Put(dueKey(r.Due, r.T.ID), nil)
}

// moveActive takes or gives back the user's active slot when the task
// starts or stops being active.
func moveActive(tx *bolt.Tx, old, r *boltRecord) error {
	wasActive, active := old != nil && !old.T.Status.Terminal(), !r.T.Status.Terminal()
	if wasActive == active {
		return nil
	}
	d := int64(1)
	if wasActive {
		d = -1
	}
	return addActive(tx.Bucket(bActive), r.T.User, d)
}

// addExpiry records when a task that just finished (or is written
// finished) expires.
func addExpiry(tx *bolt.Tx, old, r *boltRecord) error {
	exp := expiresAt(r.T)
	if exp.IsZero() || (old != nil && old.T.Status.Terminal()) {
		return nil
	}
	return tx.Bucket(bExpiry).Put(dueKey(exp.UnixMilli(), r.T.ID), nil)
}

// moveCount moves the task from old's status count to r's.
func moveCount(tx *bolt.Tx, old, r *boltRecord) error {
	c := tx.Bucket(bCounts)
	if old != nil && old.T.Status == r.T.Status {
		return nil
	}
	if old != nil {
		if err := addCount(c, old.T.Status, -1); err != nil {
			return err
		}
	}
	return addCount(c, r.T.Status, 1)
}

func addCount(c *bolt.Bucket, st Status, d int64) error {
	return c.Put([]byte(st), be64(getCount(c, []byte(st))+d))
}

func getCount(b *bolt.Bucket, k []byte) int64 {
	if v := b.Get(k); len(v) == 8 {
		return int64(binary.BigEndian.Uint64(v))
	}
	return 0
}

func addActive(act *bolt.Bucket, user string, d int64) error {
	k := hashKey(user)
	n := max(getCount(act, k)+d, 0)
	if n == 0 {
		return act.Delete(k)
	}
	return act.Put(k, be64(n))
}

func bindRemote(tx *bolt.Tx, t *Task) error {
	if t.RemoteID == "" {
		return nil
	}
	b := tx.Bucket(bRemote)
	k := hashKey(t.User, t.Server, t.RemoteID)
	if v := b.Get(k); v != nil && string(v) != t.ID {
		return &DuplicateRemoteError{RemoteID: t.RemoteID, Server: t.Server}
	}
	return b.Put(k, []byte(t.ID))
}

// Create records a new task.
func (s *BoltStore) Create(_ context.Context, t *Task) error {
	if err := checkTask(t); err != nil {
		return err
	}
	t = t.Clone()
	err := s.db.Update(func(tx *bolt.Tx) error {
		if tx.Bucket(bTasks).Get([]byte(t.ID)) != nil {
			return ErrExists
		}
		if s.maxActive > 0 && !t.Status.Terminal() && getCount(tx.Bucket(bActive), hashKey(t.User)) >= int64(s.maxActive) {
			return &ActiveLimitError{Limit: s.maxActive}
		}
		if err := bindRemote(tx, t); err != nil {
			return err
		}
		created := t.CreatedAt.UnixMilli()
		if err := tx.Bucket(bThread).Put(indexKey(hashKey(t.User, t.Thread), created, t.ID), nil); err != nil {
			return err
		}
		if err := tx.Bucket(bUser).Put(indexKey(hashKey(t.User), created, t.ID), nil); err != nil {
			return err
		}
		return putRecord(tx, nil, &boltRecord{T: t, Due: dueAt(t)})
	})
	if err != nil {
		return err
	}
	if t.Version > 0 {
		s.publish([]Event{eventOf(t)})
	}
	return nil
}

// Get returns a copy of the task.
func (s *BoltStore) Get(_ context.Context, id string) (*Task, error) {
	if !ValidID(id) {
		return nil, ErrNotFound
	}
	var t *Task
	err := s.db.View(func(tx *bolt.Tx) error {
		r, err := getRecord(tx, id)
		if err == nil {
			t = r.T
		}
		return err
	})
	return t, err
}

// Update applies fn in one transaction; it supersedes any lease.
func (s *BoltStore) Update(_ context.Context, id string, fn func(*Task) error) (*Task, error) {
	if !ValidID(id) {
		return nil, ErrNotFound
	}
	var out *Task
	var ev []Event
	err := s.db.Update(func(tx *bolt.Tx) (err error) {
		out, ev, err = updateTx(tx, id, fn)
		return err
	})
	if err != nil {
		return nil, err
	}
	s.publish(ev)
	return out, nil
}

// updateTx is Update's transaction: it returns a copy of the written task
// and the event to publish, if any.
func updateTx(tx *bolt.Tx, id string, fn func(*Task) error) (*Task, []Event, error) {
	old, err := getRecord(tx, id)
	if err != nil {
		return nil, nil, err
	}
	if old.T.Status.Terminal() {
		return nil, nil, ErrTerminal
	}
	t, rebind, err := applyUpdate(old.T, fn)
	if err == nil && rebind {
		err = bindRemote(tx, t)
	}
	if err != nil {
		return nil, nil, err
	}
	r := &boltRecord{T: t, Epoch: old.Epoch + 1, Due: dueAt(t)}
	if err := putRecord(tx, old, r); err != nil {
		return nil, nil, err
	}
	var ev []Event
	if t.Version > old.T.Version {
		ev = append(ev, eventOf(t))
	}
	return t.Clone(), ev, nil
}

// List returns a user's tasks, newest first.
func (s *BoltStore) List(_ context.Context, q Query) ([]*Task, error) {
	var out []*Task
	err := s.db.View(func(tx *bolt.Tx) (err error) {
		out, err = listTx(tx, q)
		return err
	})
	sortNewest(out)
	return out, err
}

// listTx walks q's index back from its newest entry and returns the tasks
// q selects (an entry of another user or thread is a hash collision).
func listTx(tx *bolt.Tx, q Query) ([]*Task, error) {
	b, prefix := tx.Bucket(bUser), hashKey(q.User)
	if q.Thread != "" {
		b, prefix = tx.Bucket(bThread), hashKey(q.User, q.Thread)
	}
	var out []*Task
	c := b.Cursor()
	for k := lastWithPrefix(c, prefix); k != nil && bytes.HasPrefix(k, prefix) && len(out) < q.limit(); k, _ = c.Prev() {
		r, err := getRecord(tx, string(k[len(prefix)+8:]))
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return out, err
		}
		if q.selects(r.T) {
			out = append(out, r.T)
		}
	}
	return out, nil
}

// lastWithPrefix positions c on the last key under prefix (or just
// before, where the caller's prefix check stops): it seeks past the
// prefix's last key, then walks back.
func lastWithPrefix(c *bolt.Cursor, prefix []byte) []byte {
	end := append(append([]byte(nil), prefix...), bytes.Repeat([]byte{0xff}, 9)...)
	if k, _ := c.Seek(end); k == nil {
		k, _ = c.Last()
		return k
	}
	k, _ := c.Prev()
	return k
}

func sortNewest(ts []*Task) {
	sort.SliceStable(ts, func(i, j int) bool {
		if !ts[i].CreatedAt.Equal(ts[j].CreatedAt) {
			return ts[i].CreatedAt.After(ts[j].CreatedAt)
		}
		return ts[i].ID > ts[j].ID
	})
}

// Claim leases due tasks in due order.
func (s *BoltStore) Claim(_ context.Context, owner string, now time.Time, lease time.Duration, n int) ([]*Lease, error) {
	if n <= 0 {
		return nil, nil
	}
	var out []*Lease
	nowMS, exp := now.UnixMilli(), now.Add(lease).UnixMilli()
	err := s.db.Update(func(tx *bolt.Tx) error {
		for _, id := range dueIDs(tx, nowMS, n) {
			l, err := claimTx(tx, id, owner, nowMS, exp)
			if err != nil {
				return err
			}
			if l != nil {
				out = append(out, l)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// dueIDs returns up to n ids whose due time is not after nowMS, in due
// order.
func dueIDs(tx *bolt.Tx, nowMS int64, n int) []string {
	c := tx.Bucket(bDue).Cursor()
	var ids []string
	for k, _ := c.First(); k != nil && len(ids) < n; k, _ = c.Next() {
		if int64(binary.BigEndian.Uint64(k[:8])) > nowMS {
			break
		}
		ids = append(ids, string(k[8:]))
	}
	return ids
}

// claimTx leases task id to owner until exp (Unix ms), or, when another
// lease is live, moves the task's due time to that lease's end and
// returns nil.
func claimTx(tx *bolt.Tx, id, owner string, nowMS, exp int64) (*Lease, error) {
	old, err := getRecord(tx, id)
	if err != nil {
		return nil, err
	}
	r := *old
	takeover := r.Owner != "" && r.Exp < nowMS
	if r.Owner != "" && r.Exp >= nowMS {
		r.Due = r.Exp // a live lease: look again when it ends
		return nil, putRecord(tx, old, &r)
	}
	r.Owner, r.Epoch, r.Exp, r.Due = owner, r.Epoch+1, exp, exp
	if err := putRecord(tx, old, &r); err != nil {
		return nil, err
	}
	return &Lease{Task: r.T.Clone(), Owner: owner, Epoch: r.Epoch, Expires: time.UnixMilli(exp), Takeover: takeover}, nil
}

// Apply writes t if l is still the task's live lease.
func (s *BoltStore) Apply(_ context.Context, l *Lease, t *Task, now time.Time) (bool, error) {
	if err := checkTask(t); err != nil {
		return false, err
	}
	applied := false
	var ev []Event
	// Batch: concurrent applies share one transaction (and one fsync); a
	// batch that fails reruns each function alone, so it starts afresh.
	err := s.db.Batch(func(tx *bolt.Tx) error {
		applied, ev = false, nil
		old, err := getRecord(tx, l.Task.ID)
		if errors.Is(err, ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		if old.Owner != l.Owner || old.Epoch != l.Epoch || old.Exp < now.UnixMilli() || old.T.Status.Terminal() {
			return nil
		}
		nt := t.Clone()
		nt.ID, nt.User, nt.Thread, nt.RemoteID, nt.CreatedAt = old.T.ID, old.T.User, old.T.Thread, old.T.RemoteID, old.T.CreatedAt
		if err := putRecord(tx, old, &boltRecord{T: nt, Epoch: old.Epoch, Due: dueAt(nt)}); err != nil {
			return err
		}
		if nt.Version > old.T.Version {
			ev = append(ev, eventOf(nt))
		}
		applied = true
		return nil
	})
	if err != nil {
		return false, err
	}
	s.publish(ev)
	return applied, nil
}

// Release frees the leases still held.
func (s *BoltStore) Release(_ context.Context, leases []*Lease, now time.Time) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		for _, l := range leases {
			old, err := getRecord(tx, l.Task.ID)
			if errors.Is(err, ErrNotFound) {
				continue
			}
			if err != nil {
				return err
			}
			if old.Owner != l.Owner || old.Epoch != l.Epoch {
				continue
			}
			r := *old
			r.Owner, r.Exp = "", 0
			if !r.T.Status.Terminal() {
				r.Due = now.UnixMilli()
			}
			if err := putRecord(tx, old, &r); err != nil {
				return err
			}
		}
		return nil
	})
}

// Sweep removes terminal records whose retention ended, oldest first.
func (s *BoltStore) Sweep(_ context.Context, now time.Time, n int) (int, error) {
	if n <= 0 {
		return 0, nil
	}
	removed := 0
	err := s.db.Update(func(tx *bolt.Tx) error {
		removed = 0
		c := tx.Bucket(bExpiry).Cursor()
		var keys [][]byte
		for k, _ := c.First(); k != nil && len(keys) < n; k, _ = c.Next() {
			if int64(binary.BigEndian.Uint64(k[:8])) > now.UnixMilli() {
				break
			}
			keys = append(keys, append([]byte(nil), k...))
		}
		for _, k := range keys {
			if err := tx.Bucket(bExpiry).Delete(k); err != nil {
				return err
			}
			r, err := getRecord(tx, string(k[8:]))
			if errors.Is(err, ErrNotFound) {
				continue
			}
			if err != nil {
				return err
			}
			if !r.T.Status.Terminal() {
				continue // never: only terminal records are listed
			}
			if err := deleteRecord(tx, r); err != nil {
				return err
			}
			removed++
		}
		return nil
	})
	return removed, err
}

// bucketKey is one key of one bucket.
type bucketKey struct{ b, k []byte }

// deleteRecord removes a terminal record and its index entries.
func deleteRecord(tx *bolt.Tx, r *boltRecord) error {
	t := r.T
	created := t.CreatedAt.UnixMilli()
	dels := []bucketKey{
		{bTasks, []byte(t.ID)},
		{bThread, indexKey(hashKey(t.User, t.Thread), created, t.ID)},
		{bUser, indexKey(hashKey(t.User), created, t.ID)},
	}
	if r.Due >= 0 {
		dels = append(dels, bucketKey{bDue, dueKey(r.Due, t.ID)})
	}
	if t.RemoteID != "" {
		k := hashKey(t.User, t.Server, t.RemoteID)
		if string(tx.Bucket(bRemote).Get(k)) == t.ID {
			dels = append(dels, bucketKey{bRemote, k})
		}
	}
	for _, d := range dels {
		if err := tx.Bucket(d.b).Delete(d.k); err != nil {
			return err
		}
	}
	return addCount(tx.Bucket(bCounts), t.Status, -1)
}

// Counts returns the number of tasks by status.
func (s *BoltStore) Counts(context.Context) (map[Status]int, error) {
	out := make(map[Status]int)
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bCounts).ForEach(func(k, v []byte) error {
			if len(v) == 8 {
				if n := int(binary.BigEndian.Uint64(v)); n > 0 {
					out[Status(k)] = n
				}
			}
			return nil
		})
	})
	return out, err
}
