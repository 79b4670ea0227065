package proxy_test

import (
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/mcp-mux/mcp-mux/internal/mcptest"
	"github.com/mcp-mux/mcp-mux/internal/proxy"
)

func TestMetrics(t *testing.T) {
	web := mcptest.ServeHTTP(t, mcptest.NewServer("web"))
	m := startMux(t, fmt.Sprintf(`{"mcpServers": {"web": {"type": "http", "url": %q}}}`, web.URL+"/mcp"), proxy.Options{})
	cs := connect(t, m.ts.URL, nil)
	for range 3 {
		callText(t, cs, "web_echo", map[string]any{"text": "x"})
	}
	resp, err := testHTTP.Get(m.ts.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	body := string(b)
	for _, want := range []string{
		`mcp_mux_tool_calls_total{outcome="ok",server="web"} 3`,
		`mcp_mux_tool_call_duration_seconds_count{outcome="ok",server="web"} 3`,
		`mcp_mux_upstream_up{server="web"} 1`,
		`mcp_mux_upstream_sessions{server="web"} 1`,
		`mcp_mux_sessions 1`,
		"go_goroutines",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}
