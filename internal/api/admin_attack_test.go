package api_test

// Issue 17 attacks 2 and 3 against a running mux: admin writes that would
// run a command or hand a secret to a URL of the writer's choosing. The mux
// is a real proxy.Server that applies every accepted write, so an accepted
// attack really launches its stdio command and really connects.

import (
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
	"time"

	"github.com/mcp-mux/mcp-mux/internal/api"
	"github.com/mcp-mux/mcp-mux/internal/config"
	"github.com/mcp-mux/mcp-mux/internal/mcptest"
	"github.com/mcp-mux/mcp-mux/internal/proxy"
	"github.com/mcp-mux/mcp-mux/internal/secret"
)

const (
	liveToken  = "live-admin-s3cret"
	liveAPIKey = "stored-api-key-s3cret"
)

// recorder is an upstream that notes every header value it is sent.
type recorder struct {
	*httptest.Server
	mu   sync.Mutex
	seen []string
}

func newRecorder(t *testing.T) *recorder {
	r := &recorder{}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		for _, vs := range req.Header {
			r.seen = append(r.seen, vs...)
		}
		r.mu.Unlock()
		_, _ = io.Copy(io.Discard, req.Body)
		http.NotFound(w, req)
	}))
	t.Cleanup(r.Close)
	return r
}

// received reports whether any request carried s in a header.
func (r *recorder) received(s string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, v := range r.seen {
		if strings.Contains(v, s) {
			return true
		}
	}
	return false
}

func (r *recorder) requests() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.seen)
}

// liveAdmin is a running mux serving the admin API over its config file.
type liveAdmin struct {
	t    *testing.T
	srv  *proxy.Server
	path string
	url  string
}

// startLiveAdmin serves doc with a real proxy that applies every write
// (and waits for its discovery) before the write answers.
func startLiveAdmin(t *testing.T, doc string) *liveAdmin {
	t.Helper()
	path := filepath.Join(t.TempDir(), "extensions_config.json")
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"ADMIN_TOKEN": liveToken, "API_KEY": liveAPIKey, "REDIS_PASSWORD": "redis-s3cret"}
	load := config.LoadOptions{LookupEnv: func(k string) (string, bool) { v, ok := env[k]; return v, ok }}
	srv := proxy.New(proxy.Options{RetryMin: time.Minute})
	apply := func() error {
		cfg, err := config.Load(path, load)
		if err != nil {
			return err
		}
		if err := srv.Apply(cfg); err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		_ = srv.WaitDiscovery(ctx) // a failing upstream is retried later; its attempt has been made
		return nil
	}
	if err := apply(); err != nil {
		t.Fatal(err)
	}
	routes := http.NewServeMux()
	api.MountAdmin(routes, api.AdminOptions{
		Path: path, Load: load,
		Token:          func() secret.Value { return srv.Config().Admin.Token },
		Reload:         apply,
		ResetUpstreams: srv.ResetUpstreams,
	})
	ts := httptest.NewServer(routes)
	t.Cleanup(func() {
		ts.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Close(ctx)
	})
	return &liveAdmin{t: t, srv: srv, path: path, url: ts.URL}
}

func (l *liveAdmin) put(body string) (int, string) {
	l.t.Helper()
	return l.do(http.MethodPut, "/api/mcp/config", body)
}

// do sends an admin request and returns its status and detail (the whole
// body when it has none), checking that the response carries no secret.
func (l *liveAdmin) do(method, path, body string) (int, string) {
	l.t.Helper()
	req, _ := http.NewRequest(method, l.url+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+liveToken)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		l.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	for _, s := range []string{liveToken, liveAPIKey, "redis-s3cret"} {
		if strings.Contains(string(b), s) {
			l.t.Errorf("response carries a secret: %s", b)
		}
	}
	var d struct{ Detail string }
	if json.Unmarshal(b, &d) != nil || d.Detail == "" {
		return res.StatusCode, string(b)
	}
	return res.StatusCode, d.Detail
}

func (l *liveAdmin) file() string {
	l.t.Helper()
	b, err := os.ReadFile(l.path)
	if err != nil {
		l.t.Fatal(err)
	}
	return string(b)
}

