package boltfile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Open makes the directory and a 0600 file with the buckets asked for; a
// second opener waits for the lock, then fails naming the store.
func TestOpen(t *testing.T) {
	if _, err := Open(Options{}, "x.db", "test store"); err == nil || !strings.Contains(err.Error(), "embedded test store needs a data directory") {
		t.Errorf("no dir: %v", err)
	}
	dir := filepath.Join(t.TempDir(), "sub")
	db, err := Open(Options{Dir: dir}, "x.db", "test store")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Update(func(tx *bolt.Tx) error { return Buckets(tx, []byte("a"), []byte("b")) }); err != nil {
		t.Fatal(err)
	}
	_ = db.View(func(tx *bolt.Tx) error {
		if tx.Bucket([]byte("a")) == nil || tx.Bucket([]byte("b")) == nil {
			t.Error("buckets missing")
		}
		return nil
	})
	if fi, err := os.Stat(filepath.Join(dir, "x.db")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("file: %v %v", fi.Mode(), err)
	}
	_, err = Open(Options{Dir: dir, OpenTimeout: 100 * time.Millisecond}, "x.db", "test store")
	if err == nil || !strings.Contains(err.Error(), "opening the embedded test store") {
		t.Errorf("second opener: %v", err)
	}
}
