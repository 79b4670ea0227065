package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// ErrReadOnly is returned by WriteFile for a config file mcp-mux must not
// or cannot write: a Kubernetes ConfigMap mount (a ..data directory beside
// it; the kubelet would overwrite any edit) or a read-only file system.
var ErrReadOnly = errors.New("the config file is read-only")

// CheckWritable reports ErrReadOnly (wrapped, naming the reason) when path
// is a ConfigMap mount, without touching the file system otherwise.
func CheckWritable(path string) error {
	if _, err := os.Lstat(filepath.Join(filepath.Dir(path), "..data")); err == nil {
		return fmt.Errorf("%w: %s is mounted from a Kubernetes ConfigMap; change the ConfigMap instead", ErrReadOnly, path)
	}
	return nil
}

// WriteFile replaces the config file atomically: a temp file in the same
// directory (".<name>.*.tmp", the existing file's mode, fsynced) renamed
// over it, then a best-effort directory fsync. A symlinked path keeps its
// link and replaces the target. A failure leaves the previous file intact.
// A bind-mounted file, which cannot be renamed over, is overwritten in
// place.
func WriteFile(path string, data []byte) error {
	if err := CheckWritable(path); err != nil {
		return err
	}
	target, err := filepath.EvalSymlinks(path)
	if errors.Is(err, fs.ErrNotExist) {
		target, err = path, nil
	}
	if err != nil {
		return fmt.Errorf("resolving %s: %w", path, err)
	}
	mode := fs.FileMode(0o600)
	if fi, err := os.Stat(target); err == nil {
		mode = fi.Mode().Perm()
	}
	dir := filepath.Dir(target)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(target)+".*.tmp")
	if err != nil {
		if readOnlyErr(err) {
			return fmt.Errorf("%w: cannot create files in %s", ErrReadOnly, dir)
		}
		return fmt.Errorf("writing config: %w", err)
	}
	name := tmp.Name()
	defer os.Remove(name) // no-op after the rename
	if _, err := tmp.Write(data); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("writing config: %w", err)
	}
	if err := tmp.Chmod(mode); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("writing config: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("writing config: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("writing config: %w", err)
	}
	if err := os.Rename(name, target); err != nil {
		if errors.Is(err, syscall.EBUSY) { // a bind-mount point
			return overwrite(target, data)
		}
		if readOnlyErr(err) {
			return fmt.Errorf("%w: cannot replace %s", ErrReadOnly, target)
		}
		return fmt.Errorf("writing config: %w", err)
	}
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		_ = d.Close()
	}
	return nil
}

func overwrite(target string, data []byte) error {
	f, err := os.OpenFile(target, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		if readOnlyErr(err) {
			return fmt.Errorf("%w: cannot write %s", ErrReadOnly, target)
		}
		return fmt.Errorf("writing config: %w", err)
	}
	if _, err := f.Write(data); err != nil {
		_ = f.Close()
		return fmt.Errorf("writing config: %w", err)
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return fmt.Errorf("writing config: %w", err)
	}
	return f.Close()
}

func readOnlyErr(err error) bool {
	return errors.Is(err, syscall.EROFS) || errors.Is(err, fs.ErrPermission)
}
