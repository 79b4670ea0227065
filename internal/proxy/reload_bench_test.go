package proxy_test

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/mcp-mux/mcp-mux/internal/config"
	"github.com/mcp-mux/mcp-mux/internal/mcptest"
	"github.com/mcp-mux/mcp-mux/internal/proxy"
)

// BenchmarkConfigMapReload measures one hot reload end to end, as a
// Kubernetes deployment sees it: from the kubelet's ..data swap of a
// ConfigMap mount to tools/list serving the new server's tools. Each
// iteration adds one HTTP server and removes the previous one. It runs the
// production watcher settings (200 ms debounce), which dominate the result.
//
//	go test -run '^$' -bench ConfigMapReload -benchtime 20x ./proxy
func BenchmarkConfigMapReload(b *testing.B) {
	urls := [2]string{toolServer(b, nil, "alpha"), toolServer(b, nil, "beta")}
	doc := func(i int) string {
		return fmt.Sprintf(`{"mcpServers": {"s%d": {"type": "http", "url": %q}}}`, i, urls[i%2])
	}
	cm := mcptest.NewConfigMap(b, "extensions_config.json", doc(0))
	m := startBenchMux(b, doc(0))
	w, err := config.Watch(config.WatchOptions{
		Path: cm.Path, Initial: []byte(doc(0)),
		OnLoad: func(trigger string, cfg *config.Config, err error) error {
			if ev := m.srv.Reload(trigger, cfg, err); ev.Outcome != proxy.ReloadApplied {
				return fmt.Errorf("reload: %v", ev.Problems)
			}
			return nil
		},
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = w.Close() })
	list := `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`
	b.ResetTimer()
	for i := 1; i <= b.N; i++ {
		want := []byte(fmt.Sprintf(`"s%d_`, i))
		cm.Update(doc(i))
		deadline := time.Now().Add(30 * time.Second)
		for !bytes.Contains(m.do(b, list), want) {
			if time.Now().After(deadline) {
				b.Fatalf("iteration %d: the new tools never appeared", i)
			}
			time.Sleep(time.Millisecond)
		}
	}
}
