package approvals

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/mcp-mux/mcp-mux/internal/boltfile"
)

// BoltOptions configure OpenBoltStore: the file is Dir/approvals.db.
type BoltOptions = boltfile.Options

// BoltStore is the embedded single-node Store: one bbolt file, every
// change one transaction.
type BoltStore struct {
	db *bolt.DB
}

var (
	bRecords  = []byte("records")  // id → record (JSON)
	bBindings = []byte("bindings") // binding → id
)

var _ Store = (*BoltStore)(nil)

// OpenBoltStore opens (creating) the embedded store in o.Dir.
func OpenBoltStore(o BoltOptions) (*BoltStore, error) {
	db, err := boltfile.Open(o, "approvals.db", "approvals store")
	if err != nil {
		return nil, err
	}
	if err := db.Update(func(tx *bolt.Tx) error { return boltfile.Buckets(tx, bRecords, bBindings) }); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("initializing the embedded approvals store: %w", err)
	}
	return &BoltStore{db: db}, nil
}

// Close closes the file.
func (s *BoltStore) Close() error { return s.db.Close() }

func (s *BoltStore) create(_ context.Context, rec *Record, maxUser, maxAll int, now time.Time) (*Record, error) {
	var out *Record
	err := s.db.Update(func(tx *bolt.Tx) error {
		recs, binds := tx.Bucket(bRecords), tx.Bucket(bBindings)
		if id := binds.Get([]byte(rec.Binding)); id != nil {
			if old := decode(recs.Get(id)); old != nil && old.State != Used && old.Live(now) {
				out = old
				return nil
			}
		}
		user, all, err := prune(recs, binds, rec.User, now)
		if err != nil {
			return err
		}
		switch {
		case user >= maxUser:
			return ErrTooManyUser
		case all >= maxAll:
			return ErrTooMany
		}
		if err := put(recs, rec); err != nil {
			return err
		}
		out = rec
		return binds.Put([]byte(rec.Binding), []byte(rec.ID))
	})
	return out, err
}

// prune drops the records past their keeping and counts the pending
// live ones: user's and all.
func prune(recs, binds *bolt.Bucket, user string, now time.Time) (mine, all int, err error) {
	var gone []*Record
	err = recs.ForEach(func(_, v []byte) error {
		r := decode(v)
		switch {
		case r == nil:
		case now.After(r.Expires.Add(keepAfter)):
			gone = append(gone, r)
		case r.State == Pending && r.Live(now):
			all++
			if r.User == user {
				mine++
			}
		}
		return nil
	})
	for _, r := range gone {
		if err == nil {
			err = recs.Delete([]byte(r.ID))
		}
		if id := binds.Get([]byte(r.Binding)); err == nil && string(id) == r.ID {
			err = binds.Delete([]byte(r.Binding))
		}
	}
	return mine, all, err
}

func (s *BoltStore) get(_ context.Context, id string) (*Record, error) {
	var out *Record
	err := s.db.View(func(tx *bolt.Tx) error {
		out = decode(tx.Bucket(bRecords).Get([]byte(id)))
		return nil
	})
	return out, err
}

func (s *BoltStore) decide(_ context.Context, id, state, by, reason string, now time.Time) (*Record, error) {
	var out *Record
	err := s.db.Update(func(tx *bolt.Tx) error {
		recs := tx.Bucket(bRecords)
		r := decode(recs.Get([]byte(id)))
		switch {
		case r == nil:
			return ErrNotFound
		case r.State != Pending:
			out = r
			return ErrDecided
		case !r.Live(now):
			out = r
			return ErrExpired
		}
		r.State, r.By, r.Reason, r.Decided = state, by, reason, now.UTC()
		out = r
		return put(recs, r)
	})
	return out, err
}

func (s *BoltStore) take(_ context.Context, id string, now time.Time) (bool, error) {
	ok := false
	err := s.db.Update(func(tx *bolt.Tx) error {
		recs := tx.Bucket(bRecords)
		r := decode(recs.Get([]byte(id)))
		if r == nil || r.State != Approved || !r.Live(now) {
			return nil
		}
		r.State, ok = Used, true
		return put(recs, r)
	})
	return ok, err
}

func (s *BoltStore) pending(_ context.Context, now time.Time, n int) ([]*Record, int, error) {
	var out []*Record
	total := 0
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bRecords).ForEach(func(_, v []byte) error {
			if r := decode(v); r != nil && r.State == Pending && r.Live(now) {
				total++
				out = append(out, r)
			}
			return nil
		})
	})
	sortOldest(out)
	if len(out) > n {
		out = out[:n]
	}
	return out, total, err
}

func put(b *bolt.Bucket, r *Record) error {
	v, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return b.Put([]byte(r.ID), v)
}

// decode returns the record v holds; nil for none or a damaged one.
func decode(v []byte) *Record {
	if v == nil {
		return nil
	}
	var r Record
	if json.Unmarshal(v, &r) != nil || r.ID == "" {
		return nil
	}
	return &r
}
