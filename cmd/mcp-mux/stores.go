package main

import (
	"fmt"

	"github.com/hashicorp/go-hclog"

	"github.com/mcp-mux/mcp-mux/internal/approvals"
	"github.com/mcp-mux/mcp-mux/internal/config"
	"github.com/mcp-mux/mcp-mux/internal/storeclient"
	"github.com/mcp-mux/mcp-mux/internal/toolpin"
)

// lazyStore is a store opened at its first use: in the shared Redis when
// there is one, else in its own bbolt file in the data directory.
type lazyStore[T any] struct {
	what  string // "approvals", "pinned tool definitions": names it in errors
	tag   string // "approvals", "pins": names it in log lines
	rc    *storeclient.Client
	dir   string
	env   func(string) (string, bool)
	log   hclog.Logger
	redis func(rc *storeclient.Client, prefix string) T
	bolt  func(dir string) (T, error)
}

// opener returns the function that opens the store (cfg's key prefix on
// Redis).
func (l lazyStore[T]) opener(cfg *config.Config) func() (T, error) {
	prefix := cfg.Store.KeyPrefix
	return func() (T, error) {
		var none T
		if l.rc != nil {
			l.log.Info(l.tag+": Redis store", "key_prefix", prefix)
			return l.redis(l.rc, prefix), nil
		}
		d, err := dataDir(l.dir, l.env)
		if err != nil {
			return none, fmt.Errorf("%s need %w", l.what, err)
		}
		st, err := l.bolt(d)
		if err != nil {
			return none, fmt.Errorf("%s: %w", l.tag, err)
		}
		l.log.Info(l.tag+": embedded store", "dir", d)
		return st, nil
	}
}

// approvalStore returns the opener of where the approvals rules'
// requests live, called at their first use: the shared Redis client rc,
// else the embedded file approvals.db in the data directory.
func approvalStore(cfg *config.Config, rc *storeclient.Client, dir string, env func(string) (string, bool), log hclog.Logger) func() (approvals.Store, error) {
	return lazyStore[approvals.Store]{what: "approvals", tag: "approvals", rc: rc, dir: dir, env: env, log: log,
		redis: func(rc *storeclient.Client, prefix string) approvals.Store {
			return approvals.NewRedisStore(approvals.RedisOptions{Client: rc, KeyPrefix: prefix})
		},
		bolt: func(d string) (approvals.Store, error) { return approvals.OpenBoltStore(approvals.BoltOptions{Dir: d}) },
	}.opener(cfg)
}

// pinStore returns the opener of where pinned tool definitions live,
// called when a server with pin_tools first needs it: the shared Redis
// client rc, else the embedded file pins.db in the data directory.
func pinStore(cfg *config.Config, rc *storeclient.Client, dir string, env func(string) (string, bool), log hclog.Logger) func() (toolpin.Store, error) {
	return lazyStore[toolpin.Store]{what: "pinned tool definitions", tag: "pins", rc: rc, dir: dir, env: env, log: log,
		redis: func(rc *storeclient.Client, prefix string) toolpin.Store {
			return toolpin.NewRedisStore(toolpin.RedisOptions{Client: rc, KeyPrefix: prefix})
		},
		bolt: func(d string) (toolpin.Store, error) { return toolpin.OpenBoltStore(toolpin.BoltOptions{Dir: d}) },
	}.opener(cfg)
}

// closePins closes the pins store, if it was opened.
func closePins(g *toolpin.Guard, log hclog.Logger) {
	if err := g.Close(); err != nil {
		log.Warn("closing the pins store", "err", err)
	}
}
