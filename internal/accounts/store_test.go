package accounts

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/mcp-mux/mcp-mux/internal/mcptest"
	"github.com/mcp-mux/mcp-mux/internal/storeclient"
)

// The store holds no plain user id, token, code or client secret: not in
// a Redis key or value, not anywhere in the bbolt file.
func TestStoreHoldsNothingPlain(t *testing.T) {
	plain := []string{"alice-the-user", markerAccess, markerRefresh, markerSecret, markerCode}
	check := func(t *testing.T, what, text string) {
		for _, p := range plain {
			if strings.Contains(text, p) {
				t.Errorf("%s holds %q", what, p)
			}
		}
	}
	t.Run("bolt", func(t *testing.T) {
		dir := t.TempDir()
		s, err := OpenBoltStore(BoltOptions{Dir: dir})
		if err != nil {
			t.Fatal(err)
		}
		e := newEnv(t, newFixture(t), s, nil)
		e.connect("alice-the-user")
		_, _ = e.start("alice-the-user", StartRequest{}) // a pending record too
		_ = s.Close()
		b, err := os.ReadFile(filepath.Join(dir, "accounts.db"))
		if err != nil {
			t.Fatal(err)
		}
		check(t, "the bbolt file", string(b))
	})
	t.Run("redis", func(t *testing.T) {
		rs := mcptest.StartRedis(t, false)
		c := storeclient.Wrap(redis.NewClient(&redis.Options{Addr: rs.Addr}))
		defer c.Close()
		e := newEnv(t, newFixture(t), redisMaker(t, c)(), nil)
		e.connect("alice-the-user")
		_, _ = e.start("alice-the-user", StartRequest{})
		ctx := context.Background()
		keys, _ := c.Keys(ctx, "*").Result()
		var all strings.Builder
		for _, k := range keys {
			all.WriteString(k + "\n")
			switch c.Type(ctx, k).Val() {
			case "string":
				all.WriteString(c.Get(ctx, k).Val())
			case "hash":
				fmt.Fprint(&all, c.HGetAll(ctx, k).Val())
			case "set":
				fmt.Fprint(&all, c.SMembers(ctx, k).Val())
			case "zset":
				fmt.Fprint(&all, c.ZRange(ctx, k, 0, -1).Val())
			}
		}
		if len(keys) < 5 {
			t.Fatalf("keys: %v", keys)
		}
		check(t, "Redis", all.String())
	})
}
