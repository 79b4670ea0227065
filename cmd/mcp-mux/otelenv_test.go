package main

import (
	"strings"
	"testing"
	"time"

	"github.com/mcp-mux/mcp-mux/internal/mcptest"
	"github.com/mcp-mux/mcp-mux/internal/otlptest"
)

// otelEnv is what an operator sets in a chart's env to export to r: the
// standard variables only.
func otelEnv(r *otlptest.Receiver, more ...string) []string {
	return append([]string{"OTEL_TRACES_EXPORTER=otlp", "OTEL_EXPORTER_OTLP_ENDPOINT=" + r.Endpoint(), "OTEL_EXPORTER_OTLP_PROTOCOL=" + r.Protocol(),
		"OTEL_BSP_SCHEDULE_DELAY=20", "OTEL_METRIC_EXPORT_INTERVAL=100"}, more...)
}

// TestOTelVariablesTurnExportOn: with no telemetry block, the standard
// OTEL_* variables alone export the mux's spans, the MCP histograms and
// its mcp_mux_* series over OTLP (issue 39: nothing was exported unless
// the config also said telemetry.enabled). The registry's copies of the
// MCP histograms and the Go runtime series stay off OTLP.
func TestOTelVariablesTurnExportOn(t *testing.T) {
	r := otlptest.Start(t)
	up := mcptest.ServeHTTP(t, mcptest.NewServer("web"))
	dir := t.TempDir()
	cfg := writeFile(t, dir, "extensions_config.json", mustJSON(t, map[string]any{
		"mcpServers": map[string]any{"web": map[string]any{"type": "http", "url": up.URL + "/mcp"}},
	}))
	s := startServe(t, dir, otelEnv(r), "--config", cfg, "--listen", "127.0.0.1:0")
	cs := connect(t, s.url("/mcp"))
	waitTools(t, cs, "web_echo")
	if got := callText(t, cs, "web_echo", map[string]any{"text": "traced"}); got != "traced" {
		t.Fatalf("web_echo = %q", got)
	}
	r.WaitSpans(t, 20*time.Second, func(spans []otlptest.Span) bool {
		for _, sp := range spans {
			if sp.Kind == "SERVER" && sp.Service() == "mcp-mux" && sp.Name == "tools/call web_echo" {
				return true
			}
		}
		return false
	})
	r.WaitMetric(t, 20*time.Second, "mcp_mux_tool_calls_total", func(m otlptest.Metric) bool {
		p, ok := m.Point(map[string]any{"server": "web", "outcome": "ok"})
		return ok && p.Value >= 1
	})
	r.WaitMetric(t, 20*time.Second, "mcp_mux_upstream_up", nil)
	r.WaitMetric(t, 20*time.Second, "mcp.server.operation.duration", nil)
	for _, m := range r.Metrics() {
		if m.Name == "mcp_server_operation_duration_seconds" || strings.HasPrefix(m.Name, "go_") || strings.HasPrefix(m.Name, "process_") {
			t.Errorf("%s went over OTLP: only the mcp_mux_* series of the registry should", m.Name)
		}
	}
	if l := findLog(s.stderr.String(), "telemetry: exporting metrics over OTLP"); l == nil || l["turned_on_by"] != "environment" {
		t.Errorf("no log line saying the environment turned metric export on: %v", l)
	}
}

// TestOTelVariablesYieldToConfigOff: the block's explicit
// "enabled": false keeps export off whatever the variables say (a
// platform may inject them into every pod), and so does
// OTEL_SDK_DISABLED=true.
func TestOTelVariablesYieldToConfigOff(t *testing.T) {
	up := mcptest.ServeHTTP(t, mcptest.NewServer("web"))
	for name, tc := range map[string]struct {
		telemetry map[string]any
		env       []string
	}{
		"enabled false": {telemetry: map[string]any{"enabled": false}},
		"sdk disabled":  {env: []string{"OTEL_SDK_DISABLED=true"}},
	} {
		t.Run(name, func(t *testing.T) {
			r := otlptest.Start(t)
			doc := map[string]any{"mcpServers": map[string]any{"web": map[string]any{"type": "http", "url": up.URL + "/mcp"}}}
			if tc.telemetry != nil {
				doc["telemetry"] = tc.telemetry
			}
			dir := t.TempDir()
			cfg := writeFile(t, dir, "extensions_config.json", mustJSON(t, doc))
			s := startServe(t, dir, otelEnv(r, tc.env...), "--config", cfg, "--listen", "127.0.0.1:0")
			cs := connect(t, s.url("/mcp"))
			waitTools(t, cs, "web_echo")
			callText(t, cs, "web_echo", map[string]any{"text": "not traced"})
			time.Sleep(500 * time.Millisecond) // five metric intervals, 25 span batches: nothing may arrive
			if n := len(r.Requests()); n != 0 {
				t.Errorf("%d exports arrived with export off", n)
			}
			if strings.Contains(s.stderr.String(), "over OTLP") {
				t.Errorf("the mux says it exports:\n%s", s.stderr.String())
			}
		})
	}
}
