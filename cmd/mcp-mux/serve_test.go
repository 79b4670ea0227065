package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/internal/mcptest"
)

const stopTimeout = 15 * time.Second

// TestServeWithoutConfig: no --config and no ./extensions_config.json starts
// an empty mux with a warning; health endpoints answer; SIGTERM exits 0.
func TestServeWithoutConfig(t *testing.T) {
	s := startServe(t, t.TempDir(), nil, "--listen", "127.0.0.1:0")
	if l := findLog(s.stderr.String(), "no config file; starting with no servers"); l == nil || l["@level"] != "warn" {
		t.Errorf("no warning about the missing config file:\n%s", s.stderr.String())
	}
	if l := findLog(s.stderr.String(), "serving"); l["servers"] != 0.0 || l["endpoint"] != s.url("/mcp") {
		t.Errorf("serving line: %v", l)
	}
	hc := newHTTPClient(t)
	if code, body := httpGet(t, hc, s.url("/healthz")); code != http.StatusOK {
		t.Errorf("/healthz: %d %s", code, body)
	}
	if code, body := httpGet(t, hc, s.url("/readyz")); code != http.StatusOK {
		t.Errorf("/readyz: %d %s", code, body)
	}
	hc.CloseIdleConnections()
	if code := s.stop(stopTimeout); code != 0 {
		t.Fatalf("exit code %d after SIGTERM, want 0; stderr:\n%s", code, s.stderr.String())
	}
	if findLog(s.stderr.String(), "stopped") == nil {
		t.Errorf("no \"stopped\" log line:\n%s", s.stderr.String())
	}
}

// TestServeDefaultConfigFile: ./extensions_config.json is used when present.
func TestServeDefaultConfigFile(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "extensions_config.json", `{"mcpServers": {"off": {"enabled": false, "command": "false"}}}`)
	s := startServe(t, dir, nil, "--listen", "127.0.0.1:0", "--log-level", "debug")
	if l := findLog(s.stderr.String(), "serving"); l["servers"] != 1.0 {
		t.Errorf("serving line: %v", l)
	}
	if findLog(s.stderr.String(), "no config file; starting with no servers") != nil {
		t.Errorf("warned about a missing config file that exists")
	}
	if code := s.stop(stopTimeout); code != 0 {
		t.Fatalf("exit code %d", code)
	}
}

// TestServeEnvFallbacks: MCP_MUX_CONFIG and MCP_MUX_LISTEN are honoured, and
// flags win over them.
func TestServeEnvFallbacks(t *testing.T) {
	dir := t.TempDir()
	cfg := writeFile(t, dir, "mux.json", `{"mcpServers": {"a": {"enabled": false, "command": "false"}, "b": {"enabled": false, "command": "false"}}}`)
	s := startServe(t, t.TempDir(), []string{"MCP_MUX_CONFIG=" + cfg, "MCP_MUX_LISTEN=127.0.0.1:0"})
	if l := findLog(s.stderr.String(), "serving"); l["servers"] != 2.0 || !strings.HasPrefix(s.addr, "127.0.0.1:") {
		t.Errorf("serving line %v: MCP_MUX_CONFIG/MCP_MUX_LISTEN not used", l)
	}
	if code := s.stop(stopTimeout); code != 0 {
		t.Fatalf("exit code %d", code)
	}

	// A port that is already taken in MCP_MUX_LISTEN proves --listen wins.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	s = startServe(t, t.TempDir(), []string{"MCP_MUX_CONFIG=" + cfg, "MCP_MUX_LISTEN=" + ln.Addr().String()}, "--listen", "127.0.0.1:0")
	if s.addr == ln.Addr().String() {
		t.Errorf("MCP_MUX_LISTEN overrode --listen")
	}
	if code := s.stop(stopTimeout); code != 0 {
		t.Fatalf("exit code %d", code)
	}

	// And a taken port is a clean exit 1.
	r := runMux(t, dir, []string{"MCP_MUX_CONFIG=" + cfg, "MCP_MUX_LISTEN=" + ln.Addr().String()}, "serve")
	if r.code != 1 || !strings.Contains(r.stderr, "listening") {
		t.Errorf("listening on a taken port: code %d, stderr %q", r.code, r.stderr)
	}
}

