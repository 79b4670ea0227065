package main

// Hot reload of a running `mcp-mux serve` process (issue 11): a ConfigMap
// mount updated the way the kubelet does it, a broken update, SIGHUP, and
// the admin API's answer for a ConfigMap mount.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/internal/mcptest"
)

func TestConfigMapHotReload(t *testing.T) {
	web := mcptest.ServeHTTP(t, mcptest.NewServer("web"))
	fresh := mcptest.ServeHTTP(t, mcptest.NewServer("fresh"))
	var tokenHits atomic.Int32
	tokens := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := tokenHits.Add(1)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"access_token": "tok-%d", "token_type": "Bearer", "expires_in": 3600}`, n)
	}))
	t.Cleanup(tokens.Close)

	doc := func(desc string, withFresh bool) string {
		servers := map[string]any{
			"local": stdioServer("local", mcptest.StdioOptions{}),
			"web": map[string]any{"type": "http", "url": web.URL + "/mcp", "description": desc,
				"oauth": map[string]any{"token_url": tokens.URL, "client_id": "mux", "client_secret": "$CLIENT_SECRET"}},
		}
		if withFresh {
			servers["fresh"] = map[string]any{"type": "http", "url": fresh.URL + "/mcp"}
		}
		return mustJSON(t, map[string]any{"mcpServers": servers, "admin": map[string]any{"token": "$ADMIN_TOKEN"}})
	}
	cm := mcptest.NewConfigMap(t, "extensions_config.json", doc("one", false))
	s := startServe(t, t.TempDir(), []string{"CLIENT_SECRET=cs-secret", "ADMIN_TOKEN=adm-token"},
		"--config", cm.Path, "--listen", "127.0.0.1:0")

	changed := make(chan struct{}, 16)
	client := mcp.NewClient(&mcp.Implementation{Name: "cmd-test", Version: "1"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: s.url("/mcp"), HTTPClient: newHTTPClient(t)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	waitTools(t, cs, "local_pid", "web_headers")
	pid := callText(t, cs, "local_pid", map[string]any{})
	auth := callText(t, cs, "web_headers", map[string]any{})
	hits := tokenHits.Load()
	if _, err := strconv.Atoi(pid); err != nil || !strings.Contains(auth, "Bearer tok-") || hits != 1 {
		t.Fatalf("before: pid %q, headers %q, %d token hits", pid, auth, hits)
	}

	// The kubelet's atomic update: a new timestamped directory, ..data swapped by rename.
	swapped := time.Now()
	cm.Update(doc("two", true))
	select {
	case <-changed:
	case <-time.After(30 * time.Second):
		t.Fatalf("no tools/list_changed after the ConfigMap update; stderr:\n%s", s.stderr.String())
	}
	names := waitToolsFor(t, cs, 10*time.Second, "fresh_echo")
	t.Logf("ConfigMap swap → new tool list served: %v", time.Since(swapped))
	if !slices.Contains(names, "local_pid") || !slices.Contains(names, "web_headers") {
		t.Errorf("tools after reload: %v", names)
	}
	if got := callText(t, cs, "local_pid", map[string]any{}); got != pid {
		t.Errorf("unchanged stdio server restarted: pid %s → %s", pid, got)
	}
	if got := callText(t, cs, "web_headers", map[string]any{}); tokenLine(got) != tokenLine(auth) {
		t.Errorf("unchanged server's OAuth token changed: %q → %q", tokenLine(auth), tokenLine(got))
	}
	if n := tokenHits.Load(); n != hits {
		t.Errorf("%d token-endpoint hits across the reload, want 0", n-hits)
	}

	// A broken update is logged and ignored; the running config serves on.
	cm.Update(`{"mcpServers": {`)
	if !s.stderr.WaitFor(30*time.Second, s.done, func(out string) bool { return findLog(out, "reload problem") != nil }) {
		t.Fatalf("no reload problem logged for a broken update; stderr:\n%s", s.stderr.String())
	}
	if got := callText(t, cs, "fresh_echo", map[string]any{"text": "still"}); got != "still" {
		t.Errorf("after a broken update: fresh_echo = %q", got)
	}

	// SIGHUP reloads (it used to kill the process with exit 129).
	if err := s.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	if !s.stderr.WaitFor(30*time.Second, s.done, func(out string) bool {
		for _, l := range logLines(out) {
			if l["@message"] == "reload problem" && l["trigger"] == "signal" {
				return true
			}
		}
		return false
	}) {
		t.Fatalf("SIGHUP did not reload; stderr:\n%s", s.stderr.String())
	}
	if got := callText(t, cs, "local_pid", map[string]any{}); got != pid {
		t.Errorf("after SIGHUP of a broken file: pid %s → %s", pid, got)
	}

	// The admin API cannot write a ConfigMap mount.
	req, _ := http.NewRequest(http.MethodPatch, s.url("/api/mcp/config"), strings.NewReader(`{"server_name": "web", "enabled": false}`))
	req.Header.Set("Authorization", "Bearer adm-token")
	res, err := newHTTPClient(t).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusConflict || !strings.Contains(string(body), "ConfigMap") {
		t.Errorf("PATCH on a ConfigMap mount: %d %s", res.StatusCode, body)
	}
	if strings.Contains(s.stderr.String(), "cs-secret") || strings.Contains(s.stderr.String(), "adm-token") {
		t.Error("a secret reached the log")
	}
	_ = cs.Close()
	if code := s.stop(stopTimeout); code != 0 {
		t.Errorf("exit code %d after SIGTERM", code)
	}
}

// tokenLine picks the Authorization line out of the headers tool's answer.
func tokenLine(headers string) string {
	for _, l := range strings.Split(headers, "\n") {
		if strings.HasPrefix(strings.ToLower(l), "authorization:") {
			return l
		}
	}
	return ""
}

// TestAdminAPIWritesAndReloads: a PUT through the admin API of a running
// serve adds a server that is then served; the file keeps its placeholders
// and no response carries a secret.
func TestAdminAPIWritesAndReloads(t *testing.T) {
	web := mcptest.ServeHTTP(t, mcptest.NewServer("web"))
	added := mcptest.ServeHTTP(t, mcptest.NewServer("added"))
	dir := t.TempDir()
	path := writeFile(t, dir, "extensions_config.json", mustJSON(t, map[string]any{
		"mcpServers": map[string]any{"web": map[string]any{"type": "http", "url": web.URL + "/mcp", "headers": map[string]any{"X-Key": "$WEB_KEY"}}},
		"admin":      map[string]any{"token": "$ADMIN_TOKEN"},
	}))
	s := startServe(t, dir, []string{"WEB_KEY=web-key-secret", "ADMIN_TOKEN=adm-token"}, "--config", path, "--listen", "127.0.0.1:0")
	cs := connect(t, s.url("/mcp"))
	waitTools(t, cs, "web_echo")
	hc := newHTTPClient(t)
	do := func(method, path, body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, s.url(path), strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer adm-token")
		res, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		if strings.Contains(string(b), "web-key-secret") || strings.Contains(string(b), "adm-token") {
			t.Errorf("%s %s answered a secret: %s", method, path, b)
		}
		return res.StatusCode, string(b)
	}
	code, got := do("GET", "/api/mcp/config", "")
	if code != http.StatusOK || !strings.Contains(got, `"X-Key":"***"`) {
		t.Fatalf("GET: %d %s", code, got)
	}
	var shape map[string]map[string]any
	if err := json.Unmarshal([]byte(got), &shape); err != nil {
		t.Fatal(err)
	}
	shape["mcp_servers"]["added"] = map[string]any{"type": "http", "url": added.URL + "/mcp"}
	put := mustJSON(t, shape)
	if code, body := do("PUT", "/api/mcp/config", put); code != http.StatusOK {
		t.Fatalf("PUT: %d %s", code, body)
	}
	// A fresh session sees the new server at once: the PUT answers after the reload.
	if names := toolNames(t, connect(t, s.url("/mcp"))); !slices.Contains(names, "added_echo") || !slices.Contains(names, "web_echo") {
		t.Errorf("tools after PUT: %v", names)
	}
	// The open one too, once its client-side list cache (ttlMs) lapses.
	waitToolsFor(t, cs, 10*time.Second, "added_echo")
	file, _ := os.ReadFile(path)
	if !strings.Contains(string(file), `"$WEB_KEY"`) || strings.Contains(string(file), "web-key-secret") {
		t.Errorf("file after PUT:\n%s", file)
	}
	if code, body := do("POST", "/api/extensions/mcp/added/disable", ""); code != http.StatusOK {
		t.Fatalf("disable: %d %s", code, body)
	}
	if names := toolNames(t, connect(t, s.url("/mcp"))); slices.Contains(names, "added_echo") {
		t.Errorf("tools after disable: %v", names)
	}
	if code, body := do("POST", "/api/mcp/cache/reset", ""); code != http.StatusOK || !strings.Contains(body, "cache reset") {
		t.Errorf("reset: %d %s", code, body)
	}
	waitTools(t, cs, "web_echo")
	if got := callText(t, cs, "web_echo", map[string]any{"text": "after reset"}); got != "after reset" {
		t.Errorf("web_echo after reset = %q", got)
	}
	hc.CloseIdleConnections()
	_ = cs.Close()
	if code := s.stop(stopTimeout); code != 0 {
		t.Errorf("exit code %d", code)
	}
}
