package upstream_test

import (
	"strings"
	"testing"
	"time"

	"github.com/mcp-mux/mcp-mux/internal/mcptest"
)

// A stdio server that writes a truncated JSON-RPC line and a line of invalid JSON
// before every message loses nothing: each broken line is skipped (logged
// without its content) and every message after it is delivered.
func TestStdioBrokenLinesSkipped(t *testing.T) {
	logs := &mcptest.LogBuffer{}
	o := stdioOptions("garbled", mcptest.StdioOptions{Garble: true})
	o.Logger = newLogger(logs)
	o.InitTimeout = 10 * time.Second // the old framing hung in initialize
	u := start(t, o)
	if n := len(u.Tools()); n < 7 {
		t.Errorf("discovered %d tools through the broken lines", n)
	}
	for _, text := range []string{"one", "two", "three"} {
		if got := callText(t, u, alice1, "echo", `{"text":"`+text+`"}`); got != text {
			t.Errorf("echo %s = %q", text, got)
		}
	}
	if got := callText(t, u, alice1, "count", ""); got != "1" {
		t.Errorf("count = %s: the session was replaced", got)
	}
	out := logs.String()
	if !strings.Contains(out, "skipping a stdout line that is not a complete JSON-RPC message") {
		t.Errorf("broken lines not logged:\n%s", out)
	}
	if strings.Contains(out, mcptest.GarbleMarker) {
		t.Errorf("a broken line's content reached the log:\n%s", out)
	}
	// Rate-limited: many broken lines, few log lines.
	if n := strings.Count(out, "skipping a stdout line"); n > 12 {
		t.Errorf("%d log lines for skipped stdout lines; want them rate-limited", n)
	}
}
