package proxy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/internal/config"
	"github.com/mcp-mux/mcp-mux/internal/mcptest"
	"github.com/mcp-mux/mcp-mux/internal/proxy"
)

func TestMain(m *testing.M) {
	mcptest.MaybeServeStdio()
	code := m.Run()
	// The tests' own client connections end here; every other goroutine
	// (servers, upstream transports, sessions) must already be gone.
	testHTTP.CloseIdleConnections()
	if code == 0 {
		if err := mcptest.LeakCheck(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// testHTTP is the tests' HTTP client, on a transport of their own (not
// http.DefaultTransport, which goroutines of other packages may share), so
// its connections can be closed before the leak check.
var testHTTP = &http.Client{Transport: &http.Transport{}}

type mux struct {
	srv  *proxy.Server
	ts   *httptest.Server
	logs *mcptest.LogBuffer
}

// startMux runs mcp-mux on the given config JSON (no environment variables
// set; logs captured at Trace).
func startMux(t *testing.T, cfgJSON string, opts proxy.Options) *mux {
	t.Helper()
	m, _ := startMuxEnv(t, cfgJSON, nil, opts)
	return m
}

func connect(t *testing.T, url string, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "test-client", Version: "1"}, opts)
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: url + "/mcp", HTTPClient: testHTTP}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

func toolNames(t *testing.T, cs *mcp.ClientSession) []string {
	t.Helper()
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	var names []string
	for _, tl := range res.Tools {
		names = append(names, tl.Name)
	}
	return names
}

func callText(t *testing.T, cs *mcp.ClientSession, name string, args any) (string, *mcp.CallToolResult) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("call %s: %v", name, err)
	}
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n"), res
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func stdioServerJSON(t *testing.T, name string, o mcptest.StdioOptions, extra string) string {
	t.Helper()
	cmd, args, env := mcptest.StdioServer(name, o)
	c, _ := json.Marshal(cmd)
	a, _ := json.Marshal(args)
	e, _ := json.Marshal(env)
	return fmt.Sprintf(`%q: {"type": "stdio", "command": %s, "args": %s, "env": %s %s}`, name, c, a, e, extra)
}

func TestAggregatesStdioHTTPAndSSE(t *testing.T) {
	web := mcptest.ServeHTTP(t, mcptest.NewServer("web"))
	old := mcptest.ServeSSE(t, mcptest.NewServer("old"))
	cfg := fmt.Sprintf(`{"mcpServers": {
		%s,
		"web": {"type": "http", "url": %q},
		"old": {"transport": "sse", "url": %q}
	}}`, stdioServerJSON(t, "local", mcptest.StdioOptions{}, ""), web.URL+"/mcp", old.URL+"/sse")
	m := startMux(t, cfg, proxy.Options{})
	cs := connect(t, m.ts.URL, nil)

	names := toolNames(t, cs)
	for _, server := range []string{"local", "web", "old"} {
		for _, tool := range []string{"echo", "add", "pid", "fail"} {
			if !contains(names, server+"_"+tool) {
				t.Errorf("tools/list lacks %s_%s; got %v", server, tool, names)
			}
		}
	}
	for _, server := range []string{"local", "web", "old"} {
		got, _ := callText(t, cs, server+"_echo", map[string]any{"text": "hi " + server})
		if got != "hi "+server {
			t.Errorf("%s_echo = %q", server, got)
		}
		_, res := callText(t, cs, server+"_add", map[string]any{"a": 2, "b": 40})
		sc, _ := json.Marshal(res.StructuredContent)
		if string(sc) != `{"sum":42}` {
			t.Errorf("%s_add structuredContent = %s", server, sc)
		}
		got, res = callText(t, cs, server+"_fail", map[string]any{})
		if !res.IsError || got != "it failed" {
			t.Errorf("%s_fail: isError=%v text=%q", server, res.IsError, got)
		}
	}
	// Schemas pass through unchanged.
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tl := range res.Tools {
		if tl.Name == "web_add" {
			s, _ := json.Marshal(tl.InputSchema)
			if !strings.Contains(string(s), `"a":{"type":"integer"}`) {
				t.Errorf("web_add input schema changed: %s", s)
			}
			if tl.OutputSchema == nil {
				t.Error("web_add lost its output schema")
			}
		}
	}
}

