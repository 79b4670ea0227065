// Package nodeclients installs the pinned npm MCP clients and servers that
// mcp-mux's tests drive it with — the TypeScript SDK client
// (@modelcontextprotocol/sdk 1.32.2), the v2 client
// (@modelcontextprotocol/client 2.4.0) and the reference server
// @modelcontextprotocol/server-everything — and the small driver scripts
// that exercise them.
//
// package.json and package-lock.json (committed, embedded) pin every
// package; Install runs `npm ci` once into a cache directory keyed by the
// lock file's hash and returns that directory. Tests that need Node fail
// when node or npm is missing: CI (.ci/run) provides both.
package nodeclients

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
)

//go:embed package.json package-lock.json *.mjs
var files embed.FS

// EnvCache names a directory to install into instead of the user cache.
const EnvCache = "MCP_MUX_NODE_CACHE"

var (
	once    sync.Once
	dir     string
	instErr error
)

// Install installs the pinned packages (once per process; across processes
// the cache directory is shared and guarded by a file lock) and returns the
// directory holding node_modules and the driver scripts. It fails t when
// node or npm is missing or the install fails.
func Install(t testing.TB) string {
	t.Helper()
	once.Do(func() { dir, instErr = InstallFS("nodeclients", files) })
	if instErr != nil {
		t.Fatalf("nodeclients: %v", instErr)
	}
	return dir
}

// Node returns the path of the node binary, failing t when there is none.
func Node(t testing.TB) string {
	t.Helper()
	p, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("nodeclients: node is required (CI installs it in .ci/run): %v", err)
	}
	return p
}

// ServerEverything returns the command and arguments that run
// server-everything over stdio from an installed directory.
func ServerEverything(t testing.TB) (string, []string) {
	t.Helper()
	d := Install(t)
	return Node(t), []string{filepath.Join(d, "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js"), "stdio"}
}

// Script returns the path of an embedded driver script in the installed directory.
func Script(t testing.TB, name string) string {
	t.Helper()
	p := filepath.Join(Install(t), name)
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("nodeclients: no script %s: %v", name, err)
	}
	return p
}

// InstallFS installs the packages fsys pins (its package.json and
// package-lock.json, at its root) and its other files into the cache
// directory name-<the lock file's hash>, under a file lock, and returns
// that directory. Other test support with its own pinned npm packages
// installs them through it.
func InstallFS(name string, fsys fs.FS) (string, error) {
	if err := requireTools(); err != nil {
		return "", err
	}
	lock, err := fs.ReadFile(fsys, "package-lock.json")
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(lock)
	d := filepath.Join(cacheBase(), name+"-"+hex.EncodeToString(sum[:6]))
	if err := os.MkdirAll(d, 0o755); err != nil {
		return "", err
	}
	unlock, err := lockDir(d)
	if err != nil {
		return "", err
	}
	defer unlock()
	// The scripts are rewritten every time (they are not part of the hash).
	if err := writeScripts(d, fsys); err != nil {
		return "", err
	}
	if err := npmCI(d, hex.EncodeToString(sum[:])); err != nil {
		return "", err
	}
	return d, nil
}

// requireTools checks that node and npm are on the PATH.
func requireTools() error {
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("%s is required (CI installs it in .ci/run): %w", tool, err)
		}
	}
	return nil
}

// cacheBase returns the directory the installs go under: EnvCache, else
// mcp-mux in the user cache (or temporary) directory.
func cacheBase() string {
	if base := os.Getenv(EnvCache); base != "" {
		return base
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	return filepath.Join(cache, "mcp-mux")
}

// lockDir takes the install lock of d and returns its release. Several test
// binaries may install at once: one runs npm ci, the others wait for it.
func lockDir(d string) (unlock func(), err error) {
	lf, err := os.OpenFile(filepath.Join(d, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(lf.Fd()), syscall.LOCK_EX); err != nil {
		lf.Close()
		return nil, fmt.Errorf("locking %s: %w", d, err)
	}
	return func() {
		_ = syscall.Flock(int(lf.Fd()), syscall.LOCK_UN)
		lf.Close()
	}, nil
}

// writeScripts writes the files of fsys into d, leaving unchanged ones
// alone.
func writeScripts(d string, fsys fs.FS) error {
	return fs.WalkDir(fsys, ".", func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		b, err := fs.ReadFile(fsys, p)
		if err != nil {
			return err
		}
		return writeIfChanged(filepath.Join(d, p), b)
	})
}

// npmCI runs npm ci in d unless the stamp file there says the lock file of
// hash sum was installed already, and then writes the stamp.
func npmCI(d, sum string) error {
	stamp := filepath.Join(d, "node_modules", ".mcp-mux-installed")
	if b, err := os.ReadFile(stamp); err == nil && string(b) == sum {
		return nil
	}
	cmd := exec.Command("npm", "ci", "--no-audit", "--no-fund", "--loglevel=error")
	cmd.Dir = d
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("npm ci in %s: %w\n%s", d, err, out)
	}
	return os.WriteFile(stamp, []byte(sum), 0o644)
}

// writeIfChanged writes b to path through a temporary file, unless path
// holds b already.
func writeIfChanged(path string, b []byte) error {
	if old, err := os.ReadFile(path); err == nil && string(old) == string(b) {
		return nil
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
