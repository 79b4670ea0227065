package main

import (
	"fmt"

	"github.com/hashicorp/go-hclog"

	"github.com/mcp-mux/mcp-mux/internal/approvals"
	"github.com/mcp-mux/mcp-mux/internal/config"
	"github.com/mcp-mux/mcp-mux/internal/storeclient"
)

// approvalStore returns the opener of where the approvals rules'
// requests live, called at their first use: the shared Redis client rc,
// else the embedded file approvals.db in the data directory.
func approvalStore(cfg *config.Config, rc *storeclient.Client, dir string, env func(string) (string, bool), log hclog.Logger) func() (approvals.Store, error) {
	prefix := cfg.Store.KeyPrefix
	return func() (approvals.Store, error) {
		if rc != nil {
			log.Info("approvals: Redis store", "key_prefix", prefix)
			return approvals.NewRedisStore(approvals.RedisOptions{Client: rc, KeyPrefix: prefix}), nil
		}
		d, err := dataDir(dir, env)
		if err != nil {
			return nil, fmt.Errorf("approvals need %w", err)
		}
		st, err := approvals.OpenBoltStore(approvals.BoltOptions{Dir: d})
		if err != nil {
			return nil, fmt.Errorf("approvals: %w", err)
		}
		log.Info("approvals: embedded store", "dir", d)
		return st, nil
	}
}