// refused checks that a write answered 400 with want in its detail and
// left the file as it was.
func (l *liveAdmin) refused(body, want string) {
	l.t.Helper()
	before := l.file()
	code, d := l.put(body)
	if code != http.StatusBadRequest || !strings.Contains(d, want) {
		l.t.Errorf("PUT answered %d %q, want 400 naming %q", code, d, want)
	}
	if l.file() != before {
		l.t.Errorf("a refused write changed the file:\n%s", l.file())
	}
}

func stdioBody(name string, args []string, env map[string]string) string {
	b, _ := json.Marshal(map[string]any{"mcp_servers": map[string]any{
		name: map[string]any{"type": "stdio", "command": "npx", "args": args, "env": env},
	}})
	return string(b)
}

const liveDoc = `{"mcpServers": {}, "admin": {"token": "$ADMIN_TOKEN"}}`

// TestAdminAttackShellThroughNpx: npx runs sh from its global path, so the
// argument after the launcher's options is screened (issue 17 attack 2).
func TestAdminAttackShellThroughNpx(t *testing.T) {
	l := startLiveAdmin(t, liveDoc)
	marker := filepath.Join(t.TempDir(), "ran")
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"sh", "-c", "touch " + marker}, "would run 'sh' through 'npx' (args[0])"},
		{[]string{"-y", "bash", "-c", "touch " + marker}, "would run 'bash' through 'npx' (args[1])"},
		{[]string{"--yes", "--", "sh", "-c", "touch " + marker}, "would run 'sh' through 'npx' (args[2])"},
		{[]string{"-p", "left-pad", "sh", "-c", "touch " + marker}, "would run 'sh' through 'npx' (args[2])"},
		{[]string{"--call", "touch " + marker}, "passes '--call' (args[0]) to 'npx', which runs shell text"},
		{[]string{"--ignore-existing", "-q", "env", "sh", "-c", "touch " + marker}, "would run 'env' through 'npx' (args[2])"},
		{[]string{"-y", "node@20", "-e", "require('fs').writeFileSync('" + marker + "','')"}, "would run 'node' through 'npx' (args[1])"},
		{[]string{"-y", "npm", "exec", "--", "sh", "-c", "touch " + marker}, "would run 'npm' through 'npx' (args[1])"},
		{[]string{"--unknown", "sh", "-c", "touch " + marker}, "passes option '--unknown' (args[0])"},
		{[]string{"touch", marker}, "names 'touch' (args[0]), a program on the mux's PATH"},
	} {
		l.refused(stdioBody("evil", tt.args, nil), "MCP server 'evil' "+tt.want)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("an attack write ran its command")
	}
}

// TestAdminAttackCodeLoadingEnv: npm reads its config from npm_config_* in
// any case, node from NODE_OPTIONS in any spelling; every key that makes a
// runtime load code or run something else is refused (issue 17 attack 2).
func TestAdminAttackCodeLoadingEnv(t *testing.T) {
	l := startLiveAdmin(t, liveDoc)
	marker := filepath.Join(t.TempDir(), "ran")
	load := `--import=data:text/javascript,import%7BwriteFileSync%7Dfrom%22fs%22%3BwriteFileSync(%22` + marker + `%22,%22x%22)`
	for _, key := range []string{
		"npm_config_node_options", "NPM_CONFIG_NODE_OPTIONS", "Npm_Config_Script_Shell",
		"NODE_OPTIONS", "node_options", "Node_Options", "NODE_OPTIONS=" + load,
		"LD_PRELOAD", "ld_library_path", "LD_AUDIT", "DYLD_INSERT_LIBRARIES", "PYTHONSTARTUP", "pythonpath",
		"PERL5OPT", "RUBYOPT", "JAVA_TOOL_OPTIONS", "BASH_ENV", "ENV", "PATH", "GIT_SSH_COMMAND",
		"UV_INDEX_URL", "PIP_INDEX_URL", "BASH_FUNC_npx%%",
	} {
		l.refused(stdioBody("evil", []string{"-y", "@modelcontextprotocol/server-everything"}, map[string]string{key: load}),
			fmt.Sprintf("MCP server 'evil' sets environment variable '%s'", key))
	}
	// The attack as reported: npm runs itself with node-options from its env.
	l.refused(stdioBody("evil", []string{"-y", "npm", "--version"}, map[string]string{"npm_config_node_options": load}),
		"MCP server 'evil' would run 'npm' through 'npx' (args[1])")
	if _, err := os.Stat(marker); err == nil {
		t.Error("an attack write ran its code")
	}
}

