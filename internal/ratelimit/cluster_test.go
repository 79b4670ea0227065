package ratelimit_test

import (
	"context"
	"testing"

	"github.com/mcp-mux/mcp-mux/internal/mcptest"
	"github.com/mcp-mux/mcp-mux/internal/ratelimit"
	"github.com/mcp-mux/mcp-mux/internal/secret"
	"github.com/mcp-mux/mcp-mux/internal/storeclient"
)

// TestSharedOnRedisCluster (issue 34): two limiters on a Redis Cluster of
// three masters, each on the shared client serve builds, share a rate and
// an in-flight cap (every command and script single-slot: a CROSSSLOT or
// MOVED would fail open here and admit too many).
func TestSharedOnRedisCluster(t *testing.T) {
	c := mcptest.StartRedisCluster(t, 3)
	store := func() *ratelimit.Store {
		rc, err := storeclient.Open(storeclient.Options{Mode: storeclient.Cluster, URL: secret.Value(c.URL())})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = rc.Close() })
		return &ratelimit.Store{Client: rc, KeyPrefix: "rl-cluster:", Timeout: storeTimeout}
	}
	a, b := newLimiter(t, store(), nil), newLimiter(t, store(), nil)
	a.SetRules(perCallerTool(0, 3))
	b.SetRules(perCallerTool(0, 3))
	ctx := context.Background()
	var held []ratelimit.Decision
	for i, l := range []*ratelimit.Limiter{a, b, a} {
		d := l.Admit(ctx, alice)
		if !d.Allowed {
			t.Fatalf("call %d under the cap of 3: %s", i, d.Message)
		}
		held = append(held, d)
	}
	for _, l := range []*ratelimit.Limiter{a, b} {
		if d := l.Admit(ctx, alice); d.Allowed || d.Kind != ratelimit.KindInFlight {
			t.Fatalf("a fourth call in flight across two replicas: %+v", d)
		}
	}
	for _, d := range held {
		d.Release()
	}
	a.SetRules(perCallerTool(10, 0))
	b.SetRules(perCallerTool(10, 0))
	got, _ := burst([]*ratelimit.Limiter{a, b}, 40, alice)
	if got < 9 || got > 11 {
		t.Fatalf("a rate of 10 per minute over two replicas admitted %d of 40", got)
	}
}
