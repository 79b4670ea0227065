package api

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/mcp-mux/mcp-mux/internal/config"
	"github.com/mcp-mux/mcp-mux/internal/mcptest"
	"github.com/mcp-mux/mcp-mux/internal/secret"
)

const adminToken = "adm-s3cret-token"

var adminEnv = map[string]string{"ADMIN_TOKEN": adminToken, "GH_TOKEN": "gh-expanded-secret", "FS_KEY": "fs-expanded-secret"}

// adminDoc keeps secrets both as $VAR placeholders and literally.
const adminDoc = `{
  "mcpServers": {
    "gh": {"type": "http", "url": "https://gh.example/mcp",
           "headers": {"Authorization": "$GH_TOKEN", "X-Literal": "lit-header-secret"},
           "oauth": {"enabled": true, "token_url": "https://gh.example/token", "client_id": "mux", "client_secret": "lit-client-secret"}},
    "fs": {"type": "stdio", "command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem"], "env": {"FS_KEY": "$FS_KEY", "OTHER": "lit-env-secret"}}
  },
  "admin": {"token": "$ADMIN_TOKEN"},
  "skills": {"keep": true}
}`

// secrets must never appear in a response.
var secrets = []string{adminToken, "gh-expanded-secret", "fs-expanded-secret", "lit-header-secret", "lit-client-secret", "lit-env-secret"}

type adminFixture struct {
	t    *testing.T
	path string
	url  string

	mu          sync.Mutex
	running     *config.Config
	reloads     int
	resets      int
	disconnects []string
}

func lookup(k string) (string, bool) { v, ok := adminEnv[k]; return v, ok }

