package accounts

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/mcp-mux/mcp-mux/internal/boltfile"
)

// BoltOptions configure OpenBoltStore: the file is Dir/accounts.db.
type BoltOptions = boltfile.Options

// BoltStore is the embedded single-node Store: one bbolt file; results
// wake the Managers of this process only.
type BoltStore struct {
	db   *bolt.DB
	now  func() time.Time
	subs listeners
}

var (
	bPending = []byte("pending") // id → be64(expiry ms) len(uh) uh record ("" while reserved)
	bResults = []byte("results") // id → be64(expiry ms) result
	bTokens  = []byte("tokens")  // server \x00 uh → sealed vault entry
	bRegs    = []byte("regs")    // key → sealed registration
)

var _ Store = (*BoltStore)(nil)

// OpenBoltStore opens (creating) the embedded store in o.Dir.
func OpenBoltStore(o BoltOptions) (*BoltStore, error) {
	db, err := boltfile.Open(o, "accounts.db", "accounts store")
	if err != nil {
		return nil, err
	}
	err = db.Update(func(tx *bolt.Tx) error { return boltfile.Buckets(tx, bPending, bResults, bTokens, bRegs) })
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("initializing the embedded accounts store: %w", err)
	}
	return &BoltStore{db: db, now: time.Now}, nil
}

// Close closes the file.
func (s *BoltStore) Close() error { return s.db.Close() }

// pendingValue encodes a pending entry.
func pendingValue(expires time.Time, uh string, rec []byte) []byte {
	v := binary.BigEndian.AppendUint64(nil, uint64(expires.UnixMilli()))
	v = append(v, byte(len(uh)))
	v = append(v, uh...)
	return append(v, rec...)
}

// parsePending decodes a pending entry; ok is false for a malformed one.
func parsePending(v []byte) (expMS int64, uh string, rec []byte, ok bool) {
	if len(v) < 9 || len(v) < 9+int(v[8]) {
		return 0, "", nil, false
	}
	n := int(v[8])
	return int64(binary.BigEndian.Uint64(v)), string(v[9 : 9+n]), v[9+n:], true
}

func (s *BoltStore) reserve(_ context.Context, uh, id string, ttl time.Duration, maxUser, maxAll int) error {
	now, expires := s.now().UnixMilli(), s.now().Add(ttl)
	return s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bPending)
		var stale [][]byte
		total, mine := 0, 0
		_ = b.ForEach(func(k, v []byte) error {
			exp, owner, _, ok := parsePending(v)
			switch {
			case !ok || exp <= now:
				stale = append(stale, k)
			default:
				total++
				if owner == uh {
					mine++
				}
			}
			return nil
		})
		for _, k := range stale {
			if err := b.Delete(k); err != nil {
				return err
			}
		}
		if mine >= maxUser {
			return errTooManyUser
		}
		if total >= maxAll {
			return errTooManyAll
		}
		return b.Put([]byte(id), pendingValue(expires, uh, nil))
	})
}

func (s *BoltStore) release(_ context.Context, _, id string) error {
	return s.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bPending).Delete([]byte(id)) })
}

func (s *BoltStore) putPending(_ context.Context, uh, id string, rec []byte, ttl time.Duration) error {
	expires := s.now().Add(ttl)
	return s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bPending)
		if _, owner, _, ok := parsePending(b.Get([]byte(id))); !ok || owner != uh {
			return errors.New("the consent's reservation is gone")
		}
		return b.Put([]byte(id), pendingValue(expires, uh, rec))
	})
}

func (s *BoltStore) takePending(_ context.Context, uh, id string) ([]byte, error) {
	var out []byte
	now := s.now().UnixMilli()
	err := s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bPending)
		exp, owner, rec, ok := parsePending(b.Get([]byte(id)))
		if !ok || owner != uh || len(rec) == 0 {
			return nil
		}
		if exp > now {
			out = bytes.Clone(rec)
		}
		return b.Delete([]byte(id))
	})
	return out, err
}

