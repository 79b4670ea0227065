package main

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestMetricsOpsListenerOnly: with admin.metrics "ops_listener", the main
// listener answers /metrics 404 while the ops listener serves it; without
// --ops-listen the mux says /metrics is served nowhere (issue 39).
func TestMetricsOpsListenerOnly(t *testing.T) {
	dir := t.TempDir()
	cfg := writeFile(t, dir, "extensions_config.json", mustJSON(t, map[string]any{
		"mcpServers": map[string]any{},
		"admin":      map[string]any{"metrics": "ops_listener"},
	}))
	s := startServe(t, dir, []string{"MCP_MUX_OPS_LISTEN=127.0.0.1:0"}, "--config", cfg, "--listen", "127.0.0.1:0")
	var opsAddr string
	if !s.stderr.WaitFor(10*time.Second, s.done, func(out string) bool {
		if l := findLog(out, "serving health and metrics"); l != nil {
			opsAddr, _ = l["addr"].(string)
		}
		return opsAddr != ""
	}) {
		t.Fatalf("no ops listener logged:\n%s", s.stderr.String())
	}
	hc := newHTTPClient(t)
	if code, _ := httpGet(t, hc, s.url("/metrics")); code != http.StatusNotFound {
		t.Errorf("main listener /metrics: HTTP %d, want 404", code)
	}
	if code, body := httpGet(t, hc, "http://"+opsAddr+"/metrics"); code != http.StatusOK || !strings.Contains(body, "mcp_mux_sessions") {
		t.Errorf("ops listener /metrics: HTTP %d", code)
	}
	if strings.Contains(s.stderr.String(), "served nowhere") {
		t.Errorf("warned with an ops listener:\n%s", s.stderr.String())
	}

	alone := startServe(t, dir, nil, "--config", cfg, "--listen", "127.0.0.1:0")
	if !alone.stderr.WaitFor(10*time.Second, alone.done, func(out string) bool { return strings.Contains(out, "/metrics is served nowhere") }) {
		t.Errorf("no warning without --ops-listen:\n%s", alone.stderr.String())
	}
}
