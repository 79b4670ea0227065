package main

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/redis/go-redis/v9"

	"github.com/mcp-mux/mcp-mux/internal/config"
	"github.com/mcp-mux/mcp-mux/internal/ratelimit"
	"github.com/mcp-mux/mcp-mux/internal/sessionstore"
	"github.com/mcp-mux/mcp-mux/internal/spill"
	"github.com/mcp-mux/mcp-mux/internal/storeclient"
)

// openRedis returns the one Redis client every room shares (sessions,
// durable tasks, limits, the shared requestState key), built from the
// store block; nil without store.redis_url. The caller closes it after
// every store on it.
func openRedis(cfg *config.Config, log hclog.Logger) (*storeclient.Client, error) {
	s := cfg.Store
	if s.RedisURL.IsZero() {
		return nil, nil
	}
	// go-redis logs through a package-level logger; send it to ours so no
	// plain-text line lands in a JSON log stream.
	redis.SetLogger(redisLogger{log.Named("redis")})
	c, err := storeclient.Open(storeclient.Options{Mode: s.RedisMode, URL: s.RedisURL, SentinelPassword: s.SentinelPassword,
		CAFile: s.TLSCAFile, PoolSize: s.PoolSize})
	if err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	log.Info("store: Redis", "mode", c.Mode(), "key_prefix", s.KeyPrefix, "pool_size_per_node", poolSize(c))
	return c, nil
}

// poolSize is the connections per node the client keeps at most.
func poolSize(c *storeclient.Client) int {
	switch u := c.UniversalClient.(type) {
	case *redis.Client:
		return u.Options().PoolSize
	case *redis.ClusterClient:
		return u.Options().PoolSize
	}
	return 0
}

// sessionStore returns where 2025-11-25 sessions live: with a store client,
// a Redis store every replica shares (so any replica serves any session)
// and the requestState key those replicas share; without, nil (sessions
// in process) and "".
func sessionStore(cfg *config.Config, c *storeclient.Client, log hclog.Logger) (func(sessionstore.Options) sessionstore.Store, string) {
	if c == nil {
		return nil, ""
	}
	prefix := cfg.Store.KeyPrefix
	key := ""
	if cfg.Inbound.RequestStateKey.IsZero() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		k, err := sessionstore.SharedKey(ctx, c, prefix)
		cancel()
		if err != nil {
			// Not fatal: sessions work; a 2026-07-28 retry of a parked
			// call then works only on the replica that parked it.
			log.Warn("sessions: no shared requestState key (Redis is not reachable yet); set inbound.request_state_key", "err", err)
		}
		key = k
	}
	log.Info("sessions: shared through Redis", "key_prefix", prefix)
	return func(o sessionstore.Options) sessionstore.Store {
		return sessionstore.NewRedis(sessionstore.RedisOptions{Options: o, Client: c, KeyPrefix: prefix, Logger: log.Named("sessions")})
	}, key
}

// limitStore returns where the limits rules' budgets live: with a store
// client, that Redis (every replica shares them; its round trips end at
// the limiter's timeout); without, nil (in process).
func limitStore(cfg *config.Config, c *storeclient.Client) *ratelimit.Store {
	if c == nil {
		return nil
	}
	return &ratelimit.Store{Client: c, KeyPrefix: cfg.Store.KeyPrefix}
}

// spillStore is where the result guards keep spilled results: with the
// shared Redis client c, that Redis (any replica serves a caller's
// result); nil (in process) without one.
func spillStore(cfg *config.Config, c *storeclient.Client) spill.Store {
	if c == nil {
		return nil
	}
	return spill.NewRedis(spill.RedisOptions{Client: c, KeyPrefix: cfg.Store.KeyPrefix})
}