func TestUnknownToolIsJSONRPCError(t *testing.T) {
	web := mcptest.ServeHTTP(t, mcptest.NewServer("web"))
	m := startMux(t, fmt.Sprintf(`{"mcpServers": {"web": {"type": "http", "url": %q}}}`, web.URL+"/mcp"), proxy.Options{})
	cs := connect(t, m.ts.URL, nil)
	_, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "web_nope", Arguments: map[string]any{}})
	if err == nil || !strings.Contains(err.Error(), `unknown tool "web_nope"`) {
		t.Fatalf("err = %v, want unknown tool naming web_nope", err)
	}
	// Raw name without prefix is not routable either.
	_, err = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{}})
	if err == nil {
		t.Fatal("raw name routed despite prefixing")
	}
}

func TestHungUpstreamSkippedWithinInitTimeout(t *testing.T) {
	web := mcptest.ServeHTTP(t, mcptest.NewServer("web"))
	hung := mcptest.Hung(t)
	cfg := fmt.Sprintf(`{"mcpServers": {
		"hung": {"type": "http", "url": %q, "session_init_timeout": 0.5},
		%s,
		"web": {"type": "http", "url": %q}
	}}`, hung.URL+"/mcp", stdioServerJSON(t, "stuck", mcptest.StdioOptions{Hang: true}, `, "session_init_timeout": 0.5`), web.URL+"/mcp")
	start := time.Now()
	m := startMux(t, cfg, proxy.Options{RetryMin: time.Hour, RetryMax: time.Hour})
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("discovery took %s with two hung servers at 0.5s init timeout", d)
	}
	cs := connect(t, m.ts.URL, nil)
	names := toolNames(t, cs)
	if !contains(names, "web_echo") {
		t.Fatalf("healthy server missing: %v", names)
	}
	for _, n := range names {
		if strings.HasPrefix(n, "hung_") || strings.HasPrefix(n, "stuck_") {
			t.Errorf("hung server's tool listed: %s", n)
		}
	}
	if got, _ := callText(t, cs, "web_echo", map[string]any{"text": "ok"}); got != "ok" {
		t.Errorf("web_echo = %q", got)
	}
	logs := m.logs.String()
	for _, name := range []string{"hung", "stuck"} {
		if !strings.Contains(logs, `"server":"`+name+`"`) || !strings.Contains(logs, "timed out") {
			t.Errorf("no timeout warning naming %s in logs:\n%s", name, logs)
		}
	}
}

func TestMissingCommandAndRefusedURLSkipped(t *testing.T) {
	web := mcptest.ServeHTTP(t, mcptest.NewServer("web"))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := "http://" + ln.Addr().String() + "/mcp"
	ln.Close()
	cfg := fmt.Sprintf(`{"mcpServers": {
		"ghost": {"command": "/nonexistent/mcp-server-binary"},
		"down": {"type": "http", "url": %q},
		"web": {"type": "http", "url": %q}
	}}`, refused, web.URL+"/mcp")
	m := startMux(t, cfg, proxy.Options{RetryMin: time.Hour, RetryMax: time.Hour})
	cs := connect(t, m.ts.URL, nil)
	if names := toolNames(t, cs); len(names) == 0 || !contains(names, "web_echo") {
		t.Fatalf("tools = %v", names)
	}
	logs := m.logs.String()
	for _, want := range []string{`"server":"ghost"`, "/nonexistent/mcp-server-binary", `"server":"down"`, "connection refused"} {
		if !strings.Contains(logs, want) {
			t.Errorf("logs lack %q:\n%s", want, logs)
		}
	}
}

func TestFailedUpstreamRetriedAndToolsAppear(t *testing.T) {
	// The port stays ours from the start: until the server "comes up" the
	// listener resets every connection, as a port nothing listens on does,
	// so no other process can take it meanwhile.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gate := &downListener{Listener: ln}
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return mcptest.NewServer("late") }, nil)
	hs := &http.Server{Handler: h}
	go func() { _ = hs.Serve(gate) }()
	cfg := fmt.Sprintf(`{"mcpServers": {"late": {"type": "http", "url": "http://%s/mcp"}}}`, ln.Addr())
	m := startMux(t, cfg, proxy.Options{})
	t.Cleanup(func() {
		// Close the mux first so that it ends its upstream sessions cleanly.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = m.srv.Close(ctx)
		_ = hs.Close()
	})

	changed := make(chan struct{}, 4)
	cs := connect(t, m.ts.URL, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
	})
	if names := toolNames(t, cs); len(names) != 0 {
		t.Fatalf("tools before the server is up: %v", names)
	}
	if gate.refused.Load() == 0 {
		t.Fatal("the mux never tried the server while it was down")
	}
	gate.up.Store(true) // the server comes up on that address

	select {
	case <-changed:
	case <-time.After(15 * time.Second):
		t.Fatal("no notifications/tools/list_changed after the upstream came up")
	}
	if names := toolNames(t, cs); !contains(names, "late_echo") {
		t.Fatalf("late_echo missing after recovery: %v", names)
	}
}