// TestServeTextLogs: --log-format text logs plain lines.
func TestServeTextLogs(t *testing.T) {
	var stderr strings.Builder
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // serve returns as soon as it is up
	code := run(ctx, []string{"serve", "--listen", "127.0.0.1:0", "--log-format", "text"}, nil, &stderr, envMap(map[string]string{}))
	if code != 0 {
		t.Fatalf("code %d; stderr:\n%s", code, stderr.String())
	}
	out := stderr.String()
	if !strings.Contains(out, "[INFO]  mcp-mux: serving: addr=127.0.0.1:") || strings.Contains(out, `"@message"`) {
		t.Errorf("not text logs:\n%s", out)
	}
}

// envMap returns a LookupEnv over m. In-process serve runs in the package
// directory, where the default config file must not exist.
func envMap(m map[string]string) func(string) (string, bool) {
	if _, err := os.Stat(defaultConfig); err == nil {
		panic("in-process serve test run next to an " + defaultConfig)
	}
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

// TestServeInProcess runs serve through run with a real HTTP upstream,
// cancels it, and relies on TestMain's goleak check for leaked goroutines.
func TestServeInProcess(t *testing.T) {
	up := mcptest.ServeHTTP(t, mcptest.NewServer("web"))
	cfg := writeFile(t, t.TempDir(), "c.json", mustJSON(t, map[string]any{
		"mcpServers": map[string]any{"web": map[string]any{"type": "http", "url": up.URL + "/mcp"}},
	}))
	stderr := newLogBuf()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"serve", "--listen", "127.0.0.1:0"}, nil, stderr,
			envMap(map[string]string{"MCP_MUX_CONFIG": cfg}))
	}()
	var addr string
	if !stderr.WaitFor(30*time.Second, nil, func(s string) bool {
		l := findLog(s, "serving")
		if l != nil {
			addr, _ = l["addr"].(string)
		}
		return addr != ""
	}) {
		cancel()
		t.Fatalf("not serving:\n%s", stderr.String())
	}
	cs := connect(t, "http://"+addr+"/mcp")
	waitTools(t, cs, "web_echo")
	if got := callText(t, cs, "web_echo", map[string]any{"text": "in-process"}); got != "in-process" {
		t.Errorf("web_echo = %q", got)
	}
	_ = cs.Close()
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("serve returned %d:\n%s", code, stderr.String())
		}
	case <-time.After(stopTimeout):
		t.Fatalf("serve did not return after cancel:\n%s", stderr.String())
	}
}

// connect opens a go-sdk client session to a mux endpoint.
func connect(t *testing.T, endpoint string) *mcp.ClientSession {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "cmd-test", Version: "1"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: newHTTPClient(t)}, nil)
	if err != nil {
		t.Fatalf("connecting to %s: %v", endpoint, err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// toolNames lists the session's tools.
func toolNames(t *testing.T, cs *mcp.ClientSession) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
	}
	return names
}

// waitTools polls tools/list until every wanted tool is listed: upstream
// discovery runs in the background after the mux starts serving.
func waitTools(t *testing.T, cs *mcp.ClientSession, want ...string) []string {
	t.Helper()
	return waitToolsFor(t, cs, 60*time.Second, want...)
}

func waitToolsFor(t *testing.T, cs *mcp.ClientSession, timeout time.Duration, want ...string) []string {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		names := toolNames(t, cs)
		missing := false
		for _, w := range want {
			if !slices.Contains(names, w) {
				missing = true
			}
		}
		if !missing {
			return names
		}
		if time.Now().After(deadline) {
			t.Fatalf("tools %v never all listed; have %v", want, names)
		}
		time.Sleep(20 * time.Millisecond) // poll interval
	}
}