// startAdmin serves the admin API for a config file at path (written with
// doc unless it exists).
func startAdmin(t *testing.T, path, doc string) *adminFixture {
	t.Helper()
	if _, err := os.Lstat(path); err != nil {
		if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	f := &adminFixture{t: t, path: path}
	load := config.LoadOptions{LookupEnv: lookup}
	cfg, err := config.Load(path, load)
	if err != nil {
		t.Fatal(err)
	}
	f.running = cfg
	mux := http.NewServeMux()
	MountAdmin(mux, AdminOptions{
		Path: path, Load: load,
		Token: func() secret.Value { f.mu.Lock(); defer f.mu.Unlock(); return f.running.Admin.Token },
		Reload: func() error {
			cfg, err := config.Load(path, load)
			if err != nil {
				return err
			}
			f.mu.Lock()
			f.running, f.reloads = cfg, f.reloads+1
			f.mu.Unlock()
			return nil
		},
		ResetUpstreams: func() { f.mu.Lock(); f.resets++; f.mu.Unlock() },
		Disconnect: func(_ context.Context, user, server string) (bool, error) {
			f.mu.Lock()
			defer f.mu.Unlock()
			if server == "plain" {
				return false, fmt.Errorf("%w: plain", ErrNoAccountServer)
			}
			f.disconnects = append(f.disconnects, user+"@"+server)
			return server == "gh", nil
		},
	})
	ts := httptest.NewServer(mux)
	t.Cleanup(ts.Close)
	f.url = ts.URL
	return f
}

// do sends a request with the admin token (token "" sends none) and checks
// that the response carries no secret.
func (f *adminFixture) do(method, path, token, body string) (int, string) {
	f.t.Helper()
	req, err := http.NewRequest(method, f.url+path, strings.NewReader(body))
	if err != nil {
		f.t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	for _, s := range secrets {
		if strings.Contains(string(b), s) {
			f.t.Errorf("%s %s: response contains secret %q: %s", method, path, s, b)
		}
	}
	return res.StatusCode, string(b)
}

func (f *adminFixture) file() string {
	f.t.Helper()
	b, err := os.ReadFile(f.path)
	if err != nil {
		f.t.Fatal(err)
	}
	return string(b)
}

func detail(t *testing.T, body string) string {
	t.Helper()
	var d struct{ Detail string }
	if err := json.Unmarshal([]byte(body), &d); err != nil {
		t.Fatalf("not a detail body: %s", body)
	}
	return d.Detail
}

func TestAdminDisabledWithoutToken(t *testing.T) {
	f := startAdmin(t, filepath.Join(t.TempDir(), "c.json"), `{"mcpServers": {}}`)
	for _, r := range AdminRoutes {
		method, path, _ := strings.Cut(r, " ")
		path = strings.Replace(strings.Replace(path, "{name}", "x", 1), "{server}", "x", 1)
		if code, _ := f.do(method, path, "anything", "{}"); code != http.StatusNotFound {
			t.Errorf("%s = %d, want 404 without admin.token", r, code)
		}
	}
}

func TestAdminAuth(t *testing.T) {
	f := startAdmin(t, filepath.Join(t.TempDir(), "c.json"), adminDoc)
	for _, tok := range []string{"", "wrong"} {
		code, body := f.do("GET", "/api/mcp/config", tok, "")
		if code != http.StatusUnauthorized || detail(t, body) != "Admin privileges required to manage MCP configuration." {
			t.Errorf("token %q: %d %s", tok, code, body)
		}
	}
	if code, _ := f.do("GET", "/api/mcp/config", adminToken, ""); code != http.StatusOK {
		t.Errorf("admin token: %d", code)
	}
}

func TestAdminGetAndRoundTrip(t *testing.T) {
	f := startAdmin(t, filepath.Join(t.TempDir(), "c.json"), adminDoc)
	code, got := f.do("GET", "/api/mcp/config", adminToken, "")
	if code != http.StatusOK {
		t.Fatalf("GET: %d %s", code, got)
	}
	var shape struct {
		Servers map[string]map[string]any `json:"mcp_servers"`
	}
	if err := json.Unmarshal([]byte(got), &shape); err != nil {
		t.Fatal(err)
	}
	if h := shape.Servers["gh"]["headers"].(map[string]any); h["Authorization"] != "***" || h["X-Literal"] != "***" {
		t.Errorf("headers = %v", h)
	}
	if o := shape.Servers["gh"]["oauth"].(map[string]any); o["client_secret"] != nil {
		t.Errorf("oauth = %v", o)
	}

	code, put := f.do("PUT", "/api/mcp/config", adminToken, got)
	if code != http.StatusOK {
		t.Fatalf("PUT of GET's body: %d %s", code, put)
	}
	if put != got {
		t.Errorf("PUT answered\n%s\nGET had\n%s", put, got)
	}
	file := f.file()
	for _, want := range []string{`"$GH_TOKEN"`, `"$FS_KEY"`, `"$ADMIN_TOKEN"`, "lit-client-secret", "lit-env-secret", `"skills"`} {
		if !strings.Contains(file, want) {
			t.Errorf("file lost %s:\n%s", want, file)
		}
	}
	for _, s := range []string{"gh-expanded-secret", "fs-expanded-secret", adminToken, "***"} {
		if strings.Contains(file, s) {
			t.Errorf("file holds %q:\n%s", s, file)
		}
	}
	if f.reloads != 1 {
		t.Errorf("reloads = %d, want 1", f.reloads)
	}
}

func TestAdminPutRejects(t *testing.T) {
	f := startAdmin(t, filepath.Join(t.TempDir(), "c.json"), adminDoc)
	before := f.file()
	tests := []struct{ name, body, want string }{
		{"masked new env key", `{"mcp_servers": {"fs": {"type": "stdio", "command": "npx", "env": {"NEW": "***"}}}}`,
			"Cannot set env key 'NEW' to masked value '***'; provide a real value."},
		{"invalid server", `{"mcp_servers": {"gh": {"type": "http"}}}`,
			"Invalid MCP configuration: gh: url: "},
		{"invalid top level", `{"mcp_servers": "x"}`, "Invalid request body: mcp_servers must be an object"},
		{"disallowed command", `{"mcp_servers": {"sh": {"type": "stdio", "command": "bash", "args": ["x"]}}}`,
			"MCP server 'sh' uses disallowed stdio command 'bash'. Allowed commands: npx, uvx. Configure MCP_MUX_STDIO_COMMAND_ALLOWLIST to extend this list."},
		{"path command", `{"mcp_servers": {"sh": {"type": "stdio", "command": "/bin/npx"}}}`,
			"MCP server 'sh' command must be a bare executable name on the allowlist, not a path. Allowed commands: npx, uvx."},
		{"spaced command", `{"mcp_servers": {"sh": {"type": "stdio", "command": "npx -y pkg"}}}`,
			"MCP server 'sh' command must be a bare executable name on the allowlist, without spaces or shell syntax; put parameters in args instead."},
		{"exec flag", `{"mcp_servers": {"n": {"type": "stdio", "command": "npx", "args": ["-c", "rm -rf /"]}}}`,
			"MCP server 'n' passes '-c' (args[0]) to 'npx', which runs shell text."},
		{"denied env", `{"mcp_servers": {"n": {"type": "stdio", "command": "uvx", "args": ["pkg"], "env": {"ld_preload": "/x.so"}}}}`,
			"MCP server 'n' sets environment variable 'ld_preload', which makes a runtime, shell or launcher load code or run something else; set it in the config file instead."},
		{"not JSON", `{`, "Invalid request body: "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, body := f.do("PUT", "/api/mcp/config", adminToken, tt.body)
			if code != http.StatusBadRequest || !strings.HasPrefix(detail(t, body), tt.want) {
				t.Errorf("%d %s, want 400 %q", code, body, tt.want)
			}
		})
	}
	if f.file() != before || f.reloads != 0 {
		t.Errorf("a rejected PUT changed the file or reloaded (%d)", f.reloads)
	}
	big := `{"mcp_servers": {"x": {"description": "` + strings.Repeat("a", maxAdminBody) + `"}}}`
	if code, _ := f.do("PUT", "/api/mcp/config", adminToken, big); code != http.StatusRequestEntityTooLarge {
		t.Errorf("oversized body: %d", code)
	}
}

func TestAdminLaunchPolicyArgs(t *testing.T) {
	p := newLaunchPolicy([]string{"node", "pnpm", "deno", "pipx"})
	p.lookPath = func(name string) (string, error) {
		if name == "touch" {
			return "/usr/bin/touch", nil
		}
		return "", os.ErrNotExist
	}
	for _, tt := range []struct {
		cmd  string
		args []string
		want string // "" accepted, else a fragment of the error
	}{
		{"npx", []string{"-y", "pkg", "-c", "x"}, ""},   // after the package: the server's own args
		{"npx", []string{"--package", "-c", "pkg"}, ""}, // --package's value
		{"npx", []string{"-y", "@modelcontextprotocol/server-filesystem", "/tmp"}, ""},
		{"npx", []string{"--node-options=--require=x", "pkg"}, "'--node-options' (args[0])"},
		{"npx", []string{"--NODE-OPTIONS", "x", "pkg"}, "'--NODE-OPTIONS' (args[0])"}, // long flags ignore case
		{"npx", []string{"--registry=https://evil", "pkg"}, "redirects"},
		{"npx", []string{"-y"}, "no package"},
		{"npx", []string{"./server.js"}, "local path"},
		{"npx", []string{"touch", "x"}, "on the mux's PATH"},
		{"npx", []string{"touch@latest", "x"}, ""},
		{"npx", []string{"-y", "tsx", "-e", "x"}, "would run 'tsx'"},
		{"uvx", []string{"-c", "constraints.txt", "pkg"}, ""}, // uvx's -c is --constraints
		{"uvx", []string{"mcp-server-fetch==1.0"}, ""},
		{"uvx", []string{"--from", "x", "--shell", "pkg"}, "option '--shell' (args[2])"},
		{"uvx", []string{"--from", "x", "python", "-c", "x"}, "would run 'python' through 'uvx' (args[2])"},
		{"uvx", []string{"python3.12"}, "would run 'python3.12'"},
		{"uvx", []string{"--from", "/tmp/evil", "x"}, "local path"},
		{"uvx", []string{"--python", "/bin/sh", "pkg"}, "interpreter path"},
		{"uvx", []string{"--index-url", "https://evil/simple", "pkg"}, "redirects"},
		{"pnpm", []string{"dlx", "@scope/pkg"}, ""},
		{"pnpm", []string{"run", "x"}, "without 'dlx' first"},
		{"pnpm", []string{"dlx", "--shell-mode", "x"}, "runs shell text"},
		{"pipx", []string{"run", "--spec", "bash", "x"}, "would run 'bash'"},
		{"deno", []string{"run", "--allow-net", "npm:@scope/pkg"}, ""},
		{"deno", []string{"run", "-A", "npm:node"}, "would run 'node'"},
		{"deno", []string{"eval", "x"}, "without 'run' first"},
		{"node", []string{"server.js", "-pe", "x"}, "'-p' (args[1])"}, // clusters, and -p, for non-launchers
		{"node", []string{"--inspect", "s.js"}, ""},
	} {
		err := p.check(&config.Server{Name: "s", Type: config.TypeStdio, Command: tt.cmd, Args: tt.args})
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%s %v: %v, want accepted", tt.cmd, tt.args, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%s %v: %v, want an error with %q", tt.cmd, tt.args, err, tt.want)
		}
	}
}

