package replicaset_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/redis/go-redis/v9"

	"github.com/mcp-mux/mcp-mux/internal/mcptest"
	"github.com/mcp-mux/mcp-mux/internal/replicaset"
)

// BenchmarkReplicas measures tools/call through the balancer in front of
// one replica and in front of three that share their sessions through
// Redis (HAProxy as the tests run it: round robin, no stickiness, no
// connection reuse). It reports the p50 of one session's sequential calls,
// the throughput of 16 sessions calling at once, and the Redis commands
// per call (sessions every replica has seen: the TTL refreshes only).
//
//	go test -run '^$' -bench Replicas -benchtime 2000x ./internal/replicaset
func BenchmarkReplicas(b *testing.B) {
	up := mcptest.ServeHTTP(b, mcptest.NewServer("up"))
	cfg := fmt.Sprintf(`{"mcpServers": {"up": {"type": "http", "url": %q}}}`, up.URL+"/mcp")
	for _, n := range []int{1, 3} {
		b.Run(fmt.Sprintf("replicas=%d", n), func(b *testing.B) {
			set := replicaset.Start(b, replicaset.Options{Binary: muxBin, Replicas: n, Config: cfg})
			benchCalls(b, set)
		})
	}
}

func benchCalls(b *testing.B, set *replicaset.Set) {
	ctx := context.Background()
	const sessions = 16
	tr := &http.Transport{MaxIdleConnsPerHost: sessions}
	b.Cleanup(tr.CloseIdleConnections)
	client := &http.Client{Transport: tr}
	var css []*mcp.ClientSession
	for range sessions {
		c := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil)
		cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: set.URL(), HTTPClient: client, DisableStandaloneSSE: true},
			&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = cs.Close() })
		css = append(css, cs)
	}
	call := func(cs *mcp.ClientSession) {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "up_echo", Arguments: map[string]any{"text": "x"}})
		if err != nil || res.IsError {
			b.Fatalf("call: %v %+v", err, res)
		}
	}
	for _, cs := range css { // every replica sees every session
		for range 6 {
			call(cs)
		}
	}
	before := redisCommands(b, set)
	b.ResetTimer()
	lat := make([]time.Duration, 0, b.N)
	for range b.N {
		start := time.Now()
		call(css[0])
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(redisCommands(b, set)-before)/float64(b.N), "redis-cmds/call")

	var wg sync.WaitGroup
	per := max(b.N/sessions, 50)
	start := time.Now()
	for _, cs := range css {
		wg.Go(func() {
			for range per {
				call(cs)
			}
		})
	}
	wg.Wait()
	b.ReportMetric(float64(per*sessions)/time.Since(start).Seconds(), "calls/s@16")
}

// redisCommands is the set's Redis's commands processed so far.
func redisCommands(b *testing.B, set *replicaset.Set) int64 {
	c := redis.NewClient(&redis.Options{Addr: set.Redis().Addr})
	defer c.Close()
	info, err := c.Info(context.Background(), "stats").Result()
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "total_commands_processed:"); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	b.Fatal("no total_commands_processed in INFO")
	return 0
}