// TestAdminAttackMuxSecretVar: a "$VAR" in a written header that the file's
// servers do not use is refused, so the admin token, an inbound key or the
// Redis password never reach the writer's URL (issue 17 attack 3).
func TestAdminAttackMuxSecretVar(t *testing.T) {
	rec := newRecorder(t)
	l := startLiveAdmin(t, `{"mcpServers": {}, "admin": {"token": "$ADMIN_TOKEN"},
	  "inbound": {"auth": {"mode": "api_keys", "keys": {"alice": "$API_KEY"}}}}`)
	for _, v := range []string{"ADMIN_TOKEN", "API_KEY", "REDIS_PASSWORD"} {
		body := fmt.Sprintf(`{"mcp_servers": {"leak": {"type": "http", "url": %q, "headers": {"X-Leak": "$%s"}}}}`, rec.URL+"/mcp", v)
		l.refused(body, fmt.Sprintf("MCP server 'leak' refers to environment variable '%s' at headers.X-Leak", v))
	}
	if rec.received(liveToken) || rec.received(liveAPIKey) || rec.received("redis-s3cret") || rec.requests() != 0 {
		t.Error("the writer's upstream received a secret")
	}
}

// TestAdminAttackRepointMasked: a masked "***" stays bound to the url it
// was stored for (issue 17 attack 3).
func TestAdminAttackRepointMasked(t *testing.T) {
	good := mcptest.ServeHTTP(t, mcptest.NewServer("good"))
	rec := newRecorder(t)
	l := startLiveAdmin(t, fmt.Sprintf(`{"mcpServers": {"gh": {"type": "http", "url": %q, "headers": {"X-API-Key": "$API_KEY"}}},
	  "admin": {"token": "$ADMIN_TOKEN"}}`, good.URL+"/mcp"))
	l.refused(fmt.Sprintf(`{"mcp_servers": {"gh": {"type": "http", "url": %q, "headers": {"X-API-Key": "***"}}}}`, rec.URL+"/mcp"),
		"MCP server 'gh' changes url while keeping the stored value of headers.X-API-Key")
	if rec.received(liveAPIKey) || rec.requests() != 0 {
		t.Error("the new url received the stored key")
	}
	// Re-entered in clear, the new destination is the writer's to choose.
	if code, d := l.put(fmt.Sprintf(`{"mcp_servers": {"gh": {"type": "http", "url": %q, "headers": {"X-API-Key": "typed-in-key"}}}}`, rec.URL+"/mcp")); code != http.StatusOK {
		t.Fatalf("re-entered key: %d %s", code, d)
	}
	if !rec.received("typed-in-key") || rec.received(liveAPIKey) {
		t.Error("the new url did not get the re-entered key, or got the stored one")
	}
}

// TestAdminLiveWritesStillWork: an ordinary package write, and a "$VAR" a
// server already uses, are accepted and applied.
func TestAdminLiveWritesStillWork(t *testing.T) {
	good := mcptest.ServeHTTP(t, mcptest.NewServer("good"))
	l := startLiveAdmin(t, fmt.Sprintf(`{"mcpServers": {"gh": {"type": "http", "url": %q, "headers": {"X-API-Key": "$API_KEY"}}},
	  "admin": {"token": "$ADMIN_TOKEN"}}`, good.URL+"/mcp"))
	body := fmt.Sprintf(`{"mcp_servers": {
	  "gh": {"type": "http", "url": %q, "headers": {"X-API-Key": "***"}},
	  "gh2": {"type": "http", "url": %q, "headers": {"X-API-Key": "$API_KEY"}},
	  "pkg": {"type": "stdio", "command": "npx", "args": ["-y", "@scope/pkg"], "env": {"PYTHONUNBUFFERED": "1"}, "enabled": false}}}`,
		good.URL+"/mcp", good.URL+"/mcp")
	if code, d := l.put(body); code != http.StatusOK {
		t.Fatalf("PUT: %d %s", code, d)
	}
	if f := l.file(); !strings.Contains(f, `"gh2"`) || !strings.Contains(f, `"@scope/pkg"`) || strings.Contains(f, liveAPIKey) {
		t.Errorf("file after PUT:\n%s", f)
	}
}