// callText calls a tool and returns its text content; a tool error fails the test.
func callText(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("tools/call %s: %v", name, err)
	}
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	if res.IsError {
		t.Fatalf("tools/call %s: tool error %q", name, parts)
	}
	return strings.Join(parts, "\n")
}

// TestServeStdioUpstream runs the mux with a real stdio upstream (this test
// binary re-executed, starting a grandchild) and a real HTTP upstream,
// calls through it, and checks that SIGTERM leaves no process behind.
func TestServeStdioUpstream(t *testing.T) {
	// A name unique to this run marks the stdio processes in /proc.
	stdioName := fmt.Sprintf("cmdtest-%d-%d", os.Getpid(), time.Now().UnixNano())
	marker := "MCPTEST_STDIO_SERVER=" + stdioName
	up := mcptest.ServeHTTP(t, mcptest.NewServer("web"))
	dir := t.TempDir()
	cfg := writeFile(t, dir, "extensions_config.json", mustJSON(t, map[string]any{
		"mcpServers": map[string]any{
			"local": stdioServer(stdioName, mcptest.StdioOptions{Grandchild: true, Banner: true}),
			"web":   map[string]any{"type": "http", "url": up.URL + "/mcp"},
		},
	}))
	s := startServe(t, dir, nil, "--config", cfg, "--listen", "127.0.0.1:0")
	t.Cleanup(func() {
		// Only if the test failed: end whatever the mux left behind, by pid.
		for _, pid := range liveProcesses(nil, marker) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})

	cs := connect(t, s.url("/mcp"))
	names := waitTools(t, cs, "local_echo", "local_add", "local_pid", "web_echo", "web_add")
	for _, n := range names {
		if !strings.HasPrefix(n, "local_") && !strings.HasPrefix(n, "web_") {
			t.Errorf("tool %q has no server prefix", n)
		}
	}
	if got := callText(t, cs, "local_echo", map[string]any{"text": "hello stdio"}); got != "hello stdio" {
		t.Errorf("local_echo = %q", got)
	}
	if got := callText(t, cs, "web_echo", map[string]any{"text": "hello http"}); got != "hello http" {
		t.Errorf("web_echo = %q", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "local_add", Arguments: map[string]any{"a": 2, "b": 40}})
	if err != nil || res.IsError {
		t.Fatalf("local_add: %v %+v", err, res)
	}
	if sc, _ := json.Marshal(res.StructuredContent); string(sc) != `{"sum":42}` {
		t.Errorf("local_add structuredContent = %s", sc)
	}
	var childPID int
	if _, err := fmt.Sscan(callText(t, cs, "local_pid", nil), &childPID); err != nil || childPID <= 0 {
		t.Fatalf("local_pid: %v", err)
	}
	if childPID == s.cmd.Process.Pid {
		t.Fatalf("stdio server runs in the mux process")
	}
	if live := liveProcesses(nil, marker); len(live) < 2 {
		t.Errorf("expected stdio servers and their grandchildren to be running, found %v", live)
	}
	hc := newHTTPClient(t)
	code, body := httpGet(t, hc, s.url("/readyz"))
	var ready struct {
		Ready   bool
		Servers map[string]int
		Detail  []any
	}
	if err := json.Unmarshal([]byte(body), &ready); code != http.StatusOK || err != nil || !ready.Ready ||
		ready.Servers["up"] != 2 || ready.Detail != nil {
		t.Errorf("/readyz: %d %s", code, body)
	}
	hc.CloseIdleConnections()

	if code := s.stop(stopTimeout); code != 0 {
		t.Fatalf("exit code %d after SIGTERM, want 0; stderr:\n%s", code, s.stderr.String())
	}
	// The mux waits for its process groups; give the kernel a moment to
	// finish delivering SIGKILL to what is left.
	pgids := []int{s.cmd.Process.Pid, childPID}
	deadline := time.Now().Add(5 * time.Second)
	for {
		live := liveProcesses(pgids, marker)
		if len(live) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("processes left after mcp-mux exited: %v", live)
		}
		time.Sleep(20 * time.Millisecond) // poll interval
	}
}

