package main

import (
	"context"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/redis/go-redis/v9"

	"github.com/mcp-mux/mcp-mux/internal/config"
	"github.com/mcp-mux/mcp-mux/internal/ratelimit"
	"github.com/mcp-mux/mcp-mux/internal/sessionstore"
)

// sessionStore returns where 2025-11-25 sessions live: with
// store.redis_url, a Redis store every replica shares (so any replica
// serves any session) and the requestState key those replicas share;
// without, nil (sessions in process) and "".
func sessionStore(cfg *config.Config, log hclog.Logger) (func(sessionstore.Options) sessionstore.Store, string, error) {
	if cfg.Store.RedisURL.IsZero() {
		return nil, "", nil
	}
	redis.SetLogger(redisLogger{log.Named("redis")})
	// Parsed once here so a bad URL stops serve; each store dials its own client.
	probe, err := sessionstore.Dial(cfg.Store.RedisURL.Reveal())
	if err != nil {
		return nil, "", err
	}
	_ = probe.Close()
	url, prefix := cfg.Store.RedisURL.Reveal(), cfg.Store.KeyPrefix
	key := ""
	if cfg.Inbound.RequestStateKey.IsZero() {
		c, _ := sessionstore.Dial(url)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		k, err := sessionstore.SharedKey(ctx, c, prefix)
		cancel()
		_ = c.Close()
		if err != nil {
			// Not fatal: sessions work; a 2026-07-28 retry of a parked
			// call then works only on the replica that parked it.
			log.Warn("sessions: no shared requestState key (Redis is not reachable yet); set inbound.request_state_key", "err", err)
		}
		key = k
	}
	log.Info("sessions: shared through Redis", "key_prefix", prefix)
	return func(o sessionstore.Options) sessionstore.Store {
		c, _ := sessionstore.Dial(url)
		return sessionstore.NewRedis(sessionstore.RedisOptions{Options: o, Client: c, KeyPrefix: prefix, Logger: log.Named("sessions")})
	}, key, nil
}

// limitStore returns where the limits rules' budgets live: with
// store.redis_url, that Redis (every replica shares them) on a client whose
// round trips the limiter's timeout bounds; without, nil (in process). The
// URL was checked by sessionStore.
func limitStore(cfg *config.Config) *ratelimit.Store {
	if cfg.Store.RedisURL.IsZero() {
		return nil
	}
	c, err := ratelimit.Dial(cfg.Store.RedisURL.Reveal())
	if err != nil {
		return nil
	}
	return &ratelimit.Store{Client: c, KeyPrefix: cfg.Store.KeyPrefix}
}
