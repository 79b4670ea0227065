package proxy_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mcp-mux/mcp-mux/internal/config"

	"github.com/mcp-mux/mcp-mux/internal/mcptest"
	"github.com/mcp-mux/mcp-mux/internal/proxy"
	"github.com/mcp-mux/mcp-mux/internal/status"
	"github.com/mcp-mux/mcp-mux/internal/upstream"
)

// A running server's state is upstream's, reported as is: the words of
// both packages agree.
func TestStatusStatesAreUpstreams(t *testing.T) {
	for up, st := range map[string]string{upstream.StateStarting: status.Starting, upstream.StateUp: status.Up, upstream.StateRetrying: status.Retrying} {
		if up != st {
			t.Errorf("upstream reports %q, status names it %q", up, st)
		}
	}
}

func get(t *testing.T, url, host, auth string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := testHTTP.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// The DNS-rebinding check guards every endpoint of the listener, not just /mcp.
func TestHostCheckOnEveryEndpoint(t *testing.T) {
	m := startMux(t, `{"mcpServers": {}}`, proxy.Options{})
	for _, path := range []string{"/mcp", "/healthz", "/readyz", "/metrics", "/.well-known/oauth-protected-resource", "/nowhere"} {
		if code, body := get(t, m.ts.URL+path, "rebound.example", ""); code != http.StatusForbidden {
			t.Errorf("GET %s with a foreign Host: %d %s, want 403", path, code, body)
		}
	}
	for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
		if code, body := get(t, m.ts.URL+path, "", ""); code != http.StatusOK {
			t.Errorf("GET %s: %d %s", path, code, body)
		}
	}
}

// /readyz counts servers by state and names none unless the admin token is
// presented; then it lists each with its reason.
func TestReadyzCountsAndDetail(t *testing.T) {
	up := mcptest.ServeHTTP(t, mcptest.NewServer("web"))
	hung := mcptest.Hung(t)
	cfg, err := config.Parse([]byte(`{"mcpServers": {
		"web":  {"type": "http", "url": "`+up.URL+`/mcp"},
		"hung": {"type": "http", "url": "`+hung.URL+`/mcp", "session_init_timeout": 0.3},
		"off":  {"type": "http", "url": "http://127.0.0.1:1/mcp", "enabled": false},
		"bad":  {"type": "http"},
		"oops": {"type": "http", "url": "http://127.0.0.1:1/mcp", "oauth": {"token_url": "ftp://x", "client_id": "c", "client_secret": "s"}}
	}, "admin": {"token": "adm-123456"}}`), config.LoadOptions{Filename: "test.json"})
	if err != nil || len(cfg.Invalid) != 2 {
		t.Fatalf("config: %v, invalid %+v", err, cfg.Invalid)
	}
	srv := proxy.New(proxy.Options{RetryMin: time.Hour})
	if err := srv.Apply(cfg); err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Close(ctx)
		ts.Close()
	})
	m := &mux{srv: srv, ts: ts}
	type ready struct {
		Ready   bool
		Tools   int
		Servers map[string]int
		Detail  []proxy.ServerStatus
	}
	var r ready
	// Readiness turns on once every first discovery attempt has ended,
	// a moment after the states show it.
	waitFor(t, "web up, hung retrying and ready", func() bool {
		_, body := get(t, m.ts.URL+"/readyz", "", "")
		r = ready{}
		_ = json.Unmarshal([]byte(body), &r)
		return r.Servers["up"] == 1 && r.Servers["retrying"] == 1 && r.Ready
	})
	want := map[string]int{"up": 1, "retrying": 1, "starting": 0, "disabled": 1, "invalid": 2, "skipped": 0}
	if !r.Ready || r.Tools == 0 || len(r.Servers) != len(want) || r.Detail != nil {
		t.Errorf("unauthenticated /readyz = %+v", r)
	}
	for k, n := range want {
		if r.Servers[k] != n {
			t.Errorf("servers[%s] = %d, want %d (%v)", k, r.Servers[k], n, r.Servers)
		}
	}
	_, body := get(t, m.ts.URL+"/readyz", "", "")
	for _, name := range []string{"web", "hung", "off", "bad", "oops", "timed out"} {
		if strings.Contains(body, `"`+name) || strings.Contains(body, name+`"`) {
			t.Errorf("unauthenticated /readyz names %q: %s", name, body)
		}
	}
	if _, body := get(t, m.ts.URL+"/readyz", "", "Bearer wrong-token"); strings.Contains(body, "detail") {
		t.Errorf("a wrong admin token got the detail: %s", body)
	}
	_, body = get(t, m.ts.URL+"/readyz", "", "Bearer adm-123456")
	r = ready{}
	if err := json.Unmarshal([]byte(body), &r); err != nil {
		t.Fatal(err)
	}
	states := map[string]proxy.ServerStatus{}
	for _, st := range r.Detail {
		states[st.Name] = st
	}
	for name, state := range map[string]string{"web": "up", "hung": "retrying", "off": "disabled", "bad": "invalid", "oops": "invalid"} {
		if st := states[name]; st.State != state {
			t.Errorf("detail %s = %+v, want state %s", name, st, state)
		}
	}
	if !strings.Contains(states["hung"].Reason, "timed out") || states["bad"].Reason == "" || states["oops"].Reason == "" || states["web"].Tools == 0 {
		t.Errorf("detail lacks reasons or tools: %+v", r.Detail)
	}
}

// A server's max_sessions and idle_timeout_seconds reach its pool: three
// threads (three client sessions) share two upstream sessions, and an idle
// stdio session (its process) is closed after the timeout.
func TestPoolBoundsFromConfig(t *testing.T) {
	m := startMux(t, `{"mcpServers": {`+stdioServerJSON(t, "idle", mcptest.StdioOptions{}, `, "idle_timeout_seconds": 1, "max_sessions": 2`)+`}}`, proxy.Options{})
	cs := connect(t, m.ts.URL, nil)
	if got, _ := callText(t, cs, "idle_count", nil); got != "1" {
		t.Fatalf("idle_count = %q", got)
	}
	sessions := func() int {
		for _, ss := range m.srv.Status().Servers {
			if ss.Name == "idle" {
				return ss.UpstreamSessions
			}
		}
		return -1
	}
	if n := sessions(); n != 1 {
		t.Fatalf("upstream sessions after a call = %d, want 1", n)
	}
	for i := range 2 {
		other := connect(t, m.ts.URL, nil) // another thread
		if got, _ := callText(t, other, "idle_count", nil); got != "1" {
			t.Errorf("thread %d: idle_count = %q, want 1", i, got)
		}
		if n := sessions(); n > 2 {
			t.Errorf("upstream sessions = %d above max_sessions 2", n)
		}
	}
	waitFor(t, "the idle sessions to be closed", func() bool { return sessions() == 0 })
	if got, _ := callText(t, cs, "idle_count", nil); got != "1" {
		t.Errorf("idle_count after the idle timeout = %q, want 1 (a fresh session)", got)
	}
}