// TestServeSkipsBrokenServers: an invalid server, a command that does not
// exist and an HTTP server that never answers are skipped; the good server
// serves.
func TestServeSkipsBrokenServers(t *testing.T) {
	up := mcptest.ServeHTTP(t, mcptest.NewServer("web"))
	hung := mcptest.Hung(t)
	dir := t.TempDir()
	cfg := writeFile(t, dir, "c.json", mustJSON(t, map[string]any{
		"mcpServers": map[string]any{
			"invalid": map[string]any{"type": "http"},
			"missing": map[string]any{"command": "/nonexistent/mcp-server-binary"},
			"hung":    map[string]any{"type": "http", "url": hung.URL + "/mcp", "session_init_timeout": 0.5},
			"web":     map[string]any{"type": "http", "url": up.URL + "/mcp"},
		},
	}))
	s := startServe(t, dir, nil, "--config", cfg, "--listen", "127.0.0.1:0")
	cs := connect(t, s.url("/mcp"))
	waitTools(t, cs, "web_echo")
	if !s.stderr.WaitFor(30*time.Second, s.done, func(out string) bool {
		var invalid, missing, hung bool
		for _, l := range logLines(out) {
			switch {
			case l["@message"] == "skipping invalid server" && l["server"] == "invalid":
				invalid = true
			case l["@message"] == "skipping upstream server" && l["server"] == "missing":
				missing = true
			case l["@message"] == "skipping upstream server" && l["server"] == "hung":
				hung = true
			}
		}
		return invalid && missing && hung
	}) {
		t.Errorf("broken servers not all reported as skipped:\n%s", s.stderr.String())
	}
	for _, n := range toolNames(t, cs) {
		if !strings.HasPrefix(n, "web_") {
			t.Errorf("unexpected tool %q", n)
		}
	}
	if got := callText(t, cs, "web_echo", map[string]any{"text": "still up"}); got != "still up" {
		t.Errorf("web_echo = %q", got)
	}
	_ = cs.Close()
	if code := s.stop(stopTimeout); code != 0 {
		t.Fatalf("exit code %d", code)
	}
}

// TestServeNeverLogsSecrets: a header and an env value from $SECRET_TOKEN
// reach the upstreams but never serve's stderr, even at trace level and
// when the upstream rejects them.
func TestServeNeverLogsSecrets(t *testing.T) {
	const secret = "tok-5e3c7a91-do-not-log"
	up := mcptest.ServeHTTP(t, mcptest.NewServer("web"))
	reject := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "bad key "+r.Header.Get("X-Api-Key"), http.StatusUnauthorized)
	}))
	t.Cleanup(reject.Close)
	stdio := stdioServer(fmt.Sprintf("secret-%d", os.Getpid()), mcptest.StdioOptions{})
	stdio["env"].(map[string]string)["API_TOKEN"] = "$SECRET_TOKEN"
	dir := t.TempDir()
	cfg := writeFile(t, dir, "c.json", mustJSON(t, map[string]any{
		"mcpServers": map[string]any{
			"web":    map[string]any{"type": "http", "url": up.URL + "/mcp", "headers": map[string]any{"X-Api-Key": "$SECRET_TOKEN"}},
			"denied": map[string]any{"type": "http", "url": reject.URL + "/mcp", "headers": map[string]any{"X-Api-Key": "$SECRET_TOKEN"}},
			"sse":    map[string]any{"type": "sse", "url": reject.URL + "/sse", "headers": map[string]any{"Authorization": "$SECRET_TOKEN"}},
			"local":  stdio,
		},
		"admin": map[string]any{"token": "$SECRET_TOKEN"},
	}))
	s := startServe(t, dir, []string{"SECRET_TOKEN=" + secret}, "--config", cfg, "--listen", "127.0.0.1:0", "--log-level", "trace")
	cs := connect(t, s.url("/mcp"))
	waitTools(t, cs, "web_headers", "local_echo")
	if got := callText(t, cs, "web_headers", nil); !strings.Contains(got, "X-Api-Key: "+secret) {
		t.Errorf("the upstream did not receive the header; it saw:\n%s", got)
	}
	if !s.stderr.WaitFor(30*time.Second, s.done, func(out string) bool {
		n := 0
		for _, l := range logLines(out) {
			if l["@message"] == "skipping upstream server" && (l["server"] == "denied" || l["server"] == "sse") {
				n++
			}
		}
		return n == 2
	}) {
		t.Errorf("rejected upstreams not reported:\n%s", s.stderr.String())
	}
	_ = cs.Close()
	if code := s.stop(stopTimeout); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	if out := s.stderr.String(); strings.Contains(out, secret) {
		t.Errorf("serve logged the secret:\n%s", out)
	}
}

