// Package boltfile opens the bbolt files of mcp-mux's embedded stores (the
// task store, the accounts vault): one file each in the data directory,
// held by one process at a time.
package boltfile

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	bolt "go.etcd.io/bbolt"
)

// DefaultOpenTimeout bounds waiting for another process's lock on a file.
const DefaultOpenTimeout = 5 * time.Second

// Options say where an embedded store's file is.
type Options struct {
	Dir         string        // the data directory (--data-dir), created 0700 if missing
	OpenTimeout time.Duration // how long to wait for another process's lock; ≤ 0: DefaultOpenTimeout
}

// Open opens (creating, 0600) the file name in o.Dir; what names the store
// in errors ("task store").
func Open(o Options, name, what string) (*bolt.DB, error) {
	dir, timeout := o.Dir, o.OpenTimeout
	if dir == "" {
		return nil, errors.New("the embedded " + what + " needs a data directory (--data-dir or MCP_MUX_DATA_DIR)")
	}
	if timeout <= 0 {
		timeout = DefaultOpenTimeout
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating the data directory: %w", err)
	}
	path := filepath.Join(dir, name)
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: timeout})
	if err != nil {
		return nil, fmt.Errorf("opening the embedded %s %s: %w", what, path, err)
	}
	return db, nil
}

// Buckets creates those of names that tx's file lacks.
func Buckets(tx *bolt.Tx, names ...[]byte) error {
	for _, b := range names {
		if _, err := tx.CreateBucketIfNotExists(b); err != nil {
			return err
		}
	}
	return nil
}
