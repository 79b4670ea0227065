package proxy_test

// Reload tests: what a config change does to running upstreams (issue 11).
// Upstreams are real: re-executed stdio servers whose pid tool reports the
// process id, and HTTP servers behind a counting OAuth token endpoint.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/internal/config"
	"github.com/mcp-mux/mcp-mux/internal/mcptest"
	"github.com/mcp-mux/mcp-mux/internal/proxy"
)

func parseCfg(t *testing.T, doc string) *config.Config {
	t.Helper()
	cfg, err := config.Parse([]byte(doc), config.LoadOptions{Filename: "test.json", LookupEnv: func(string) (string, bool) { return "", false }})
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	return cfg
}

func pidOf(t *testing.T, cs *mcp.ClientSession, tool string) int {
	t.Helper()
	text, res := callText(t, cs, tool, map[string]any{})
	if res.IsError {
		t.Fatalf("%s: %s", tool, text)
	}
	pid, err := strconv.Atoi(text)
	if err != nil {
		t.Fatalf("%s = %q", tool, text)
	}
	return pid
}

func scrape(t *testing.T, url string) string {
	t.Helper()
	res, err := testHTTP.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return string(b)
}

// TestReloadIsMinimal: a presentation-only change keeps the stdio process
// and the OAuth token (no token-endpoint hit); a changed server reconnects
// (new process, old one gone); a removed one's process is killed; an added
// one discovers; clients get list_changed; a broken config is ignored.
func TestReloadIsMinimal(t *testing.T) {
	web := startEchoUpstream(t, "web")
	tok := startTokenServer(t, "tok", nil)
	webJSON := func(desc string) string {
		return fmt.Sprintf(`"web": {"type": "http", "url": %q, "description": %q,
		  "oauth": {"token_url": %q, "client_id": "mux", "client_secret": "cs"}}`, web.url(), desc, tok.URL)
	}
	keep := stdioServerJSON(t, "keep", mcptest.StdioOptions{}, "")
	swap := func(extra string) string { return stdioServerJSON(t, "swap", mcptest.StdioOptions{}, extra) }
	gone := stdioServerJSON(t, "gone", mcptest.StdioOptions{}, "")
	fresh := mcptest.ServeHTTP(t, mcptest.NewServer("fresh")) // before the mux: cleanups run in reverse
	first := fmt.Sprintf(`{"mcpServers": {%s, %s, %s, %s}}`, keep, webJSON("one"), swap(""), gone)
	m := startMux(t, first, proxy.Options{})
	opts, changed := listChanged()
	cs := connect(t, m.ts.URL, opts)

	keepPid, swapPid, gonePid := pidOf(t, cs, "keep_pid"), pidOf(t, cs, "swap_pid"), pidOf(t, cs, "gone_pid")
	auth := echoHeaders(t, context.Background(), cs, "web_headers")["authorization"]
	hits := tok.hits.Load()
	if len(auth) != 1 || hits != 1 {
		t.Fatalf("before: authorization %q, %d token hits", auth, hits)
	}

	second := fmt.Sprintf(`{"mcpServers": {%s, %s, %s, "fresh": {"type": "http", "url": %q}},
	  "guardrails": {"denied_tools": ["keep_add"]}}`,
		strings.Replace(keep, `"type": "stdio"`, `"type": "stdio", "description": "now described", "routing": {"mode": "prefer", "keywords": ["k"]}`, 1),
		webJSON("two"), swap(`, "session_init_timeout": 30`), fresh.URL+"/mcp")
	ev := m.srv.Reload("test", parseCfg(t, second), nil)
	if ev.Outcome != proxy.ReloadApplied || len(ev.Problems) != 0 {
		t.Fatalf("reload = %+v", ev)
	}
	waitSignal(t, changed, "tools/list_changed after the reload")

	names := toolNames(t, cs)
	if !contains(names, "fresh_echo") || contains(names, "gone_echo") || contains(names, "keep_add") || !contains(names, "swap_pid") {
		t.Errorf("tools after reload: %v", names)
	}
	if got := pidOf(t, cs, "keep_pid"); got != keepPid {
		t.Errorf("unchanged server restarted: pid %d → %d", keepPid, got)
	}
	if got := pidOf(t, cs, "swap_pid"); got == swapPid {
		t.Errorf("changed server kept its process %d", got)
	}
	if got := echoHeaders(t, context.Background(), cs, "web_headers")["authorization"]; !slices.Equal(got, auth) {
		t.Errorf("unchanged server's token changed: %q → %q", auth, got)
	}
	if n := tok.hits.Load(); n != hits {
		t.Errorf("token endpoint hit %d more times across a presentation-only reload", n-hits)
	}
	waitFor(t, "removed and replaced stdio processes to exit", func() bool {
		return !mcptest.Exists(gonePid) && !mcptest.Exists(swapPid)
	})
	if got, _ := callText(t, cs, "fresh_echo", map[string]any{"text": "hi"}); got != "hi" {
		t.Errorf("fresh_echo = %q", got)
	}

	// A broken config is rejected; the running one keeps serving.
	_, err := config.Parse([]byte(`{"mcpServers": {}, "guardrails": {"bogus": true}}`), config.LoadOptions{Filename: "test.json"})
	if err == nil {
		t.Fatal("test config should be invalid")
	}
	ev = m.srv.Reload("test", nil, err)
	if ev.Outcome != proxy.ReloadRejected || len(ev.Problems) != 1 || !strings.Contains(ev.Problems[0], "guardrails") {
		t.Fatalf("broken reload = %+v", ev)
	}
	if got := pidOf(t, cs, "keep_pid"); got != keepPid {
		t.Errorf("a rejected reload restarted a server")
	}
	if !contains(toolNames(t, cs), "fresh_echo") {
		t.Error("a rejected reload changed the catalog")
	}
	if evs := m.srv.Reloads(); len(evs) != 2 || evs[0].Outcome != proxy.ReloadApplied || evs[1].Outcome != proxy.ReloadRejected {
		t.Errorf("Reloads() = %+v", evs)
	}
	metrics := scrape(t, m.ts.URL)
	for _, want := range []string{`mcp_mux_reloads_total{outcome="applied"} 1`, `mcp_mux_reloads_total{outcome="rejected"} 1`, "mcp_mux_last_reload_success_timestamp_seconds 1."} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
}