func (s *BoltStore) putResult(_ context.Context, id string, res []byte, ttl time.Duration, wake bool) error {
	exp := s.now().Add(ttl).UnixMilli()
	err := s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bResults)
		if err := pruneResults(b, s.now().UnixMilli()); err != nil {
			return err
		}
		return b.Put([]byte(id), append(binary.BigEndian.AppendUint64(nil, uint64(exp)), res...))
	})
	if err == nil && wake {
		s.subs.call(id)
	}
	return err
}

// pruneResults deletes up to 64 expired results, so results cost no more
// than consents do.
func pruneResults(b *bolt.Bucket, now int64) error {
	var stale [][]byte
	c := b.Cursor()
	for k, v := c.First(); k != nil && len(stale) < 64; k, v = c.Next() {
		if len(v) < 8 || int64(binary.BigEndian.Uint64(v)) <= now {
			stale = append(stale, k)
		}
	}
	for _, k := range stale {
		if err := b.Delete(k); err != nil {
			return err
		}
	}
	return nil
}

func (s *BoltStore) result(_ context.Context, id string) ([]byte, error) {
	var out []byte
	err := s.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(bResults).Get([]byte(id))
		if len(v) >= 8 && int64(binary.BigEndian.Uint64(v)) > s.now().UnixMilli() {
			out = bytes.Clone(v[8:])
		}
		return nil
	})
	return out, err
}

// tokenKey is the vault key of (uh, server): the server first, so one
// server's users are one prefix.
func tokenKey(uh, server string) []byte { return []byte(server + "\x00" + uh) }

func (s *BoltStore) getToken(_ context.Context, uh, server string) ([]byte, error) {
	var out []byte
	err := s.db.View(func(tx *bolt.Tx) error {
		out = bytes.Clone(tx.Bucket(bTokens).Get(tokenKey(uh, server)))
		return nil
	})
	return out, err
}

func (s *BoltStore) putToken(_ context.Context, uh, server string, rec []byte) error {
	return s.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bTokens).Put(tokenKey(uh, server), rec) })
}

func (s *BoltStore) deleteToken(_ context.Context, uh, server string) (bool, error) {
	found := false
	err := s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bTokens)
		found = b.Get(tokenKey(uh, server)) != nil
		return b.Delete(tokenKey(uh, server))
	})
	return found, err
}

func (s *BoltStore) servers(_ context.Context, uh string) ([]string, error) {
	var out []string
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bTokens).ForEach(func(k, _ []byte) error {
			if server, owner, ok := bytes.Cut(k, []byte{0}); ok && string(owner) == uh {
				out = append(out, string(server))
			}
			return nil
		})
	})
	return out, err
}

func (s *BoltStore) users(_ context.Context, server string, n int) ([]string, int, error) {
	var out []string
	count := 0
	prefix := []byte(server + "\x00")
	err := s.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bTokens).Cursor()
		for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
			count++
			if len(out) < n {
				out = append(out, string(k[len(prefix):]))
			}
		}
		return nil
	})
	return out, count, err
}

func (s *BoltStore) getReg(_ context.Context, key string) ([]byte, error) {
	var out []byte
	err := s.db.View(func(tx *bolt.Tx) error {
		out = bytes.Clone(tx.Bucket(bRegs).Get([]byte(key)))
		return nil
	})
	return out, err
}

func (s *BoltStore) putReg(_ context.Context, key string, rec []byte) error {
	return s.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bRegs).Put([]byte(key), rec) })
}

// lock always succeeds: one process uses the file, and the Manager's
// singleflight already serializes its refreshes.
func (s *BoltStore) lock(context.Context, string, string, time.Duration) (func(), bool, error) {
	return func() {}, true, nil
}

func (s *BoltStore) listen(fn func(string)) func() {
	return s.subs.add(fn)
}
