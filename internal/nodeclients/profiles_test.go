package nodeclients_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/mcp-mux/mcp-mux/internal/config"
	"github.com/mcp-mux/mcp-mux/internal/mcptest"
	"github.com/mcp-mux/mcp-mux/internal/nodeclients"
	"github.com/mcp-mux/mcp-mux/internal/proxy"
)

// Profile keys: a's caller is bound to profile a, b's to b, c's to none.
const (
	profileKeyA = "profile-key-a-1f2e"
	profileKeyB = "profile-key-b-3d4c"
	profileKeyC = "profile-key-c-5b6a"
)

// startProfileMux serves mcp-mux in front of two test servers with two
// profiles and returns its base URL.
func startProfileMux(t *testing.T) string {
	t.Helper()
	alpha := mcptest.ServeHTTP(t, mcptest.NewServer("alpha"))
	beta := mcptest.ServeHTTP(t, mcptest.NewServer("beta"))
	doc := fmt.Sprintf(`{"mcpServers": {"alpha": {"type": "http", "url": %q}, "beta": {"type": "http", "url": %q}},
	  "profiles": {"a": {"servers": ["alpha"], "include_tools": ["alpha_echo", "alpha_add"]}, "b": {"servers": ["beta"], "include_tools": ["beta_echo", "beta_pid"]}},
	  "inbound": {"auth": {"mode": "api_keys", "keys": {"a": %q, "b": %q, "c": %q}}, "profile_by": {"api_keys": {"a": "a", "b": "b"}}}}`,
		alpha.URL+"/mcp", beta.URL+"/mcp", profileKeyA, profileKeyB, profileKeyC)
	cfg, err := config.Parse([]byte(doc), config.LoadOptions{Filename: "profiles.json"})
	if err != nil || len(cfg.Invalid) > 0 {
		t.Fatalf("config: %v %+v", err, cfg)
	}
	logs := &mcptest.LogBuffer{}
	px := proxy.New(proxy.Options{Logger: hclog.New(&hclog.LoggerOptions{Output: logs, Level: hclog.Debug})})
	if err := px.Apply(cfg); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := px.WaitDiscovery(ctx); err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(px.Handler())
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("mux log:\n%s", logs.String())
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		_ = px.Close(ctx)
		ts.Close()
	})
	return ts.URL
}

// TestTypeScriptClientsProfiles: two api keys bound to two profiles see
// different tool lists and are refused each other's tools, with the
// TypeScript SDK client on 2025-11-25 and the v2 client on 2026-07-28;
// /mcp/b serves profile b to an unbound key and refuses a's key.
func TestTypeScriptClientsProfiles(t *testing.T) {
	base := startProfileMux(t)
	script := nodeclients.Script(t, "profiles.mjs")
	want := map[string]string{"a_tools": "alpha_add alpha_echo", "b_tools": "beta_echo beta_pid", "path_b_tools": "beta_echo beta_pid",
		"a_own": "hi", "b_own": "hi", "path_b_own": "hi"}
	for _, c := range []struct{ flavor, mode string }{{"sdk1", "legacy"}, {"v2", "modern"}} {
		t.Run(c.flavor+"-"+c.mode, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, nodeclients.Node(t), script, c.flavor, c.mode, base, profileKeyA, profileKeyB, profileKeyC)
			cmd.Dir = filepath.Dir(script)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err != nil {
				t.Errorf("driver: %v\nstderr:\n%s", err, stderr.String())
			}
			got := map[string]result{}
			sc := bufio.NewScanner(bytes.NewReader(out))
			for sc.Scan() {
				var r result
				if json.Unmarshal(sc.Bytes(), &r) == nil {
					got[r.Check] = r
				}
			}
			for _, name := range []string{"a_connect", "a_tools", "a_own", "a_refused", "b_connect", "b_tools", "b_own", "b_refused",
				"path_b_connect", "path_b_tools", "path_b_own", "path_b_refused", "escape_refused", "done"} {
				r, ok := got[name]
				switch {
				case !ok:
					t.Errorf("%s: no result", name)
				case !r.OK:
					t.Errorf("%s failed: %s", name, r.Detail)
				case want[name] != "" && r.Detail != want[name]:
					t.Errorf("%s: %q, want %q", name, r.Detail, want[name])
				case strings.HasSuffix(name, "_refused") && name != "escape_refused" && !strings.Contains(r.Detail, "unknown tool"):
					t.Errorf("%s: %q, want an unknown tool error", name, r.Detail)
				default:
					t.Logf("%s: %s", name, r.Detail)
				}
			}
		})
	}
}
