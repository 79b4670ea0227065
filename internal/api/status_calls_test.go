package api_test

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/internal/api"
	"github.com/mcp-mux/mcp-mux/internal/audit"
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

// The status page shows the profiles with their tool counts and each
// limits rule with its use here: its refusals by kind.
func TestStatusProfilesAndLimits(t *testing.T) {
	m := startStatusMuxWith(t, api.StatusOptions{Refresh: 300 * time.Millisecond}, statusExtras{edit: func(doc, _ map[string]any) {
		doc["profiles"] = map[string]any{"narrow": map[string]any{"servers": []string{"web"}, "include_tools": []string{"web_echo"}}}
		doc["limits"] = map[string]any{"rules": []any{
			map[string]any{"name": "echo-rate", "scope": "tool", "tool": "web_echo", "calls": 1, "per_seconds": 60},
			map[string]any{"name": "sleep-cap", "scope": "caller", "server": "web", "tool": "web_sleep", "in_flight": 2},
		}}
	}})
	c := mcp.NewClient(&mcp.Implementation{Name: "status-limits", Version: "1"}, nil)
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: m.ts.URL + "/mcp"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	var refused int
	for range 3 {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "web_echo", Arguments: map[string]any{"text": "x"}})
		if err != nil {
			t.Fatal(err)
		}
		if res.IsError {
			refused++
		}
	}
	if refused != 2 {
		t.Fatalf("%d of 3 calls refused by a limit of 1 per minute", refused)
	}
	_, body := get(t, m.ts.URL+"/api/status", nil)
	rep := decodeStatus(t, body)
	if len(rep.Profiles) != 1 || rep.Profiles[0].Name != "narrow" || rep.Profiles[0].Tools != 1 {
		t.Errorf("profiles = %+v", rep.Profiles)
	}
	if len(rep.Limits) != 2 || rep.Limits[0].Name != "echo-rate" || rep.Limits[0].Refused["rate"] != 2 || rep.Limits[1].InFlight != 2 || rep.Limits[1].Running != 0 {
		t.Errorf("limits = %+v", rep.Limits)
	}
	// A call of web_sleep holds one of sleep-cap's slots while it runs,
	// and gives it back when its caller leaves.
	held, leave := context.WithCancel(context.Background())
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		_, _ = cs.CallTool(held, &mcp.CallToolParams{Name: "web_sleep", Arguments: map[string]any{"ms": 600_000}})
	}()
	if !waitRunning(t, m.ts.URL, "sleep-cap", 1) {
		t.Errorf("sleep-cap does not count the web_sleep call it holds")
	}
	leave()
	<-ended
	if !waitRunning(t, m.ts.URL, "sleep-cap", 0) {
		t.Errorf("sleep-cap still counts the web_sleep call its caller left")
	}
	row := regexp.MustCompile(`<tr data-limit="echo-rate"><td>echo-rate</td><td>tool</td><td>web_echo</td><td class="n">1 / 60 s</td><td class="n">—</td><td class="n">rate 2</td></tr>`)
	if _, page := get(t, m.ts.URL+"/", nil); !row.Match(page) || !strings.Contains(string(page), `<tr data-profile="narrow"><td>narrow</td><td class="n">1</td></tr>`) {
		t.Errorf("the page lacks the profile or the limit:\n%s", grepAround(string(page), `id="profiles"`))
	}
	dom := runChromium(t, "--virtual-time-budget=3000", "--dump-dom", m.ts.URL+"/")
	if n := regexp.MustCompile(`data-refreshes="(\d+)"`).FindStringSubmatch(dom); n == nil || n[1] == "0" {
		t.Fatalf("the page's script did not refresh: %v", n)
	}
	if !row.MatchString(dom) || !strings.Contains(dom, `<tr data-profile="narrow"><td>narrow</td><td class="n">1</td></tr>`) ||
		!strings.Contains(dom, `<tr data-limit="sleep-cap"><td>sleep-cap</td><td>caller</td><td>web · web_sleep</td><td class="n">—</td><td class="n">0 (2)</td><td class="n">0</td></tr>`) {
		t.Errorf("the re-rendered page lacks the profile or the limits:\n%s", grepAround(dom, `id="profiles"`))
	}
}

// waitRunning waits (up to 20 s) until /api/status shows want calls in
// flight under rule.
func waitRunning(t *testing.T, base, rule string, want int) bool {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, body := get(t, base+"/api/status", nil)
		for _, l := range decodeStatus(t, body).Limits {
			if l.Name == rule && l.Running == want {
				return true
			}
		}
		if time.Now().After(deadline) {
			t.Logf("limits: %s", grepAround(string(body), `"limits"`))
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Issue 32, attacks 1 and 2: a name past its bound is refused at the edge
// and never reaches the recent failed and slow calls; unknown names within
// it are kept whole there, so calls with 64 KB names leave /api/status and
// the page their usual size (1 MB names made them 20 MB and 40 MB). The
// audit package clips what it keeps on its own too (audit.TestRecordStaysBounded).
func TestStatusRecentCallsClipped(t *testing.T) {
	a, err := audit.New(audit.Options{Slow: time.Nanosecond}) // every call is slow, and each of these failed
	if err != nil {
		t.Fatal(err)
	}
	m := startStatusMuxWith(t, api.StatusOptions{}, statusExtras{audit: a})
	c := mcp.NewClient(&mcp.Implementation{Name: "status-clipped", Version: "1"}, nil)
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: m.ts.URL + "/mcp"}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	const size = 64 << 10
	for i := range 25 {
		for _, name := range []string{fmt.Sprintf("t%02d", i) + strings.Repeat("z", size), fmt.Sprintf("u%02d", i) + strings.Repeat("y", 125)} {
			if _, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name}); err == nil {
				t.Fatal("an unknown tool was called")
			}
		}
	}
	_, body := get(t, m.ts.URL+"/api/status", nil)
	_, page := get(t, m.ts.URL+"/", nil)
	rep := decodeStatus(t, body)
	t.Logf("after 25 calls with %d KB names and 25 with 128-byte ones: /api/status %d bytes, / %d bytes", size>>10, len(body), len(page))
	if len(rep.FailedCalls) != 20 {
		t.Fatalf("failed calls: %d, want 20", len(rep.FailedCalls))
	}
	for _, fc := range rep.FailedCalls {
		if !strings.HasPrefix(fc.Target, "u") || len(fc.Target) != 128 {
			t.Fatalf("a failed call for %.60q… (%d bytes): only the 128-byte names reach the status page", fc.Target, len(fc.Target))
		}
	}
	if len(body) > 64<<10 || len(page) > 128<<10 {
		t.Errorf("/api/status is %d bytes (bound 64 KiB), / %d bytes (bound 128 KiB)", len(body), len(page))
	}
}
