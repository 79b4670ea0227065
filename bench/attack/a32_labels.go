package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"
)

// Issue 32, attacks 1 and 4: names and ids a caller chooses. 100 calls of
// an unknown tool and 100 prompts/get of an unknown prompt, each with a 1
// MB name, then 400 calls with a 1 MB JSON-RPC id (span export on, its
// collector not answering): RSS before and after, the /metrics and
// /api/status sizes and the time a scrape takes.
func attackLabels(bin, dir string) error {
	u := &up{}
	upstream := serve(u.script)
	defer upstream.Close()
	// A collector that never answers: spans queue up in the mux.
	stalled := stalledCollector()
	defer stalled.Close()
	m, err := startMux(bin, dir, fmt.Sprintf(`{"mcpServers": {"up": {"type": "http", "url": %q}},
		"telemetry": {"enabled": true, "endpoint": %q, "sample_ratio": 1}}`, upstream.URL+"/mcp", stalled.URL))
	if err != nil {
		return err
	}
	defer m.stop()
	sid, err := m.session("2025-11-25")
	if err != nil {
		return err
	}
	fmt.Printf("labels: before: %s; /metrics %s\n", m.stats(), m.scrape("/metrics"))
	huge := strings.Repeat("n", 1<<20)
	refused := 0
	for i := 0; i < 100; i++ {
		for _, method := range []string{"tools/call", "prompts/get"} {
			body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":{"name":"%s%d","arguments":{}}}`, i, method, huge, i)
			if st, _, _ := m.post(context.Background(), sid, "2025-11-25", body); st == http.StatusBadRequest {
				refused++
			}
		}
	}
	fmt.Printf("labels: 200 calls with 1 MB names, %d refused at the edge: %s; /metrics %s; /api/status %s; / %s\n",
		refused, m.stats(), m.scrape("/metrics"), m.scrape("/api/status"), m.scrape("/"))
	for i := 0; i < 1000; i++ {
		body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"invented_%04d_%s","arguments":{}}}`, i, i, strings.Repeat("z", 100))
		_, _, _ = m.post(context.Background(), sid, "2025-11-25", body)
	}
	fmt.Printf("labels: 1,000 calls of invented 110-byte names: %s; /metrics %s\n", m.stats(), m.scrape("/metrics"))
	refused = 0
	for i := 0; i < 400; i++ {
		body := fmt.Sprintf(`{"jsonrpc":"2.0","id":"%s%d","method":"tools/call","params":{"name":"up_echo","arguments":{}}}`, huge, i)
		if st, _, _ := m.post(context.Background(), sid, "2025-11-25", body); st == http.StatusBadRequest {
			refused++
		}
	}
	fmt.Printf("ids: 400 calls with 1 MB ids (collector stalled), %d refused at the edge: %s\n", refused, m.stats())
	return nil
}

// scrape returns the size of path's answer and how long it took.
func (m *mux) scrape(path string) string {
	start := time.Now()
	resp, err := m.client.Get(m.base + path)
	if err != nil {
		return "error: " + err.Error()
	}
	n, _ := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return fmt.Sprintf("%d bytes in %s", n, time.Since(start).Round(time.Millisecond))
}

// stalledCollector accepts OTLP requests and answers none until closed.
func stalledCollector() *stalled {
	s := &stalled{stop: make(chan struct{})}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-s.stop:
		case <-r.Context().Done():
		}
	}))
	return s
}

type stalled struct {
	*httptest.Server
	stop chan struct{}
}

func (s *stalled) Close() {
	close(s.stop)
	s.Server.Close()
}
