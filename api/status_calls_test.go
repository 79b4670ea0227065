package api_test

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/api"
	"github.com/mcp-mux/mcp-mux/audit"
)

// The status page lists the recent failed and slow calls with their
// outcome, in its JSON, its HTML and after its script re-rendered it.
func TestStatusRecentCalls(t *testing.T) {
	a, err := audit.New(audit.Options{Slow: time.Nanosecond, UserID: "plain"}) // every call is slow
	if err != nil {
		t.Fatal(err)
	}
	m := startStatusMuxWith(t, api.StatusOptions{Refresh: 300 * time.Millisecond}, statusExtras{audit: a})
	c := mcp.NewClient(&mcp.Implementation{Name: "status-calls", Version: "1"}, nil)
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: m.ts.URL + "/mcp"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	for _, name := range []string{"web_echo", "web_fail"} {
		if _, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: map[string]any{"text": "x"}}); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	_, body := get(t, m.ts.URL+"/api/status", nil)
	rep := decodeStatus(t, body)
	if len(rep.FailedCalls) != 1 || rep.FailedCalls[0].Target != "web_fail" || rep.FailedCalls[0].Outcome != "tool_error" || rep.FailedCalls[0].Server != "web" {
		t.Errorf("failed_calls = %+v", rep.FailedCalls)
	}
	if len(rep.SlowCalls) != 2 || rep.SlowCalls[0].Target != "web_fail" || rep.SlowCalls[1].Target != "web_echo" {
		t.Errorf("slow_calls = %+v (newest first)", rep.SlowCalls)
	}
	failedRow := regexp.MustCompile(`(?s)id="failed-calls">\s*<tr data-target="web_fail" data-outcome="tool_error"><td>[^<]+</td><td>tools/call</td><td>web · web_fail</td>`)
	if _, page := get(t, m.ts.URL+"/", nil); !failedRow.Match(page) {
		t.Errorf("the page lacks the failed call's row:\n%s", grepAround(string(page), "failed-calls"))
	}
	dom := runChromium(t, "--virtual-time-budget=3000", "--dump-dom", m.ts.URL+"/")
	if n := regexp.MustCompile(`data-refreshes="(\d+)"`).FindStringSubmatch(dom); n == nil || n[1] == "0" {
		t.Fatalf("the page's script did not refresh: %v", n)
	}
	if !failedRow.MatchString(dom) || !strings.Contains(dom, `data-target="web_echo" data-outcome="ok"`) {
		t.Errorf("the re-rendered page lacks the recent calls:\n%s", grepAround(dom, "failed-calls"))
	}
}

// grepAround is the text around the first occurrence of s.
func grepAround(text, s string) string {
	i := strings.Index(text, s)
	if i < 0 {
		return "(" + s + " not found)"
	}
	return text[max(i-200, 0):min(i+800, len(text))]
}
