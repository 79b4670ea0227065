package main

import (
	"fmt"

	"github.com/hashicorp/go-hclog"

	"github.com/mcp-mux/mcp-mux/internal/config"
	"github.com/mcp-mux/mcp-mux/internal/storeclient"
	"github.com/mcp-mux/mcp-mux/internal/toolpin"
)

// pinStore returns the opener of where pinned tool definitions live,
// called when a server with pin_tools first needs it: the shared Redis
// client rc, else the embedded file pins.db in the data directory.
func pinStore(cfg *config.Config, rc *storeclient.Client, dir string, env func(string) (string, bool), log hclog.Logger) func() (toolpin.Store, error) {
	prefix := cfg.Store.KeyPrefix
	return func() (toolpin.Store, error) {
		if rc != nil {
			log.Info("pins: Redis store", "key_prefix", prefix)
			return toolpin.NewRedisStore(toolpin.RedisOptions{Client: rc, KeyPrefix: prefix}), nil
		}
		d, err := dataDir(dir, env)
		if err != nil {
			return nil, fmt.Errorf("pinned tool definitions need %w", err)
		}
		st, err := toolpin.OpenBoltStore(toolpin.BoltOptions{Dir: d})
		if err != nil {
			return nil, fmt.Errorf("pins: %w", err)
		}
		log.Info("pins: embedded store", "dir", d)
		return st, nil
	}
}

// closePins closes the pins store, if it was opened.
func closePins(g *toolpin.Guard, log hclog.Logger) {
	if err := g.Close(); err != nil {
		log.Warn("closing the pins store", "err", err)
	}
}