// TestServeNoneIsLoopbackOnly: with inbound.auth mode none (the default),
// serve refuses a non-loopback listen address unless allow_remote opts in.
func TestServeNoneIsLoopbackOnly(t *testing.T) {
	dir := t.TempDir()
	open := writeFile(t, dir, "open.json", `{"mcpServers": {}, "inbound": {"auth": {"mode": "none", "allow_remote": true}}}`)
	keyed := writeFile(t, dir, "keyed.json", `{"mcpServers": {}, "inbound": {"auth": {"mode": "api_keys", "keys": {"a": "k-1"}}}}`)
	for _, tt := range []struct {
		args []string
		code int
	}{
		{[]string{"--listen", "0.0.0.0:0"}, 1},
		{[]string{"--listen", ":0"}, 1},
		{[]string{"--listen", "127.0.0.1:0"}, 0},
		{[]string{"--listen", "localhost:0"}, 0},
		{[]string{"--listen", "0.0.0.0:0", "--config", open}, 0},
		{[]string{"--listen", "0.0.0.0:0", "--config", keyed}, 0},
	} {
		var stderr strings.Builder
		ctx, cancel := context.WithCancel(context.Background())
		cancel() // serve returns as soon as it is up
		code := run(ctx, append([]string{"serve"}, tt.args...), nil, &stderr, envMap(map[string]string{}))
		if code != tt.code {
			t.Errorf("serve %v: code %d, want %d; stderr:\n%s", tt.args, code, tt.code, stderr.String())
			continue
		}
		refused := findLog(stderr.String(), "refusing to serve")
		if tt.code == 1 {
			reason, _ := refused["reason"].(string)
			if !strings.Contains(reason, "inbound.auth") || !strings.Contains(reason, "allow_remote") {
				t.Errorf("serve %v: refusal does not name inbound.auth and allow_remote: %v", tt.args, refused)
			}
		} else if refused != nil {
			t.Errorf("serve %v: refused: %v", tt.args, refused)
		}
	}
}

