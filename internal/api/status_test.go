package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/mcp-mux/mcp-mux/internal/api"
	"github.com/mcp-mux/mcp-mux/internal/audit"
	"github.com/mcp-mux/mcp-mux/internal/config"
	"github.com/mcp-mux/mcp-mux/internal/mcptest"
	"github.com/mcp-mux/mcp-mux/internal/proxy"
	"github.com/mcp-mux/mcp-mux/internal/status"
	"github.com/mcp-mux/mcp-mux/internal/taskpoll"
)

func TestMain(m *testing.M) {
	mcptest.MaybeServeStdio()
	goleak.VerifyTestMain(m)
}

// statusMux is a running mux with the status routes mounted as cmd/mcp-mux
// mounts them.
type statusMux struct {
	srv *proxy.Server
	ts  *httptest.Server
}

// startStatusMux runs a mux with five servers, one in each state a page
// shows: up over HTTP, up over stdio, retrying (nothing listens), disabled,
// and an invalid entry.
func startStatusMux(t *testing.T, o api.StatusOptions) *statusMux {
	t.Helper()
	return startStatusMuxWith(t, o, statusExtras{})
}

// statusExtras change startStatusMux's mux: more config, and a wrapper
// around its routes.
type statusExtras struct {
	edit  func(doc, servers map[string]any)
	wrap  func(http.Handler) http.Handler
	audit *audit.Auditor
}

func startStatusMuxWith(t *testing.T, o api.StatusOptions, x statusExtras) *statusMux {
	t.Helper()
	web := mcptest.ServeHTTP(t, mcptest.NewServer("web"))
	dead := httptest.NewServer(http.NotFoundHandler())
	deadURL := dead.URL + "/mcp"
	dead.Close()
	command, args, env := mcptest.StdioServer(fmt.Sprintf("status-%d", os.Getpid()), mcptest.StdioOptions{})
	servers := map[string]any{
		"web":    map[string]any{"type": "http", "url": web.URL + "/mcp"},
		"local":  map[string]any{"type": "stdio", "command": command, "args": args, "env": env},
		"down":   map[string]any{"type": "http", "url": deadURL, "session_init_timeout": 5},
		"off":    map[string]any{"type": "http", "url": web.URL + "/mcp", "enabled": false},
		"broken": map[string]any{"type": "stdio"},
	}
	doc := map[string]any{"mcpServers": servers}
	if x.edit != nil {
		x.edit(doc, servers)
	}
	cfgJSON, _ := json.Marshal(doc)
	cfg, err := config.Parse(cfgJSON, config.LoadOptions{Filename: "extensions_config.json"})
	if err != nil {
		t.Fatal(err)
	}
	srv := proxy.New(proxy.Options{Version: "v1.2.3-status", RetryMin: time.Minute, Audit: x.audit})
	if err := srv.Apply(cfg); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := srv.WaitDiscovery(ctx); err != nil {
		t.Fatal(err)
	}
	o.Source = srv
	routes := http.NewServeMux()
	api.MountStatus(routes, o)
	routes.Handle("/", srv.Handler())
	var h http.Handler = routes
	if x.wrap != nil {
		h = x.wrap(h)
	}
	ts := httptest.NewServer(h)
	t.Cleanup(func() {
		ts.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Close(ctx)
	})
	return &statusMux{srv: srv, ts: ts}
}

func get(t *testing.T, url string, hdr http.Header) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	for k, v := range hdr {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp, body
}

func decodeStatus(t *testing.T, body []byte) api.StatusReport {
	t.Helper()
	var rep api.StatusReport
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rep); err != nil {
		t.Fatalf("decoding /api/status: %v\n%s", err, body)
	}
	return rep
}

func byName(rep api.StatusReport) map[string]api.ServerReport {
	m := map[string]api.ServerReport{}
	for _, s := range rep.Servers {
		m[s.Name] = s
	}
	return m
}

