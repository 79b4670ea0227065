package main

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/hashicorp/go-hclog"

	"github.com/mcp-mux/mcp-mux/internal/accounts"
	"github.com/mcp-mux/mcp-mux/internal/config"
	"github.com/mcp-mux/mcp-mux/internal/storeclient"
)

// openAccountStore opens where connected accounts live when
// inbound.public_url is set (nil when it is not): the shared Redis client
// rc, else the embedded file accounts.db in the data directory. Without
// inbound.request_state_key or Redis, the key the vault is sealed under
// is kept beside it (localStateKey), so that tokens outlive a restart;
// key is that key ("" otherwise).
func openAccountStore(cfg *config.Config, rc *storeclient.Client, dir string, env func(string) (string, bool), log hclog.Logger) (st accounts.Store, key string, err error) {
	if cfg.Inbound.PublicURL == "" {
		return nil, "", nil
	}
	if rc != nil {
		log.Info("connected accounts: Redis store", "key_prefix", cfg.Store.KeyPrefix)
		return accounts.NewRedisStore(accounts.RedisOptions{Client: rc, KeyPrefix: cfg.Store.KeyPrefix}), "", nil
	}
	if dir, err = dataDir(dir, env); err != nil {
		return nil, "", fmt.Errorf("connected accounts need %w", err)
	}
	if cfg.Inbound.RequestStateKey.IsZero() {
		if key, err = localStateKey(dir); err != nil {
			return nil, "", fmt.Errorf("connected accounts: %w", err)
		}
	}
	b, err := accounts.OpenBoltStore(accounts.BoltOptions{Dir: dir})
	if err != nil {
		return nil, "", fmt.Errorf("connected accounts: %w", err)
	}
	log.Info("connected accounts: embedded store", "dir", dir)
	return b, key, nil
}

// stateKeyFile is the file in the data directory holding the key a
// single mcp-mux seals with when the config names none.
const stateKeyFile = "state.key"

// localStateKey returns the key in dir/state.key, made (32 random bytes,
// hex, mode 0600) when there is none.
func localStateKey(dir string) (string, error) {
	path := filepath.Join(dir, stateKeyFile)
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		if k := strings.TrimSpace(string(b)); len(k) >= 32 {
			return k, nil
		}
		return "", fmt.Errorf("%s holds no key of 32 bytes or more; remove it to make a new one (connected accounts are then asked again)", path)
	case !errors.Is(err, fs.ErrNotExist):
		return "", fmt.Errorf("reading the state key: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("creating the data directory: %w", err)
	}
	raw := make([]byte, 32)
	_, _ = rand.Read(raw) // never fails (crypto/rand)
	k := hex.EncodeToString(raw)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", fmt.Errorf("writing the state key: %w", err)
	}
	if _, err := f.WriteString(k + "\n"); err != nil {
		_ = f.Close()
		return "", fmt.Errorf("writing the state key: %w", err)
	}
	if err := f.Close(); err != nil {
		return "", fmt.Errorf("writing the state key: %w", err)
	}
	return k, nil
}
