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
	target, mode, err := writeTarget(path)
	if err != nil {
		return err
	}
	dir := filepath.Dir(target)
	tmp, err := createTemp(dir, target)
	if err != nil {
		return err
	}
	name := tmp.Name()
	defer os.Remove(name) // no-op after the rename
	if err := fillTemp(tmp, data, mode); err != nil {
		return fmt.Errorf("writing config: %w", err)
	}
	if err := replaceWith(name, target, data); err != nil {
		return err
	}
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		_ = d.Close()
	}
	return nil
}

// createTemp creates the temp file (".<name>.*.tmp") beside target in dir.
func createTemp(dir, target string) (*os.File, error) {
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(target)+".*.tmp")
	if err == nil {
		return tmp, nil
	}
	if readOnlyErr(err) {
		return nil, fmt.Errorf("%w: cannot create files in %s", ErrReadOnly, dir)
	}
	return nil, fmt.Errorf("writing config: %w", err)
}

// writeTarget resolves the file a write replaces (a symlink's target; the
// path itself when it does not exist yet) and the mode to give it (the
// existing file's, else 0600).
func writeTarget(path string) (string, fs.FileMode, error) {
	target, err := filepath.EvalSymlinks(path)
	if errors.Is(err, fs.ErrNotExist) {
		target, err = path, nil
	}
	if err != nil {
		return "", 0, fmt.Errorf("resolving %s: %w", path, err)
	}
	mode := fs.FileMode(0o600)
	if fi, err := os.Stat(target); err == nil {
		mode = fi.Mode().Perm()
	}
	return target, mode, nil
}

// fillTemp sets the temp file's mode, writes data, syncs and closes it
// (closing it on failure too).
func fillTemp(tmp *os.File, data []byte, mode fs.FileMode) error {
	if err := tmp.Chmod(mode); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := writeSync(tmp, data); err != nil {
		return err
	}
	return tmp.Close()
}

// writeSync writes data to f and syncs it; on failure it closes f.
func writeSync(f *os.File, data []byte) error {
	_, err := f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if err != nil {
		_ = f.Close()
	}
	return err
}

// replaceWith renames the written temp file over target; a bind-mounted
// target, which cannot be renamed over, is overwritten in place.
func replaceWith(name, target string, data []byte) error {
	err := os.Rename(name, target)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, syscall.EBUSY): // a bind-mount point
		return overwrite(target, data)
	case readOnlyErr(err):
		return fmt.Errorf("%w: cannot replace %s", ErrReadOnly, target)
	}
	return fmt.Errorf("writing config: %w", err)
}

// overwrite writes data over target in place.
func overwrite(target string, data []byte) error {
	f, err := os.OpenFile(target, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		if readOnlyErr(err) {
			return fmt.Errorf("%w: cannot write %s", ErrReadOnly, target)
		}
		return fmt.Errorf("writing config: %w", err)
	}
	if err := writeSync(f, data); err != nil {
		return fmt.Errorf("writing config: %w", err)
	}
	return f.Close()
}

// readOnlyErr reports whether err means the file system refuses writes.
func readOnlyErr(err error) bool {
	return errors.Is(err, syscall.EROFS) || errors.Is(err, fs.ErrPermission)
}
