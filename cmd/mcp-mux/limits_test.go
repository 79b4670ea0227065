package main

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/mcp-mux/mcp-mux/internal/config"
	"github.com/mcp-mux/mcp-mux/internal/mcptest"
	"github.com/mcp-mux/mcp-mux/internal/ratelimit"
)

// Issue 32: the limits' store round trip is bounded by its documented 1 s
// (ratelimit.Store.Timeout), not by the Redis client's 5 s read timeout.
// With the limiter serve builds from store.redis_url, a real redis-server
// that stops answering (CLIENT PAUSE) decides a limited call — refused,
// failing closed — within about a second; past 3 s (room for a loaded
// machine) fails.
func TestLimitStoreRoundTripBounded(t *testing.T) {
	r := mcptest.StartRedis(t, false)
	cfg, err := config.Parse([]byte(fmt.Sprintf(`{"mcpServers": {}, "store": {"redis_url": %q},
	  "limits": {"on_store_error": "closed", "rules": [{"name": "per-caller", "scope": "caller", "calls": 100, "per_seconds": 60, "in_flight": 4}]}}`, r.URL())),
		config.LoadOptions{Filename: "limits.json"})
	if err != nil {
		t.Fatal(err)
	}
	rc, err := openRedis(cfg, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	l, err := ratelimit.New(ratelimit.Options{Store: limitStore(cfg, rc)})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	l.SetRules(cfg.Limits)
	call := ratelimit.Call{Caller: "alice", Server: "web", Tool: "web_search"}
	d := l.Admit(context.Background(), call) // the pool's connection, open
	if !d.Allowed {
		t.Fatalf("with Redis answering: %s", d.Message)
	}
	d.Release()
	if _, err := r.Do("CLIENT", "PAUSE", "5000", "ALL"); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	d = l.Admit(context.Background(), call)
	took := time.Since(start)
	t.Logf("a call decided in %v while Redis does not answer: %+v", took, d)
	if d.Allowed || d.Kind != ratelimit.KindStore {
		t.Fatalf("failing closed, the call was %+v; want refused as store_unreachable", d)
	}
	if took > 3*time.Second {
		t.Fatalf("the call waited %v for a Redis that does not answer; the documented bound is 1s", took)
	}
}