// TestServeSIGKILLLeavesNoProcesses: a mux killed with SIGKILL leaves no
// stdio server and no descendant of one, here a shell's background sleep
// beside the server it exec'd, for the discovery and a call session alike.
// Even a child that left the group with setsid is caught: its parent dies
// first, and the supervisor, its subreaper, kills it then.
func TestServeSIGKILLLeavesNoProcesses(t *testing.T) {
	name := fmt.Sprintf("sigkill-%d-%d", os.Getpid(), time.Now().UnixNano())
	marker := "MCPTEST_STDIO_SERVER=" + name
	srv := stdioServer(name, mcptest.StdioOptions{})
	script := fmt.Sprintf("sleep 300 & setsid sleep 301 & exec %q %s", srv["command"], strings.Join(srv["args"].([]string), " "))
	srv["command"], srv["args"] = "sh", []string{"-c", script}
	dir := t.TempDir()
	cfg := writeFile(t, dir, "c.json", mustJSON(t, map[string]any{"mcpServers": map[string]any{"local": srv}}))
	s := startServe(t, dir, nil, "--config", cfg, "--listen", "127.0.0.1:0")
	t.Cleanup(func() { // only if the test failed: end what the mux left behind, by pid
		for _, pid := range liveProcesses(nil, marker) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	cs := connect(t, s.url("/mcp"))
	waitTools(t, cs, "local_echo")
	if got := callText(t, cs, "local_echo", map[string]any{"text": "up"}); got != "up" {
		t.Fatalf("local_echo = %q", got)
	}
	// Two sessions (discovery, the call), each a supervisor, a server and two sleeps.
	waitFor := time.Now().Add(5 * time.Second)
	for live := liveProcesses(nil, marker); len(live) != 8; live = liveProcesses(nil, marker) {
		if time.Now().After(waitFor) {
			t.Fatalf("before SIGKILL: %d processes %v, want 8", len(live), live)
		}
		time.Sleep(20 * time.Millisecond) // poll interval: the sleeps may still be starting
	}
	_ = cs.Close()
	if err := s.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-s.done
	deadline := time.Now().Add(5 * time.Second)
	for {
		live := liveProcesses(nil, marker)
		if len(live) == 0 {
			break
		}
		if time.Now().After(deadline) {
			var desc []string
			for _, pid := range live {
				cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
				stat, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
				desc = append(desc, fmt.Sprintf("%q %s", bytes.ReplaceAll(cmdline, []byte{0}, []byte{' '}), stat))
			}
			t.Fatalf("processes left 5s after SIGKILL of the mux: %v", desc)
		}
		time.Sleep(20 * time.Millisecond) // poll interval
	}
}

// TestServeNeverLeaksCredentials: credentials in upstream URLs (user info,
// query) and credentials an upstream echoes in its error text appear in no
// log line, no response, no /readyz body (even the authenticated one) and no
// metric, while the errors they were in still reach each of those places.
func TestServeNeverLeaksCredentials(t *testing.T) {
	const (
		userMark  = "USERMARK-3c1d"
		passMark  = "PASSMARK-77ab"
		queryMark = "QUERYMARK-9f2e"
		keyMark   = "HEADERMARK-5a5a"
		adminTok  = "admin-tok-61f0"
	)
	marks := []string{userMark, passMark, queryMark, keyMark}
	// An upstream that echoes the credential it got in its error text.
	echo := mcp.NewServer(&mcp.Implementation{Name: "echoer", Version: "1"}, nil)
	echo.AddTool(&mcp.Tool{Name: "leak", InputSchema: map[string]any{"type": "object"}},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return nil, fmt.Errorf("key %s is not allowed here", req.Extra.Header.Get("X-Api-Key"))
		})
	up := mcptest.ServeHTTP(t, echo)
	// Nothing listens there: the transport error quotes the URL.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadAddr := ln.Addr().String()
	ln.Close()
	dir := t.TempDir()
	cfg := writeFile(t, dir, "c.json", mustJSON(t, map[string]any{
		"mcpServers": map[string]any{
			"echo": map[string]any{"type": "http", "url": up.URL + "/mcp", "headers": map[string]any{"X-Api-Key": "$KEY"}},
			"dead": map[string]any{"type": "http", "url": "http://" + userMark + ":" + passMark + "@" + deadAddr + "/mcp?api_key=" + queryMark,
				"session_init_timeout": 2},
			"deadsse": map[string]any{"type": "sse", "url": "http://" + deadAddr + "/sse?token=" + queryMark},
		},
		"admin": map[string]any{"token": adminTok},
	}))
	s := startServe(t, dir, []string{"KEY=" + keyMark}, "--config", cfg, "--listen", "127.0.0.1:0", "--log-level", "trace")
	cs := connect(t, s.url("/mcp"))
	waitTools(t, cs, "echo_leak")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// The upstream's JSON-RPC error is passed through as one, scrubbed.
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo_leak", Arguments: map[string]any{}})
	answer, _ := json.Marshal(res)
	if err != nil {
		answer = []byte(err.Error())
	}
	if !strings.Contains(string(answer), "is not allowed here") || !strings.Contains(string(answer), "[REDACTED]") {
		t.Errorf("the echoed error did not come back scrubbed: %s", answer)
	}
	hc := newHTTPClient(t)
	var bodies []string
	if !s.stderr.WaitFor(30*time.Second, s.done, func(string) bool {
		_, body := httpGet(t, hc, s.url("/readyz"))
		return strings.Contains(body, `"retrying":2`)
	}) {
		t.Fatalf("the dead servers never counted as retrying")
	}
	_, public := httpGet(t, hc, s.url("/readyz"))
	if strings.Contains(public, "dead") || strings.Contains(public, "refused") {
		t.Errorf("unauthenticated /readyz names servers or errors: %s", public)
	}
	req, _ := http.NewRequest(http.MethodGet, s.url("/readyz"), nil)
	req.Header.Set("Authorization", "Bearer "+adminTok)
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	detail, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(detail), `"state":"retrying"`) || !strings.Contains(string(detail), "[REDACTED]") {
		t.Errorf("authenticated /readyz lacks the scrubbed reasons: %s", detail)
	}
	_, metrics := httpGet(t, hc, s.url("/metrics"))
	bodies = append(bodies, string(answer), public, string(detail), metrics)
	hc.CloseIdleConnections()
	_ = cs.Close()
	if code := s.stop(stopTimeout); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	logs := s.stderr.String()
	if !strings.Contains(logs, "skipping upstream server") {
		t.Errorf("the failures were not logged, so the log check proves little:\n%s", logs)
	}
	bodies = append(bodies, logs)
	for i, b := range bodies {
		for _, m := range marks {
			if strings.Contains(b, m) {
				t.Errorf("output %d contains credential %s:\n%s", i, m, b)
			}
		}
	}
}

