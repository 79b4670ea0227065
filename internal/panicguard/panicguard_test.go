package panicguard

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"
)

// A plain HTTP handler's panic is a 500; a JSON-RPC call's is -32603 with
// its id; http.ErrAbortHandler keeps its meaning (the response aborts).
func TestPanicGuardHTTP(t *testing.T) {
	var logs bytes.Buffer
	g := New(hclog.New(&hclog.LoggerOptions{Output: &logs, JSONFormat: true}), prometheus.NewRegistry())
	boom := http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic("token=s3cret") })

	rec := httptest.NewRecorder()
	g.Handler(boom).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
	if rec.Code != http.StatusInternalServerError || strings.TrimSpace(rec.Body.String()) != "internal error" {
		t.Errorf("plain handler: HTTP %d %q, want 500 internal error", rec.Code, rec.Body)
	}

	rec = httptest.NewRecorder()
	func() {
		defer g.CatchHTTP(rec, []byte(`{"jsonrpc":"2.0","id":"x-9","method":"tools/call","params":{}}`))
		boom(rec, nil)
	}()
	if rec.Code != http.StatusOK || rec.Body.String() != `{"jsonrpc":"2.0","id":"x-9","error":{"code":-32603,"message":"internal error"}}` {
		t.Errorf("JSON-RPC call: HTTP %d %s", rec.Code, rec.Body)
	}
	if n := strings.Count(logs.String(), "panic while serving a request"); n != 2 || strings.Contains(logs.String(), "s3cret") {
		t.Errorf("want two records without the panic's value, got %s", logs.String())
	}

	defer func() {
		if p := recover(); p != http.ErrAbortHandler { //nolint:errorlint // a sentinel panic value
			t.Errorf("recovered %v, want http.ErrAbortHandler passed on", p)
		}
	}()
	g.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic(http.ErrAbortHandler) })).
		ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/", nil))
}

// Catch turns a panic into ErrPanicked and counts it by where; the
// middleware answers a panicking method handler's request the same way.
func TestCatchAndMiddleware(t *testing.T) {
	reg := prometheus.NewRegistry()
	g := New(hclog.NewNullLogger(), reg)
	call := func() (err error) {
		defer g.Catch(Bridge, &err)
		var m map[string]int
		m["x"] = 1 // a runtime error
		return nil
	}
	if err := call(); err != ErrPanicked { //nolint:errorlint // the sentinel itself
		t.Errorf("Catch: %v, want ErrPanicked", err)
	}
	h := g.Middleware(func(context.Context, string, mcp.Request) (mcp.Result, error) { panic("boom") })
	if _, err := h(context.Background(), "tools/call", nil); err != ErrPanicked { //nolint:errorlint // the sentinel itself
		t.Errorf("Middleware: %v, want ErrPanicked", err)
	}
	got := map[string]float64{}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			got[m.GetLabel()[0].GetValue()] = m.GetCounter().GetValue()
		}
	}
	want := map[string]float64{HTTP: 0, SDK: 1, Bridge: 1, Upstream: 0, Task: 0}
	for w, n := range want {
		if got[w] != n {
			t.Errorf("mcp_mux_panics_total{where=%q} = %v, want %v (all: %v)", w, got[w], n, got)
		}
	}
}