// downListener stands for a server that is down until up is set: it
// resets each connection it accepts (counting them in refused), then
// serves as its Listener.
type downListener struct {
	net.Listener
	up      atomic.Bool
	refused atomic.Int64
}

func (l *downListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil || l.up.Load() {
			return c, err
		}
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetLinger(0) // a reset, as from a closed port
		}
		_ = c.Close()
		l.refused.Add(1)
	}
}

func TestNamingPrefixCollisionsAndCharset(t *testing.T) {
	a := mcptest.ServeHTTP(t, mcptest.NewServer("a", "web_search", "shared"))
	b := mcptest.ServeHTTP(t, mcptest.NewServer("b", "shared", "bad.name", "scrape"))
	long := strings.Repeat("x", 124) // 124 + "_" + "echo" = 129 > 128
	cfg := fmt.Sprintf(`{"mcpServers": {
		"web": {"type": "http", "url": %q},
		"web_scraper": {"type": "http", "url": %q},
		"raw1": {"type": "http", "url": %q, "tool_name_prefix": false},
		"raw2": {"type": "http", "url": %q, "tool_name_prefix": false},
		%q: {"type": "http", "url": %q},
		"dot.server": {"type": "http", "url": %q}
	}}`, a.URL+"/mcp", b.URL+"/mcp", a.URL+"/mcp", b.URL+"/mcp", long, a.URL+"/mcp", a.URL+"/mcp")
	m := startMux(t, cfg, proxy.Options{})
	cs := connect(t, m.ts.URL, nil)
	names := toolNames(t, cs)
	for _, want := range []string{"web_echo", "web_web_search", "web_scraper_scrape", "web_scraper_echo", "echo", "shared", "scrape"} {
		if !contains(names, want) {
			t.Errorf("missing %q in %v", want, names)
		}
	}
	for _, n := range names {
		if strings.Contains(n, ".") || len(n) > 128 || strings.HasPrefix(n, "dot") {
			t.Errorf("invalid name listed: %q", n)
		}
	}
	// Routing is by catalog entry: web_scraper_echo goes to web_scraper (server b), not to web.
	got, _ := callText(t, cs, "web_scraper_scrape", nil)
	if got != "scrape" {
		t.Errorf("web_scraper_scrape = %q", got)
	}
	// "shared" exists on both raw servers: the first (raw1 = server a) wins.
	if got, _ := callText(t, cs, "shared", nil); got != "shared" {
		t.Errorf("shared = %q", got)
	}
	logs := m.logs.String()
	if !strings.Contains(logs, `"kept_server":"raw1"`) || !strings.Contains(logs, `"skipped_server":"raw2"`) {
		t.Errorf("collision warning does not name both servers:\n%s", logs)
	}
	if !strings.Contains(logs, "invalid name") {
		t.Errorf("no warning for invalid names")
	}
	// Counting: exactly one "shared" and one "echo".
	n := 0
	for _, x := range names {
		if x == "shared" {
			n++
		}
	}
	if n != 1 {
		t.Errorf("shared listed %d times", n)
	}
}