// serverState is the running mux's state of one server ("" when it has none).
func (l *liveAdmin) serverState(name string) string {
	for _, s := range l.srv.Status().Servers {
		if s.Name == name {
			return s.State
		}
	}
	return ""
}

// TestAdminUnchangedServersNotRescreened: stdio servers the file runs that
// the launch policy would refuse from the API (an absolute command path,
// an interpreter) do not block a PUT of GET's own output or an enable,
// since neither changes how they start; adding or changing one still goes
// through the policy (issue 19).
func TestAdminUnchangedServersNotRescreened(t *testing.T) {
	exe, args, env := mcptest.StdioServer(fmt.Sprintf("unchanged-%d", os.Getpid()), mcptest.StdioOptions{})
	doc, _ := json.Marshal(map[string]any{
		"mcpServers": map[string]any{
			"local": map[string]any{"type": "stdio", "command": exe, "args": args, "env": env, "enabled": false},
			"py":    map[string]any{"type": "stdio", "command": "python", "args": []string{"-m", "my_server"}, "enabled": false},
		},
		"admin": map[string]any{"token": "$ADMIN_TOKEN"},
	})
	l := startLiveAdmin(t, string(doc))
	code, got := l.do(http.MethodGet, "/api/mcp/config", "")
	if code != http.StatusOK {
		t.Fatalf("GET: %d %s", code, got)
	}
	if code, d := l.put(got); code != http.StatusOK {
		t.Fatalf("PUT of GET's output: %d %s", code, d)
	}
	// Enabling what the file already runs, through PUT and through POST.
	if code, d := l.put(strings.Replace(got, `"enabled":false`, `"enabled":true`, 1)); code != http.StatusOK {
		t.Fatalf("PUT enabling local: %d %s", code, d)
	}
	if s := l.serverState("local"); s != "up" {
		t.Errorf("local after it was enabled: %q, want up", s)
	}
	if code, d := l.do(http.MethodPost, "/api/extensions/mcp/py/enable", ""); code != http.StatusOK {
		t.Fatalf("enable py: %d %s", code, d)
	}
	code, got = l.do(http.MethodGet, "/api/mcp/config", "")
	if code != http.StatusOK || strings.Contains(got, `"enabled":false`) {
		t.Fatalf("GET after enabling both: %d %s", code, got)
	}

	// What a write adds or changes is screened as before.
	var cur struct {
		Servers map[string]map[string]any `json:"mcp_servers"`
	}
	if err := json.Unmarshal([]byte(got), &cur); err != nil {
		t.Fatal(err)
	}
	with := func(name string, edit func(s map[string]any)) string {
		servers := map[string]any{}
		for n, s := range cur.Servers {
			c := map[string]any{}
			for k, v := range s {
				c[k] = v
			}
			servers[n] = c
		}
		if servers[name] == nil {
			servers[name] = map[string]any{"type": "stdio"}
		}
		edit(servers[name].(map[string]any))
		b, _ := json.Marshal(map[string]any{"mcp_servers": servers})
		return string(b)
	}
	notPath := "command must be a bare executable name on the allowlist, not a path"
	l.refused(with("added", func(s map[string]any) { s["command"] = exe }), "MCP server 'added' "+notPath)
	l.refused(with("added", func(s map[string]any) { s["command"] = "python"; s["args"] = []string{"-m", "x"} }),
		"MCP server 'added' uses disallowed stdio command 'python'")
	l.refused(with("py", func(s map[string]any) { s["command"] = "/usr/bin/python3" }), "MCP server 'py' "+notPath)
	l.refused(with("py", func(s map[string]any) { s["args"] = []string{"-c", "print(1)"} }), "MCP server 'py' uses disallowed stdio command 'python'")
	l.refused(with("local", func(s map[string]any) { s["args"] = []string{"-test.run=^$", "-test.v"}; s["env"] = env }), "MCP server 'local' "+notPath)
	l.refused(with("local", func(s map[string]any) { s["env"] = map[string]any{"NODE_OPTIONS": "--require=x"} }), "MCP server 'local' "+notPath)
}