// TestReloadKeepsLastGoodServerAndRefusals: a running server that is invalid
// in the new file keeps its running settings, and so does one that
// Options.ServerChange refuses; the rest of the reload applies.
func TestReloadKeepsLastGoodServerAndRefusals(t *testing.T) {
	a := toolServer(t, nil, "ta")
	b := toolServer(t, nil, "tb")
	c := toolServer(t, nil, "tc")
	refuse := errors.New("server b runs durable tasks; restart mcp-mux to change its connection settings")
	m := startMux(t, fmt.Sprintf(`{"mcpServers": {"a": {"type": "http", "url": %q}, "b": {"type": "http", "url": %q}}}`, a, b),
		proxy.Options{ServerChange: func(running, next *config.Server) error {
			if running.Name == "b" {
				return refuse
			}
			return nil
		}})
	cs := connect(t, m.ts.URL, nil)
	// a: now invalid (no url); b: moved to c's URL, which the hook refuses; c: added.
	ev := m.srv.Reload("test", parseCfg(t, fmt.Sprintf(`{"mcpServers": {"a": {"type": "http"}, "b": {"type": "http", "url": %q}, "c": {"type": "http", "url": %q}}}`, c, c)), nil)
	if ev.Outcome != proxy.ReloadPartial {
		t.Fatalf("outcome = %q (%v)", ev.Outcome, ev.Problems)
	}
	joined := strings.Join(ev.Problems, "\n")
	for _, want := range []string{"a: the new settings are invalid; kept the running ones", "b: " + refuse.Error()} {
		if !strings.Contains(joined, want) {
			t.Errorf("problems lack %q:\n%s", want, joined)
		}
	}
	if got := toolNames(t, cs); !slices.Equal(got, []string{"a_ta", "b_tb", "c_tc"}) {
		t.Errorf("tools = %v", got)
	}
	if got, _ := callText(t, cs, "b_tb", map[string]any{}); got != "tb" {
		t.Errorf("b_tb = %q: the refused server moved", got)
	}
}

