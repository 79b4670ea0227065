package proxy_test

import (
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/mcp-mux/mcp-mux/internal/config"
	"github.com/mcp-mux/mcp-mux/internal/mcptest"
	"github.com/mcp-mux/mcp-mux/internal/proxy"
)

// metricValue returns the value of the series (name{labels} exactly as
// exposed), or -1 when it is absent.
func metricValue(body, series string) float64 {
	for line := range strings.SplitSeq(body, "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err == nil {
				return f
			}
		}
	}
	return -1
}

// TestMetricsSeries: calls by server and outcome with latency histograms,
// discovery durations, stdio processes and reconnects per server; a removed
// server's series are deleted; no label carries a URL.
func TestMetricsSeries(t *testing.T) {
	web := mcptest.ServeHTTP(t, mcptest.NewServer("web"))
	local := fmt.Sprintf("metrics-%d", os.Getpid())
	stdio := stdioServerJSON(t, local, mcptest.StdioOptions{}, "")
	cfgJSON := fmt.Sprintf(`{"mcpServers": {"web": {"type": "http", "url": %q}, %s}}`, web.URL+"/mcp", stdio)
	m := startMux(t, cfgJSON, proxy.Options{})
	cs := connect(t, m.ts.URL, nil)
	for range 2 {
		callText(t, cs, "web_echo", map[string]any{"text": "x"})
	}
	callText(t, cs, local+"_echo", map[string]any{"text": "y"})

	body := scrape(t, m.ts.URL)
	for series, min := range map[string]float64{
		`mcp_mux_tool_calls_total{outcome="ok",server="web"}`:                                    2,
		`mcp_mux_tool_call_duration_seconds_count{outcome="ok",server="web"}`:                    2,
		`mcp_mux_tool_call_duration_seconds_count{outcome="ok",server="` + local + `"}`:          1,
		`mcp_mux_upstream_discovery_duration_seconds_count{outcome="ok",server="web"}`:           1,
		`mcp_mux_upstream_discovery_duration_seconds_count{outcome="ok",server="` + local + `"}`: 1,
		`mcp_mux_stdio_processes{server="` + local + `"}`:                                        1,
		`mcp_mux_stdio_processes{server="web"}`:                                                  0,
		`mcp_mux_upstream_reconnects_total{server="` + local + `"}`:                              0,
		`mcp_mux_upstream_up{server="web"}`:                                                      1,
	} {
		if got := metricValue(body, series); got < min {
			t.Errorf("%s = %v, want ≥ %v", series, got, min)
		}
	}
	u, _ := url.Parse(web.URL)
	for line := range strings.SplitSeq(body, "\n") {
		if strings.HasPrefix(line, "mcp_mux_") && (strings.Contains(line, u.Host) || strings.Contains(line, "http://")) {
			t.Errorf("a label carries a URL: %s", line)
		}
	}

	// Killing the stdio servers makes the discovery session reconnect.
	for _, g := range mcptest.ChildGroups(os.Getpid()) {
		_ = syscall.Kill(-g, syscall.SIGKILL)
	}
	waitFor(t, "a reconnect of "+local, func() bool {
		return metricValue(scrape(t, m.ts.URL), `mcp_mux_upstream_reconnects_total{server="`+local+`"}`) >= 1
	})

	// Removing web deletes every series that names it.
	cfg, err := config.Parse([]byte(fmt.Sprintf(`{"mcpServers": {%s}}`, stdio)), config.LoadOptions{Filename: "test.json"})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.srv.Apply(cfg); err != nil {
		t.Fatal(err)
	}
	body = scrape(t, m.ts.URL)
	if strings.Contains(body, `server="web"`) {
		t.Errorf("series of the removed server remain:\n%s", grepLines(body, `server="web"`))
	}
	if metricValue(body, `mcp_mux_tool_calls_total{outcome="ok",server="`+local+`"}`) < 1 {
		t.Errorf("the remaining server's series went too")
	}
}