// TestStatusJSON: every configured server with its state and reason, the
// totals, reloads and task counts from a real embedded store.
func TestStatusJSON(t *testing.T) {
	store, err := taskpoll.OpenBoltStore(taskpoll.BoltOptions{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	ctx := context.Background()
	for _, st := range []taskpoll.Status{taskpoll.StatusWorking, taskpoll.StatusWorking, taskpoll.StatusCompleted} {
		if err := store.Create(ctx, &taskpoll.Task{ID: taskpoll.NewID(), User: "alice", Thread: "th", Server: "web",
			Name: "job", StatusTool: "status", CancelTool: "cancel", Status: st, CreatedAt: time.Now(), UpdatedAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	m := startStatusMux(t, api.StatusOptions{Tasks: func() api.TaskCounter { return store }})
	// A reload that drops "off" and fails nothing: it shows in reloads.
	cfg := m.srv.Config()
	next := *cfg
	next.Servers = nil
	for _, s := range cfg.Servers {
		if s.Name != "off" {
			next.Servers = append(next.Servers, s)
		}
	}
	m.srv.Reload("test", &next, nil)
	m.srv.Reload("test", nil, fmt.Errorf("reading config: unexpected end of JSON input"))

	resp, body := get(t, m.ts.URL+"/api/status", nil)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("GET /api/status: %d %s", resp.StatusCode, body)
	}
	rep := decodeStatus(t, body)
	if rep.Version != "v1.2.3-status" || !rep.Ready || rep.Draining {
		t.Errorf("version %q ready %v draining %v", rep.Version, rep.Ready, rep.Draining)
	}
	s := byName(rep)
	if got := s["web"]; got.State != status.Up || got.Tools == 0 || got.Transport != "http" || got.Reason != "" {
		t.Errorf("web: %+v", got)
	}
	if got := s["local"]; got.State != status.Up || got.Tools == 0 || got.StdioProcesses < 1 {
		t.Errorf("local: %+v", got)
	}
	if got := s["down"]; got.State != status.Retrying || got.Reason == "" || got.Tools != 0 {
		t.Errorf("down: %+v", got)
	}
	if got := s["broken"]; got.State != status.Invalid || !strings.Contains(got.Reason, "command") {
		t.Errorf("broken: %+v", got)
	}
	if _, ok := s["off"]; ok {
		t.Errorf("off is listed after the reload removed it: %+v", s["off"])
	}
	if rep.StdioProcesses < 1 || rep.Tools < s["web"].Tools+s["local"].Tools {
		t.Errorf("totals: %d stdio processes, %d tools", rep.StdioProcesses, rep.Tools)
	}
	if len(rep.Reloads) != 2 || rep.Reloads[0].Outcome != status.ReloadRejected || rep.Reloads[1].Outcome == status.ReloadRejected ||
		len(rep.Reloads[0].Problems) == 0 {
		t.Errorf("reloads (newest first): %+v", rep.Reloads)
	}
	want := map[string]int{"pending": 0, "submitted": 0, "working": 2, "input_required": 0, "completed": 1, "failed": 0, "cancelled": 0}
	if !rep.Tasks.Enabled || rep.Tasks.Error != "" || fmt.Sprint(rep.Tasks.ByStatus) != fmt.Sprint(want) {
		t.Errorf("tasks: %+v, want %v", rep.Tasks, want)
	}

	// A store that no longer answers is reported without its error text.
	_ = store.Close()
	_, body = get(t, m.ts.URL+"/api/status", nil)
	if rep := decodeStatus(t, body); !rep.Tasks.Enabled || rep.Tasks.Error == "" || rep.Tasks.ByStatus != nil {
		t.Errorf("tasks with a closed store: %+v", rep.Tasks)
	}
}

// TestStatusDisabledStates: a disabled server is listed as such, and tasks
// off says so.
func TestStatusDisabledStates(t *testing.T) {
	m := startStatusMux(t, api.StatusOptions{})
	_, body := get(t, m.ts.URL+"/api/status", nil)
	rep := decodeStatus(t, body)
	if got := byName(rep)["off"]; got.State != status.Disabled || got.Tools != 0 {
		t.Errorf("off: %+v", got)
	}
	if rep.Tasks.Enabled || rep.Tasks.ByStatus != nil {
		t.Errorf("tasks off: %+v", rep.Tasks)
	}
	if len(rep.Servers) != 5 {
		t.Errorf("%d servers, want 5", len(rep.Servers))
	}
}

// TestStatusAdminToken: with a token, both routes need it (bearer or Basic
// password); without one they are open.
func TestStatusAdminToken(t *testing.T) {
	const token = "adm-Tok3n-value"
	m := startStatusMux(t, api.StatusOptions{AdminToken: func() string { return token }})
	for _, path := range []string{"/", "/api/status"} {
		for _, tc := range []struct {
			name string
			hdr  http.Header
			want int
		}{
			{"none", nil, http.StatusUnauthorized},
			{"wrong bearer", http.Header{"Authorization": {"Bearer nope"}}, http.StatusUnauthorized},
			{"wrong basic", http.Header{"Authorization": {basic("admin", "nope")}}, http.StatusUnauthorized},
			{"bearer", http.Header{"Authorization": {"Bearer " + token}}, http.StatusOK},
			{"basic", http.Header{"Authorization": {basic("anyone", token)}}, http.StatusOK},
		} {
			resp, body := get(t, m.ts.URL+path, tc.hdr)
			if resp.StatusCode != tc.want {
				t.Errorf("%s with %s: %d, want %d", path, tc.name, resp.StatusCode, tc.want)
			}
			if resp.StatusCode == http.StatusUnauthorized && !strings.Contains(strings.Join(resp.Header.Values("WWW-Authenticate"), ","), "Basic") {
				t.Errorf("%s: 401 without a Basic challenge", path)
			}
			if bytes.Contains(body, []byte(token)) {
				t.Errorf("%s echoes the admin token", path)
			}
		}
	}
	// The page's own refresh gets no Basic challenge: the browser would
	// prompt for a login on every failed refresh (issue 19).
	if resp, _ := get(t, m.ts.URL+"/api/status", http.Header{"Sec-Fetch-Mode": {"cors"}}); resp.StatusCode != http.StatusUnauthorized ||
		strings.Contains(strings.Join(resp.Header.Values("WWW-Authenticate"), ","), "Basic") {
		t.Errorf("a script's refresh: %d %v", resp.StatusCode, resp.Header.Values("WWW-Authenticate"))
	}
	open := startStatusMux(t, api.StatusOptions{AdminToken: func() string { return "" }})
	if resp, body := get(t, open.ts.URL+"/api/status", nil); resp.StatusCode != http.StatusOK {
		t.Errorf("without a token: %d %s", resp.StatusCode, body)
	}
	// The page is "/" only: other paths still reach the MCP server's routes.
	if resp, _ := get(t, open.ts.URL+"/healthz", nil); resp.StatusCode != http.StatusOK {
		t.Errorf("/healthz: %d", resp.StatusCode)
	}
	if resp, _ := get(t, open.ts.URL+"/nope", nil); resp.StatusCode != http.StatusNotFound {
		t.Errorf("/nope: %d", resp.StatusCode)
	}
}

func basic(user, pw string) string {
	r, _ := http.NewRequest(http.MethodGet, "http://x/", nil)
	r.SetBasicAuth(user, pw)
	return r.Header.Get("Authorization")
}

// TestStatusPageHTML: the server-rendered page has every server and no
// external asset, under a CSP that allows nothing else.
func TestStatusPageHTML(t *testing.T) {
	m := startStatusMux(t, api.StatusOptions{})
	resp, body := get(t, m.ts.URL+"/", nil)
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("GET /: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	csp := resp.Header.Get("Content-Security-Policy")
	if !strings.Contains(csp, "default-src 'none'") || !strings.Contains(csp, "connect-src 'self'") {
		t.Errorf("CSP %q", csp)
	}
	page := string(body)
	for _, want := range []string{`data-server="web" data-state="up"`, `data-server="local" data-state="up"`,
		`data-server="down" data-state="retrying"`, `data-server="off" data-state="disabled"`, `data-server="broken" data-state="invalid"`} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %s", want)
		}
	}
	if ext := regexp.MustCompile(`(?i)(src|href)=["']?(https?:)?//`).FindString(page); ext != "" {
		t.Errorf("page loads an external asset: %s", ext)
	}
}

// chromium returns the headless browser the page tests drive.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("no chromium in PATH: install Debian's chromium (.ci/run does: apt-get install -y chromium)")
	return ""
}

// runChromium runs headless Chromium with a fresh profile and returns its
// stdout; the whole process group is killed when it returns.
func runChromium(t *testing.T, args ...string) string {
	t.Helper()
	base := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage",
		"--user-data-dir=" + t.TempDir()}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, chromium(t), append(base, args...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // helpers Chromium left behind
	}
	if err != nil {
		t.Fatalf("chromium %v: %v\n%s", args, err, stderr.String())
	}
	return stdout.String()
}

// TestStatusPageChromium opens the page in headless Chromium: its script
// refreshes from /api/status and re-renders every server (the DOM after
// the refreshes is checked); 420 px wide, with something in every table,
// the page is no wider than its window (each wide table scrolls in its
// own box); and screenshots, wide and narrow, are written to the test's
// artifact directory for people to look at (go test -artifacts keeps
// them).
func TestStatusPageChromium(t *testing.T) {
	m := richMux(t, api.StatusOptions{Refresh: 300 * time.Millisecond}, framable)
	dom := runChromium(t, "--virtual-time-budget=3000", "--dump-dom", m.ts.URL+"/")
	refreshes := regexp.MustCompile(`data-refreshes="(\d+)"`).FindStringSubmatch(dom)
	if refreshes == nil {
		t.Fatalf("no data-refreshes in the DOM:\n%s", dom)
	}
	if n, _ := strconv.Atoi(refreshes[1]); n < 1 {
		t.Errorf("the page's script refreshed %d times", n)
	}
	if strings.Contains(dom, `class="stale"`) {
		t.Error("the page reports a failed refresh")
	}
	for _, want := range []string{`data-server="web" data-state="up"`, `data-server="local" data-state="up"`,
		`data-server="down" data-state="retrying"`, `data-server="off" data-state="disabled"`, `data-server="broken" data-state="invalid"`,
		`<span class="state state-retrying">retrying</span>`, "durable tasks are off"} {
		if !strings.Contains(dom, want) {
			t.Errorf("the rendered DOM lacks %s", want)
		}
	}
	if !regexp.MustCompile(`id="t-procs">[1-9]`).MatchString(dom) {
		t.Error("the stdio process total is not shown")
	}

	scroll, client, over := narrowWidths(t, m)
	if client > 420 || scroll > client || over != "" {
		t.Errorf("at 420 px the page is %d px wide in a %d px viewport; sections wider than their box: %q", scroll, client, over)
	}

	for _, size := range []string{"1280,900", "420,1400"} {
		shot := filepath.Join(t.ArtifactDir(), "status-page-"+strings.Replace(size, ",", "x", 1)+".png")
		runChromium(t, "--virtual-time-budget=1500", "--hide-scrollbars", "--window-size="+size, "--screenshot="+shot, m.ts.URL+"/")
		fi, err := os.Stat(shot)
		if err != nil || fi.Size() < 10_000 {
			t.Fatalf("screenshot %s: %v (%d bytes)", shot, err, sizeOf(fi))
		}
		t.Logf("status page screenshot: %s (%d bytes)", shot, fi.Size())
	}
}

func sizeOf(fi os.FileInfo) int64 {
	if fi == nil {
		return 0
	}
	return fi.Size()
}
