package proxy_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/mcp-mux/mcp-mux/internal/config"
	"github.com/mcp-mux/mcp-mux/internal/proxy"
)

// TestMetricsAccess: admin.metrics decides who reads /metrics on the main
// listener — anyone (open, the default), the admin token as a bearer or
// Basic password (admin_token), no one (ops_listener) — read per request,
// so a reload changes it; the ops listener's /metrics stays open (issue
// 39: /metrics was open with api keys and an admin token set).
func TestMetricsAccess(t *testing.T) {
	const token = "adm-metrics-7Hq2"
	m := startMux(t, `{"mcpServers": {}, "admin": {"token": "`+token+`"}}`, proxy.Options{})
	ops := httptest.NewServer(m.srv.OpsHandler())
	t.Cleanup(ops.Close)
	scrape := func(base string, set func(*http.Request)) (int, string) {
		req, _ := http.NewRequest(http.MethodGet, base+"/metrics", nil)
		if set != nil {
			set(req)
		}
		resp, err := testHTTP.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, strings.Join(resp.Header.Values("WWW-Authenticate"), ", ") + "\n" + string(b)
	}
	bearer := func(tok string) func(*http.Request) {
		return func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+tok) }
	}
	basic := func(r *http.Request) { r.SetBasicAuth("prometheus", token) }
	for _, tc := range []struct {
		access string
		want   map[string]int // request → status
	}{
		{"", map[string]int{"none": 200, "bearer": 200, "wrong": 200, "basic": 200}}, // no metrics key: open
		{config.MetricsOpen, map[string]int{"none": 200, "bearer": 200, "wrong": 200, "basic": 200}},
		{config.MetricsAdminToken, map[string]int{"none": 401, "bearer": 200, "wrong": 401, "basic": 200}},
		{config.MetricsOpsListener, map[string]int{"none": 404, "bearer": 404, "wrong": 404, "basic": 404}},
	} {
		doc := `{"mcpServers": {}, "admin": {"token": "` + token + `"}}`
		if tc.access != "" {
			doc = `{"mcpServers": {}, "admin": {"token": "` + token + `", "metrics": "` + tc.access + `"}}`
		}
		cfg, err := config.Parse([]byte(doc), config.LoadOptions{Filename: "test.json"})
		if err != nil {
			t.Fatal(err)
		}
		if err := m.srv.Apply(cfg); err != nil { // a reload: the next request sees it
			t.Fatal(err)
		}
		for name, set := range map[string]func(*http.Request){"none": nil, "bearer": bearer(token), "wrong": bearer("not-" + token), "basic": basic} {
			code, body := scrape(m.ts.URL, set)
			if code != tc.want[name] {
				t.Errorf("admin.metrics %q, %s: HTTP %d, want %d", tc.access, name, code, tc.want[name])
			}
			if code == 200 && !strings.Contains(body, "mcp_mux_sessions") {
				t.Errorf("admin.metrics %q, %s: no series:\n%.300s", tc.access, name, body)
			}
			if code == 401 && (!strings.Contains(body, "Bearer realm") || strings.Contains(body, token)) {
				t.Errorf("admin.metrics %q, %s: the 401 says %q", tc.access, name, body)
			}
		}
		if code, body := scrape(ops.URL, nil); code != 200 || !strings.Contains(body, "mcp_mux_sessions") {
			t.Errorf("admin.metrics %q: the ops listener answers HTTP %d", tc.access, code)
		}
	}
}