func TestKilledStdioUpstreamRestartsOnNextCall(t *testing.T) {
	cfg := fmt.Sprintf(`{"mcpServers": {%s}}`, stdioServerJSON(t, "local", mcptest.StdioOptions{}, ""))
	m := startMux(t, cfg, proxy.Options{})
	cs := connect(t, m.ts.URL, nil)
	first, _ := callText(t, cs, "local_pid", nil)
	pid, err := strconv.Atoi(first)
	if err != nil {
		t.Fatalf("pid %q: %v", first, err)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitGone(t, pid)
	second, res := callText(t, cs, "local_pid", nil)
	if res.IsError || second == first {
		t.Fatalf("after kill: isError=%v pid %q (was %q)", res.IsError, second, first)
	}
	// The session is stateful again: the counter starts over on the new process.
	if got, _ := callText(t, cs, "local_count", nil); got != "1" {
		t.Errorf("count on restarted server = %q", got)
	}
}

func TestUpstreamDyingMidCallIsToolErrorThenReconnects(t *testing.T) {
	calls := t.TempDir()
	cfg := fmt.Sprintf(`{"mcpServers": {%s}}`, stdioServerJSON(t, "local", mcptest.StdioOptions{CallsDir: calls}, ""))
	m := startMux(t, cfg, proxy.Options{})
	cs := connect(t, m.ts.URL, nil)
	first, _ := callText(t, cs, "local_pid", nil)
	pid, _ := strconv.Atoi(first)
	done := make(chan *mcp.CallToolResult, 1)
	go func() {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "local_sleep", Arguments: map[string]any{"ms": 20000}})
		if err != nil {
			t.Errorf("mid-call death surfaced as protocol error: %v", err)
		}
		done <- res
	}()
	// Kill it once the call is in the server (killed before, the call would
	// provably not have run and be retried on a new process).
	waitLong(t, 10*time.Second, "the sleep call to reach the server", func() bool {
		_, err := os.Stat(filepath.Join(calls, "sleep"))
		return err == nil
	})
	_ = syscall.Kill(pid, syscall.SIGKILL)
	select {
	case res := <-done:
		if res == nil || !res.IsError {
			t.Fatalf("want tool error result, got %+v", res)
		}
		text := res.Content[0].(*mcp.TextContent).Text
		if !strings.Contains(text, `"local"`) {
			t.Errorf("error does not name the server: %q", text)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("call hung after the upstream died")
	}
	second, res := callText(t, cs, "local_pid", nil)
	if res.IsError || second == first {
		t.Fatalf("next call did not reconnect: %q isError=%v", second, res.IsError)
	}
}

func TestStdioBannerDoesNotKillSession(t *testing.T) {
	cfg := fmt.Sprintf(`{"mcpServers": {%s}}`, stdioServerJSON(t, "noisy", mcptest.StdioOptions{Banner: true}, ""))
	m := startMux(t, cfg, proxy.Options{})
	cs := connect(t, m.ts.URL, nil)
	if got, _ := callText(t, cs, "noisy_echo", map[string]any{"text": "through"}); got != "through" {
		t.Fatalf("noisy_echo = %q", got)
	}
	if !strings.Contains(m.logs.String(), "non-JSON line on stdout") {
		t.Error("banner line was not logged")
	}
}

func TestNoStdioProcessLeftAfterShutdown(t *testing.T) {
	cfg, err := config.Parse([]byte(fmt.Sprintf(`{"mcpServers": {%s}}`,
		stdioServerJSON(t, "local", mcptest.StdioOptions{Grandchild: true}, ""))), config.LoadOptions{Filename: "t.json"})
	if err != nil {
		t.Fatal(err)
	}
	srv := proxy.New(proxy.Options{})
	if err := srv.Apply(cfg); err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := srv.WaitDiscovery(ctx); err != nil {
		t.Fatal(err)
	}
	cs := connect(t, ts.URL, nil)
	out, _ := callText(t, cs, "local_pid", nil)
	pid, _ := strconv.Atoi(out)
	groups := []int{pid}
	// The control session is a second process group.
	groups = append(groups, mcptest.ChildGroups(os.Getpid())...)
	if n := len(mcptest.GroupMembers(groups...)); n < 2 {
		t.Fatalf("expected stdio server and its grandchild running, found %d processes", n)
	}
	_ = cs.Close()
	if err := srv.Close(ctx); err != nil {
		t.Fatal(err)
	}
	// Close has sent SIGKILL to every group; the kernel takes a moment to
	// finish the processes off.
	deadline := time.Now().Add(5 * time.Second)
	for len(mcptest.GroupMembers(groups...)) != 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := len(mcptest.GroupMembers(groups...)); n != 0 {
		t.Fatalf("%d processes left in stdio process groups %v after shutdown", n, groups)
	}
}

// waitGone waits until pid no longer exists (it was reaped).
func waitGone(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for mcptest.Exists(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("process %d still exists", pid)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