func TestAdminLaunchPolicyEnv(t *testing.T) {
	for key, denied := range map[string]bool{
		"NODE_OPTIONS": true, "node_options": true, "npm_config_registry": true, "LD_LIBRARY_PATH": true, "PYTHONHOME": true,
		"PERL5LIB": true, "_JAVA_OPTIONS": true, "Path": true, "GIT_CONFIG_COUNT": true, "UV_PYTHON": true, "A=B": true, "": true,
		"NODE_ENV": false, "PYTHONUNBUFFERED": false, "GITHUB_TOKEN": false, "DEBUG": false, "API_KEY": false,
	} {
		if got := deniedEnvKey(key) != ""; got != denied {
			t.Errorf("deniedEnvKey(%q) refused = %v, want %v", key, got, denied)
		}
	}
}

func FuzzLaunchPolicy(f *testing.F) {
	for _, seed := range [][]string{{"npx", "-y", "pkg"}, {"npx", "--", "sh", "-c", "x"}, {"uvx", "--from", "x", "python"}, {"pnpm", "dlx", "-s", "x"}} {
		f.Add(strings.Join(seed, "\x00"))
	}
	p := newLaunchPolicy([]string{"pnpm", "bunx", "deno", "yarn", "pipx"})
	p.lookPath = func(string) (string, error) { return "", os.ErrNotExist }
	f.Fuzz(func(t *testing.T, line string) {
		argv := strings.Split(line, "\x00")
		s := &config.Server{Name: "f", Type: config.TypeStdio, Command: argv[0], Args: argv[1:]}
		if p.check(s) != nil || launchers[s.Command] == nil {
			return
		}
		// Accepted: no argument a launcher may run is a denied program.
		for i, a := range s.Args {
			if deniedPrograms[a] && (i == 0 || s.Args[i-1] == "--") {
				t.Fatalf("accepted %q running %q", argv, a)
			}
			if !strings.HasPrefix(a, "-") && i > 0 && !strings.HasPrefix(s.Args[i-1], "-") {
				break // past the package
			}
		}
	})
}

