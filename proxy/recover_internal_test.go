package proxy

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
)

// A plain HTTP handler's panic is a 500; a JSON-RPC call's is -32603 with
// its id; http.ErrAbortHandler keeps its meaning (the response aborts).
func TestPanicGuardHTTP(t *testing.T) {
	var logs bytes.Buffer
	g := newPanicGuard(hclog.New(&hclog.LoggerOptions{Output: &logs, JSONFormat: true}), prometheus.NewRegistry())
	boom := http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic("token=s3cret") })

	rec := httptest.NewRecorder()
	g.handler(boom).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
	if rec.Code != http.StatusInternalServerError || strings.TrimSpace(rec.Body.String()) != "internal error" {
		t.Errorf("plain handler: HTTP %d %q, want 500 internal error", rec.Code, rec.Body)
	}

	rec = httptest.NewRecorder()
	func() {
		defer g.catchHTTP(rec, []byte(`{"jsonrpc":"2.0","id":"x-9","method":"tools/call","params":{}}`))
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
	g.handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic(http.ErrAbortHandler) })).
		ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/", nil))
}
