package toolpin

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	bolt "go.etcd.io/bbolt"

	"github.com/mcp-mux/mcp-mux/internal/boltfile"
)

// BoltOptions configure OpenBoltStore: the file is Dir/pins.db.
type BoltOptions = boltfile.Options

// BoltStore is the embedded single-node Store: one bbolt file with a
// bucket per server (pins by tool name) and one of definitions beside it.
type BoltStore struct {
	db *bolt.DB
}

var _ Store = (*BoltStore)(nil)

var bServers = []byte("servers") // server → bucket: "h:"+tool → pin, "d:"+tool → definition, "n" → how many pins

// OpenBoltStore opens (creating) the embedded store in o.Dir.
func OpenBoltStore(o BoltOptions) (*BoltStore, error) {
	db, err := boltfile.Open(o, "pins.db", "pins store")
	if err != nil {
		return nil, err
	}
	if err := db.Update(func(tx *bolt.Tx) error { return boltfile.Buckets(tx, bServers) }); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("initializing the embedded pins store: %w", err)
	}
	return &BoltStore{db: db}, nil
}

// Close closes the file.
func (s *BoltStore) Close() error { return s.db.Close() }

// server is server's bucket in tx, created when create is set (nil
// otherwise when it has none).
func server(tx *bolt.Tx, name string, create bool) (*bolt.Bucket, error) {
	root := tx.Bucket(bServers)
	if !create {
		return root.Bucket([]byte(name)), nil
	}
	return root.CreateBucketIfNotExists([]byte(name))
}

func (s *BoltStore) records(_ context.Context, name string, tools []string) (map[string]*Record, error) {
	out := make(map[string]*Record, len(tools))
	err := s.db.View(func(tx *bolt.Tx) error {
		b, _ := server(tx, name, false)
		if b == nil {
			return nil
		}
		for _, t := range tools {
			if r := decodeRecord(b.Get([]byte("h:" + t))); r != nil {
				out[t] = r
			}
		}
		return nil
	})
	return out, err
}

func (s *BoltStore) add(_ context.Context, name, tool string, rec *Record, def []byte, max int) (*Record, error) {
	out := rec
	err := s.db.Update(func(tx *bolt.Tx) error {
		b, err := server(tx, name, true)
		if err != nil {
			return err
		}
		if cur := decodeRecord(b.Get([]byte("h:" + tool))); cur != nil {
			out = cur
			return nil
		}
		n := count(b)
		if n >= max {
			return ErrFull
		}
		if err := b.Put(nKey, []byte(strconv.Itoa(n+1))); err != nil {
			return err
		}
		return putIn(b, tool, rec, def)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (s *BoltStore) definition(_ context.Context, name, tool string) ([]byte, error) {
	var out []byte
	err := s.db.View(func(tx *bolt.Tx) error {
		if b, _ := server(tx, name, false); b != nil {
			if v := b.Get([]byte("d:" + tool)); v != nil {
				out = append([]byte(nil), v...)
			}
		}
		return nil
	})
	return out, err
}

func (s *BoltStore) put(_ context.Context, name, tool string, rec *Record, def []byte) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		b, err := server(tx, name, true)
		if err != nil {
			return err
		}
		return putIn(b, tool, rec, def)
	})
}

// nKey counts a server's pins.
var nKey = []byte("n")

// count is how many pins b holds.
func count(b *bolt.Bucket) int {
	n, _ := strconv.Atoi(string(b.Get(nKey)))
	return n
}

// putIn writes tool's pin and definition (nil: none kept) in b.
func putIn(b *bolt.Bucket, tool string, rec *Record, def []byte) error {
	v, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("encoding a pin: %w", err)
	}
	if err := b.Put([]byte("h:"+tool), v); err != nil {
		return err
	}
	if def == nil {
		return b.Delete([]byte("d:" + tool))
	}
	return b.Put([]byte("d:"+tool), def)
}