func TestAdminPatchEnableDisable(t *testing.T) {
	f := startAdmin(t, filepath.Join(t.TempDir(), "c.json"), strings.Replace(adminDoc, `"mcpServers": {`,
		`"mcpServers": {"shell": {"type": "stdio", "command": "bash", "enabled": false},`, 1))
	code, body := f.do("PATCH", "/api/mcp/config", adminToken, `{"server_name": "fs", "enabled": false}`)
	if code != http.StatusOK {
		t.Fatalf("PATCH: %d %s", code, body)
	}
	if s := f.running.Server("fs"); s == nil || s.Enabled {
		t.Errorf("fs after PATCH: %+v", s)
	}
	if !strings.Contains(f.file(), "lit-env-secret") {
		t.Error("PATCH changed more than enabled")
	}
	if code, body := f.do("POST", "/api/extensions/mcp/fs/enable", adminToken, ""); code != http.StatusOK || !f.running.Server("fs").Enabled {
		t.Errorf("enable: %d %s", code, body)
	}
	code, body = f.do("POST", "/api/extensions/mcp/nope/disable", adminToken, "")
	if code != http.StatusNotFound || detail(t, body) != "MCP server 'nope' not found" {
		t.Errorf("missing server: %d %s", code, body)
	}
	// The file may run bash; enabling it through the API launches only what
	// the file says, so it is not screened again (issue 19).
	code, body = f.do("POST", "/api/extensions/mcp/shell/enable", adminToken, "")
	if code != http.StatusOK || !f.running.Server("shell").Enabled {
		t.Errorf("enable bash: %d %s", code, body)
	}
	if code, _ := f.do("POST", "/api/extensions/mcp/shell/disable", adminToken, ""); code != http.StatusOK {
		t.Errorf("disabling is never screened: %d", code)
	}
	if code, _ := f.do("PATCH", "/api/mcp/config", adminToken, `{"server_name": "fs"}`); code != http.StatusBadRequest {
		t.Errorf("PATCH without enabled: %d", code)
	}
}

func TestAdminReadOnlyConfigMap(t *testing.T) {
	cm := mcptest.NewConfigMap(t, "extensions_config.json", adminDoc)
	f := startAdmin(t, cm.Path, "")
	if code, _ := f.do("GET", "/api/mcp/config", adminToken, ""); code != http.StatusOK {
		t.Errorf("GET: %d", code)
	}
	for _, req := range []struct{ method, path, body string }{
		{"PUT", "/api/mcp/config", `{"mcp_servers": {}}`},
		{"PATCH", "/api/mcp/config", `{"server_name": "fs", "enabled": false}`},
		{"POST", "/api/extensions/mcp/fs/disable", ""},
	} {
		code, body := f.do(req.method, req.path, adminToken, req.body)
		if code != http.StatusConflict || !strings.Contains(detail(t, body), "read-only") || !strings.Contains(detail(t, body), "ConfigMap") {
			t.Errorf("%s %s: %d %s", req.method, req.path, code, body)
		}
	}
	if got, _ := os.ReadFile(cm.Path); !bytes.Equal(got, []byte(adminDoc)) {
		t.Error("the ConfigMap file changed")
	}
}