// TestServeListensBeforeDiscovery: serve listens at once, and servers are
// discovered in the background after that (as the README says), even when
// a stdio server hangs on initialize: the "serving" line comes before the
// hung server's "skipping upstream server", and /healthz answers.
func TestServeListensBeforeDiscovery(t *testing.T) {
	dir := t.TempDir()
	hung := stdioServer("hung", mcptest.StdioOptions{Hang: true})
	hung["session_init_timeout"] = 1 // the attempt fails well within the 5 s a reload waits
	cfg := writeFile(t, dir, "c.json", mustJSON(t, map[string]any{"mcpServers": map[string]any{"hung": hung}}))
	s := startServe(t, dir, nil, "--config", cfg, "--listen", "127.0.0.1:0")
	if code, _ := httpGet(t, newHTTPClient(t), s.url("/healthz")); code != 200 {
		t.Fatalf("/healthz: %d", code)
	}
	if !s.stderr.WaitFor(30*time.Second, s.done, func(out string) bool { return findLog(out, "skipping upstream server") != nil }) {
		t.Fatalf("the hung server was never skipped:\n%s", s.stderr.String())
	}
	var order []string
	for _, l := range logLines(s.stderr.String()) {
		if m, _ := l["@message"].(string); m == "serving" || m == "skipping upstream server" {
			order = append(order, m)
		}
	}
	if len(order) == 0 || order[0] != "serving" {
		t.Fatalf("log order %q: serve listened only after discovery", order)
	}
}
