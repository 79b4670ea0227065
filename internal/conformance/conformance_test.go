// Package conformance runs the official MCP conformance server suite
// (npm @modelcontextprotocol/conformance) against mcp-mux fronting the go-sdk
// conformance everything-server, once over HTTP and once over stdio. The
// suite must pass completely through the mux, as it does against the server
// directly.
package conformance

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcp-mux/mcp-mux/internal/config"
	"github.com/mcp-mux/mcp-mux/internal/proxy"
)

const (
	suitePackage = "@modelcontextprotocol/conformance"
	suiteVersion = "0.1.16"
	wantSummary  = "Total: 40 passed, 0 failed"
)

// suiteEntry installs the conformance package once into a cache directory
// and returns its entry point.
func suiteEntry(t *testing.T) string { return suiteEntryVersion(t, suiteVersion) }

// globSyncImport is how the bundle imports fs.globSync (its local name varies).
var globSyncImport = regexp.MustCompile(`globSync as ([A-Za-z_$][A-Za-z0-9_$]*),`)

// suiteEntryVersion installs one version of the conformance package once
// into a cache directory (MCP_CONFORMANCE_HOME, per version) and returns
// its entry point.
func suiteEntryVersion(t *testing.T, suiteVersion string) string {
	t.Helper()
	home := os.Getenv("MCP_CONFORMANCE_HOME")
	if home != "" && suiteVersion != "0.1.16" {
		home = filepath.Join(home, suiteVersion)
	}
	if home == "" {
		cache, err := os.UserCacheDir()
		if err != nil {
			cache = os.TempDir()
		}
		home = filepath.Join(cache, "mcp-mux", "conformance-"+suiteVersion)
	}
	entry := filepath.Join(home, "node_modules", "@modelcontextprotocol", "conformance", "dist", "index.js")
	if _, err := os.Stat(entry); err != nil {
		if err := os.MkdirAll(home, 0o755); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(home, "package.json")); err != nil {
			_ = os.WriteFile(filepath.Join(home, "package.json"), []byte(`{"private": true}`), 0o644)
		}
		cmd := exec.Command("npm", "install", "--no-audit", "--no-fund", suitePackage+"@"+suiteVersion)
		cmd.Dir = home
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("installing %s@%s: %v\n%s", suitePackage, suiteVersion, err, out)
		}
	}
	// The bundle imports fs.globSync (Node >= 22) only for a command the
	// server suite does not use (tier-check); on older Node, stub that import.
	if exec.Command("node", "-e", `process.exit(require("fs").globSync ? 0 : 1)`).Run() != nil {
		b, err := os.ReadFile(entry)
		if err != nil {
			t.Fatal(err)
		}
		if m := globSyncImport.FindSubmatch(b); m != nil {
			b = bytes.Replace(b, m[0], nil, 1)
			if i := bytes.IndexByte(b, '\n'); i >= 0 {
				b = append(append(append([]byte{}, b[:i+1]...), "const "+string(m[1])+"=()=>[];"...), b[i+1:]...)
			}
			if err := os.WriteFile(entry, b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	return entry
}

// everythingServer builds the go-sdk conformance server (pinned as a tool in go.mod).
func everythingServer(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "everything-server")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/modelcontextprotocol/go-sdk/conformance/everything-server")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building everything-server: %v\n%s", err, out)
	}
	return bin
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// startMux serves mcp-mux on the given single-server config.
func startMux(t *testing.T, server string) string {
	t.Helper()
	cfg, err := config.Parse([]byte(`{"mcpServers": {"everything": `+server+`}}`), config.LoadOptions{Filename: "conformance.json"})
	if err != nil || len(cfg.Invalid) > 0 {
		t.Fatalf("config: %v %+v", err, cfg)
	}
	srv := proxy.New(proxy.Options{})
	if err := srv.Apply(cfg); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := srv.WaitDiscovery(ctx); err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Close(ctx)
		ts.Close()
	})
	return ts.URL + "/mcp"
}

var summaryLine = regexp.MustCompile(`(?m)^Total: \d+ passed, \d+ failed.*$`)

