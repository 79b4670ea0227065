package replicaset_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcp-mux/mcp-mux/internal/replicaset"
)

// TestNginxSession: the docs' nginx config in front of two replicas
// carries a go-sdk client's 2025-11-25 session through every interactive
// flow (its GET stream included) and 2026-07-28 calls, balanced over
// both replicas with no stickiness.
func TestNginxSession(t *testing.T) {
	if _, err := os.Stat(replicaset.NginxBin); err != nil {
		t.Skipf("%s is not installed (Debian package nginx; .ci/run installs it): %v", replicaset.NginxBin, err)
	}
	fx := newFixtureBehind(t, 2, replicaset.Nginx)
	t.Run("go-sdk", func(t *testing.T) { runGoFlows(t, fx) })

	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	for i := range 20 {
		if err := modernEcho(context.Background(), client, fx.set.URL(), "inter_echo", "nginx"+strconv.Itoa(i)); err != nil {
			t.Fatal(err)
		}
	}
	for i := range fx.set.Len() {
		n, err := toolCalls(fx.set.Replica(i))
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("replica %d served %d tool calls", i, n)
		if n == 0 {
			t.Errorf("replica %d served no tool call: nginx did not balance", i)
		}
	}
}

// toolCalls sums mcp_mux_tool_calls_total on r's ops /metrics.
func toolCalls(r *replicaset.Replica) (int, error) {
	url := strings.TrimSuffix(r.ReadyzURL(), "/readyz") + "/metrics"
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	n := 0
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "mcp_mux_tool_calls_total{") {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			return 0, fmt.Errorf("metrics line %q: %w", line, err)
		}
		n += int(v)
	}
	return n, sc.Err()
}
