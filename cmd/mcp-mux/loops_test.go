package main

import (
	"context"
	"encoding/json"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/internal/mcptest"
)

// serverState returns a server's state and reason from /api/status.
func serverState(t *testing.T, s *server, name string) (string, string) {
	t.Helper()
	_, body := httpGet(t, newHTTPClient(t), s.url("/api/status"))
	var rep struct {
		Servers []struct{ Name, State, Reason string }
	}
	if err := json.Unmarshal([]byte(body), &rep); err != nil {
		t.Fatalf("status: %v: %s", err, body)
	}
	for _, sv := range rep.Servers {
		if sv.Name == name {
			return sv.State, sv.Reason
		}
	}
	return "", ""
}

// Issue 17 attack 5: an upstream url that leads back to the mux recursed
// without bound (one call: 60,667 goroutines, 1.84 GB, 19,819 fds, accept4
// failing for every other client). A url that is the mux's own listener,
// however spelled, is invalid; one that reaches it through another mux is
// refused at the second pass (Mcp-Mux-Via), and costs one call.
func TestServeRefusesLoops(t *testing.T) {
	up := mcptest.ServeHTTP(t, mcptest.NewServer("web"))
	dirA, dirB := t.TempDir(), t.TempDir()
	web := map[string]any{"type": "http", "url": up.URL + "/mcp"}
	cfgA := writeFile(t, dirA, "a.json", mustJSON(t, map[string]any{"mcpServers": map[string]any{"web": web}}))
	a := startServe(t, dirA, nil, "--config", cfgA, "--listen", "127.0.0.1:0")
	cfgB := writeFile(t, dirB, "b.json", mustJSON(t, map[string]any{
		"mcpServers": map[string]any{"a": map[string]any{"type": "http", "url": a.url("/mcp")}},
	}))
	b := startServe(t, dirB, nil, "--config", cfgB, "--listen", "127.0.0.1:0")

	// A now reaches itself through B, and directly under another name.
	_, port, _ := net.SplitHostPort(a.addr)
	writeFile(t, dirA, "a.json", mustJSON(t, map[string]any{"mcpServers": map[string]any{
		"web":  web,
		"b":    map[string]any{"type": "http", "url": b.url("/mcp")},
		"self": map[string]any{"type": "http", "url": "http://localhost:" + port + "/mcp"},
	}}))
	if err := a.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitCond(t, 30*time.Second, "the reload", func() bool { s, _ := serverState(t, a, "self"); return s == "invalid" })
	if _, reason := serverState(t, a, "self"); !strings.Contains(reason, "url: points at this mcp-mux's own listener (127.0.0.1:"+port+")") {
		t.Errorf("self: %q", reason)
	}

	cs := connect(t, a.url("/mcp"))
	waitToolsFor(t, cs, 30*time.Second, "b_a_web_echo")
	goroutines, fds := metricValue(t, a, "go_goroutines"), metricValue(t, a, "process_open_fds")

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// The second pass through A is refused; the refusal comes back as the
	// call's error (B relays A's JSON-RPC error as it is).
	const want = "request loop: this request already passed through this mcp-mux"
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "b_a_web_echo", Arguments: map[string]any{"text": "x"}})
	switch {
	case err != nil:
		if !strings.Contains(err.Error(), want) {
			t.Errorf("looping call: %v", err)
		}
	case !res.IsError || len(res.Content) == 0 || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, want):
		t.Errorf("looping call: not refused: %+v", res)
	}

	// Another client is served as before.
	other := connect(t, a.url("/mcp"))
	if got := callText(t, other, "web_echo", map[string]any{"text": "still here"}); got != "still here" {
		t.Errorf("web_echo = %q", got)
	}
	_ = other.Close()
	waitCond(t, 30*time.Second, "goroutines and fds back near the baseline", func() bool {
		return metricValue(t, a, "go_goroutines") <= goroutines+20 && metricValue(t, a, "process_open_fds") <= fds+10
	})
	_ = cs.Close()
}