// TestApplyRacesInFlightCalls: calls keep running while the server they use
// is replaced again and again; every call finishes with its result, on the
// upstream it started on.
func TestApplyRacesInFlightCalls(t *testing.T) {
	web := mcptest.ServeHTTP(t, mcptest.NewServer("web"))
	doc := func(timeout int) string {
		return fmt.Sprintf(`{"mcpServers": {"web": {"type": "http", "url": %q, "session_init_timeout": %d}}}`, web.URL+"/mcp", timeout)
	}
	m := startMux(t, doc(30), proxy.Options{})
	cs := connect(t, m.ts.URL, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	var wg sync.WaitGroup
	errs := make(chan error, 64)
	stop := make(chan struct{})
	for i := range 4 {
		wg.Go(func() {
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				args := map[string]any{"ms": 20}
				tool := "web_sleep"
				if n%2 == 1 {
					args, tool = map[string]any{"text": fmt.Sprintf("%d-%d", i, n)}, "web_echo"
				}
				res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
				if err != nil {
					errs <- fmt.Errorf("%s: %w", tool, err)
					return
				}
				if res.IsError {
					errs <- fmt.Errorf("%s: tool error %v", tool, res.Content)
					return
				}
				if tool == "web_echo" {
					if text := res.Content[0].(*mcp.TextContent).Text; text != args["text"] {
						errs <- fmt.Errorf("echo = %q, want %q", text, args["text"])
						return
					}
				}
			}
		})
	}
	for i := range 12 {
		if ev := m.srv.Reload("test", parseCfg(t, doc(31+i)), nil); ev.Outcome != proxy.ReloadApplied {
			t.Fatalf("reload %d: %+v", i, ev)
		}
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestListChangedOnlyWhereVisible: with tool_search on, a reload that
// changes only a tool one session promoted notifies that session and not
// the other.
func TestListChangedOnlyWhereVisible(t *testing.T) {
	a := toolServer(t, nil, "query: run a query", "schema: read the schema")
	doc := func(desc string) string {
		return fmt.Sprintf(`{"mcpServers": {"pg": {"type": "http", "url": %q, "description": %q}},
		  "tool_search": {"enabled": true}, "guardrails": {"denied_tools": %s}}`, a, "pg", desc)
	}
	m := startMux(t, doc(`[]`), proxy.Options{})
	optsA, changedA := listChanged()
	optsB, changedB := listChanged()
	csA := connect(t, m.ts.URL, optsA)
	connect(t, m.ts.URL, optsB)
	search(t, csA, "select:pg_query")
	waitSignal(t, changedA, "tools/list_changed after promoting")

	if ev := m.srv.Reload("test", parseCfg(t, doc(`["pg_query"]`)), nil); ev.Outcome != proxy.ReloadApplied {
		t.Fatalf("reload: %+v", ev)
	}
	waitSignal(t, changedA, "tools/list_changed for the session that saw pg_query")
	noSignal(t, changedB, "tools/list_changed for a session whose list did not change")
	if got := toolNames(t, csA); !slices.Equal(got, []string{"tool_search"}) {
		t.Errorf("session A sees %v", got)
	}
}

// TestCloseWaitsForRetiredUpstreams: closing a removed server's upstream
// is tracked: Close, right after the reload, returns only once its stdio
// process is gone.
func TestCloseWaitsForRetiredUpstreams(t *testing.T) {
	slow := stdioServerJSON(t, "slow", mcptest.StdioOptions{}, "")
	m := startMux(t, fmt.Sprintf(`{"mcpServers": {%s}}`, slow), proxy.Options{})
	cs := connect(t, m.ts.URL, nil)
	pid := pidOf(t, cs, "slow_pid")
	if ev := m.srv.Reload("test", parseCfg(t, `{"mcpServers": {}}`), nil); ev.Outcome != proxy.ReloadApplied {
		t.Fatalf("reload: %+v", ev)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := m.srv.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if mcptest.Exists(pid) {
		t.Errorf("Close returned while the removed server's process %d still runs", pid)
	}
}