// runSuite runs the server suite against url and returns its summary section.
func runSuite(t *testing.T, entry, url string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", entry, "server", "--url", url)
	cmd.Dir = filepath.Dir(filepath.Dir(filepath.Dir(filepath.Dir(filepath.Dir(entry)))))
	out, _ := cmd.CombinedOutput()
	s := string(out)
	i := strings.Index(s, "=== SUMMARY ===")
	if i < 0 {
		t.Fatalf("no summary from the conformance suite:\n%s", tail(s, 4000))
	}
	return s[i:]
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

func checkSummary(t *testing.T, name, summary string) {
	t.Helper()
	t.Logf("%s:\n%s", name, summary)
	got := summaryLine.FindString(summary)
	if got != wantSummary {
		t.Errorf("%s: got %q, want %q", name, got, wantSummary)
	}
}

func TestConformanceThroughMuxHTTP(t *testing.T) {
	entry := suiteEntry(t)
	bin := everythingServer(t)
	addr := freeAddr(t)
	up := exec.Command(bin, "-http", addr, "-stateless=false")
	if err := up.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = up.Process.Kill(); _ = up.Wait() })
	waitListening(t, addr)
	url := startMux(t, fmt.Sprintf(`{"type": "http", "url": "http://%s/mcp", "tool_name_prefix": false}`, addr))
	checkSummary(t, "http upstream", runSuite(t, entry, url))
}

// The stdio everything-server speaks both eras: with the default config
// (protocol_version auto) mcp-mux runs the legacy suite's call sessions on
// 2025-11-25, the suite's own era, where its sampling and elicitation
// tools' live requests work (go-sdk refuses them on a 2026-07-28 request;
// TestModernConformanceModernStdioUpstream runs the same server on
// 2026-07-28 for 2026-07-28 clients).
func TestConformanceThroughMuxStdio(t *testing.T) {
	entry := suiteEntry(t)
	bin := everythingServer(t)
	url := startMux(t, fmt.Sprintf(`{"type": "stdio", "command": %q, "tool_name_prefix": false}`, bin))
	checkSummary(t, "stdio upstream", runSuite(t, entry, url))
}

func waitListening(t *testing.T, addr string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("everything-server did not listen on %s", addr)
}

// runClientScenario runs one conformance client scenario with mcp-mux as
// the client (muxclient) and fails unless every check passed.
func runClientScenario(t *testing.T, scenario string, mustSay ...string) {
	t.Helper()
	entry := suiteEntry(t)
	bin := muxclientBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", entry, "client", "--command", bin, "--scenario", scenario)
	cmd.Dir = filepath.Dir(filepath.Dir(filepath.Dir(filepath.Dir(filepath.Dir(entry)))))
	out, _ := cmd.CombinedOutput()
	s := string(out)
	t.Logf("conformance client output:\n%s", tail(s, 3000))
	m := regexp.MustCompile(`Passed: (\d+)/(\d+), (\d+) failed`).FindStringSubmatch(s)
	if m == nil || m[1] != m[2] || m[3] != "0" || m[1] == "0" || !strings.Contains(s, "OVERALL: PASSED") {
		t.Fatalf("%s did not pass with mcp-mux as the client (summary %q)", scenario, m)
	}
	for _, want := range mustSay {
		if !strings.Contains(s, want) {
			t.Errorf("%s: output lacks %q", scenario, want)
		}
	}
	t.Logf("%s: %s", scenario, m[0])
}

var (
	muxclientOnce sync.Once
	muxclientBin  string
	muxclientErr  error
)

// muxclientBinary builds the muxclient driver once per test binary.
func muxclientBinary(t *testing.T) string {
	t.Helper()
	muxclientOnce.Do(func() {
		dir, err := os.MkdirTemp("", "muxclient")
		if err != nil {
			muxclientErr = err
			return
		}
		muxclientBin = filepath.Join(dir, "muxclient")
		if out, err := exec.Command("go", "build", "-o", muxclientBin, "github.com/mcp-mux/mcp-mux/internal/conformance/muxclient").CombinedOutput(); err != nil {
			muxclientErr = fmt.Errorf("building muxclient: %v\n%s", err, out)
		}
	})
	if muxclientErr != nil {
		t.Fatal(muxclientErr)
	}
	return muxclientBin
}

// TestClientScenariosAsClient runs the conformance client scenarios
// initialize, tools_call and sse-retry with mcp-mux as the client. In
// sse-retry the server ends the tool call's stream early with retry 500ms:
// the mux must resume it with GET + Last-Event-ID after that delay.
func TestClientScenariosAsClient(t *testing.T) {
	for _, sc := range []string{"initialize", "tools_call", "sse-retry"} {
		t.Run(sc, func(t *testing.T) { runClientScenario(t, sc) })
	}
}

// TestOAuthClientCredentialsAsClient runs the conformance client scenario
// auth/client-credentials-basic with mcp-mux as the client: the scenario
// gives only a client id and secret; mcp-mux discovers the token endpoint
// from the server's 401 and authenticates with client_secret_basic.
func TestOAuthClientCredentialsAsClient(t *testing.T) {
	runClientScenario(t, "auth/client-credentials-basic", "Client successfully authenticated with client_secret_basic")
}

func TestMain(m *testing.M) {
	code := m.Run()
	if muxclientBin != "" {
		_ = os.RemoveAll(filepath.Dir(muxclientBin))
	}
	os.Exit(code)
}
