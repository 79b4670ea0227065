package main

import (
	"compress/gzip"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// Issue 32, weak finding: a caller's sampled traceparent forced 100 %
// tracing at sample_ratio 0.01. The mux exports to an OTLP/HTTP receiver
// here; the figure is the SERVER spans exported for N calls that carry a
// sampled traceparent (each its own trace id), beside N calls that carry
// none, counted after the mux has flushed them on SIGTERM.

// spanCounter is an OTLP/HTTP receiver that counts the SERVER spans of
// service mcp-mux by whether their parent is remote (a caller's).
type spanCounter struct {
	mu       sync.Mutex
	withCall int // SERVER spans whose parent is a caller's span
	roots    int // SERVER spans without a parent
	all      int
}

func (c *spanCounter) start() *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body io.Reader = r.Body
		if r.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(r.Body)
			if err != nil {
				w.WriteHeader(http.StatusBadRequest)
				return
			}
			body = zr
		}
		b, _ := io.ReadAll(io.LimitReader(body, 64<<20))
		if r.URL.Path == "/v1/traces" {
			var req coltracepb.ExportTraceServiceRequest
			if proto.Unmarshal(b, &req) == nil {
				c.add(&req)
			}
		}
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.WriteHeader(http.StatusOK)
	}))
}

func (c *spanCounter) add(req *coltracepb.ExportTraceServiceRequest) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, rs := range req.ResourceSpans {
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				c.all++
				if s.Kind != tracepb.Span_SPAN_KIND_SERVER {
					continue
				}
				if len(s.ParentSpanId) > 0 {
					c.withCall++
				} else {
					c.roots++
				}
			}
		}
	}
}

func attackTraceSampling(bin, dir string) error {
	const n = 500
	var sc spanCounter
	recv := sc.start()
	defer recv.Close()
	up := serve((&up{}).script)
	defer up.Close()
	m, err := startMux(bin, dir, fmt.Sprintf(`{"mcpServers": {"up": {"type": "http", "url": %q}},
		"telemetry": {"enabled": true, "endpoint": %q, "sample_ratio": 0.01}}`, up.URL+"/mcp", recv.URL))
	if err != nil {
		return err
	}
	before := m.stats()
	sid, err := m.session("2025-11-25")
	if err != nil {
		m.stop()
		return err
	}
	for i := range 2 * n {
		meta := ""
		if i < n {
			tid := make([]byte, 16)
			_, _ = rand.Read(tid)
			meta = `,"_meta":{"traceparent":"00-` + hex.EncodeToString(tid) + `-00f067aa0ba902b7-01"}`
		}
		if _, _, err := m.post(context.Background(), sid, "2025-11-25",
			fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"up_echo","arguments":{}%s}}`, i+2, meta)); err != nil {
			m.stop()
			return err
		}
	}
	after := m.stats()
	took, code := m.stop() // flushes the spans still batched
	sc.mu.Lock()
	defer sc.mu.Unlock()
	fmt.Printf("a32-tracesample sample_ratio 0.01: %d calls with a caller's sampled traceparent exported %d SERVER spans (%.1f %%); %d calls without one exported %d (%.1f %%); %d spans in all\n",
		n, sc.withCall, 100*float64(sc.withCall)/n, n, sc.roots, 100*float64(sc.roots)/n, sc.all)
	fmt.Printf("a32-tracesample before: %s; after: %s; SIGTERM exit %d after %s\n", before, after, code, took.Round(1e6))
	return nil
}
