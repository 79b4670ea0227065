package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/mcp-mux/mcp-mux/internal/config"
	"github.com/mcp-mux/mcp-mux/internal/mcptest"
	"github.com/mcp-mux/mcp-mux/internal/spill"
)

// Spilled results live in the store.redis_url Redis under store.key_prefix
// (so a second process on it reads them), and in process without one.
func TestSpillStore(t *testing.T) {
	if s := spillStore(&config.Config{}, nil); s != nil {
		t.Fatalf("without Redis: %T, want nil (in process)", s)
	}
	r := mcptest.StartRedis(t, false)
	cfg, err := config.Parse([]byte(fmt.Sprintf(`{"mcpServers": {}, "store": {"redis_url": %q, "key_prefix": "team-a:"}}`, r.URL())), config.LoadOptions{Filename: "spill.json"})
	if err != nil {
		t.Fatal(err)
	}
	open := func() spill.Store {
		rc, err := openRedis(cfg, hclog.NewNullLogger())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = rc.Close() })
		return spillStore(cfg, rc)
	}
	one, two := open(), open()
	ctx := context.Background()
	if err := one.Put(ctx, "alice", "id1", []byte(`{"content":[]}`), time.Minute); err != nil {
		t.Fatal(err)
	}
	if got, err := two.Get(ctx, "alice", "id1"); err != nil || string(got) != `{"content":[]}` {
		t.Errorf("the other process reads %s, %v", got, err)
	}
	keys, err := r.Do("KEYS", "team-a:spill:*") // the reply's first line: "*2" (the result and the index)
	if err != nil || strings.TrimSpace(keys) != "*2" {
		t.Errorf("no key under the configured prefix: %q, %v", keys, err)
	}
}