func TestAdminCacheReset(t *testing.T) {
	f := startAdmin(t, filepath.Join(t.TempDir(), "c.json"), adminDoc)
	code, body := f.do("POST", "/api/mcp/cache/reset", adminToken, "")
	if code != http.StatusOK || body != `{"message":"MCP tools cache reset. Tools will reload on next use.","success":true}`+"\n" || f.resets != 1 {
		t.Errorf("reset: %d %s (resets %d)", code, body, f.resets)
	}
}

// TestAdminDisconnect: the admin forgets a user's connected account on a
// server with the admin token; the user is required and bounded.
func TestAdminDisconnect(t *testing.T) {
	f := startAdmin(t, filepath.Join(t.TempDir(), "c.json"), adminDoc)
	if code, body := f.do("DELETE", "/api/accounts/gh?user=alice", "", ""); code != http.StatusUnauthorized {
		t.Fatalf("without the token: %d %s", code, body)
	}
	if code, body := f.do("DELETE", "/api/accounts/gh?user=alice", adminToken, ""); code != http.StatusOK || !strings.Contains(body, `"disconnected":true`) {
		t.Fatalf("disconnect: %d %s", code, body)
	}
	if code, body := f.do("DELETE", "/api/accounts/plain?user=alice", adminToken, ""); code != http.StatusNotFound {
		t.Fatalf("a server that connects no accounts: %d %s, want 404", code, body)
	}
	for _, q := range []string{"", "?user=", "?user=" + strings.Repeat("u", 257)} {
		if code, _ := f.do("DELETE", "/api/accounts/gh"+q, adminToken, ""); code != http.StatusBadRequest {
			t.Errorf("user %q: %d, want 400", q, code)
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.disconnects) != 1 || f.disconnects[0] != "alice@gh" {
		t.Fatalf("disconnects %q", f.disconnects)
	}
}

// TestAdminShowsTokenExchange: GET shows a token exchange's endpoint and
// settings as written (an operator confirms which endpoint is live) with
// only its client_secret masked, and a PUT of GET's body writes the file
// unchanged.
func TestAdminShowsTokenExchange(t *testing.T) {
	doc := `{
  "mcpServers": {
    "tx": {"type": "http", "url": "https://svc.example/mcp",
           "token_exchange": {"token_url": "https://idp.example/token", "client_id": "mux", "client_secret": "lit-client-secret",
                              "audience": "api://svc", "scope": "mcp.read", "auth_style": "basic", "subject_header": "X-User-Token"}}
  },
  "admin": {"token": "$ADMIN_TOKEN"}
}`
	f := startAdmin(t, filepath.Join(t.TempDir(), "c.json"), doc)
	before := f.file()
	code, got := f.do("GET", "/api/mcp/config", adminToken, "")
	if code != http.StatusOK {
		t.Fatalf("GET: %d %s", code, got)
	}
	var shape struct {
		Servers map[string]struct {
			TokenExchange map[string]any `json:"token_exchange"`
		} `json:"mcp_servers"`
	}
	if err := json.Unmarshal([]byte(got), &shape); err != nil {
		t.Fatalf("%v: %s", err, got)
	}
	tx := shape.Servers["tx"].TokenExchange
	for k, want := range map[string]string{"token_url": "https://idp.example/token", "client_id": "mux", "audience": "api://svc",
		"scope": "mcp.read", "auth_style": "basic", "subject_header": "X-User-Token", "client_secret": "***"} {
		if tx[k] != want {
			t.Errorf("token_exchange.%s = %v, want %q", k, tx[k], want)
		}
	}
	if code, put := f.do("PUT", "/api/mcp/config", adminToken, got); code != http.StatusOK || put != got {
		t.Fatalf("PUT of GET's body: %d\n%s\nGET had\n%s", code, put, got)
	}
	var a, b any
	_ = json.Unmarshal([]byte(before), &a)
	_ = json.Unmarshal([]byte(f.file()), &b)
	if ja, jb := fmt.Sprint(a), fmt.Sprint(b); ja != jb {
		t.Errorf("the round trip changed the file:\n%s\n%s", before, f.file())
	}
}
