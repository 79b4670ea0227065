package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/internal/api"
	"github.com/mcp-mux/mcp-mux/internal/mcptest"
	"github.com/mcp-mux/mcp-mux/internal/status"
)

const honestToken = "adm-Tok3n-value"

// honestMux is startStatusMux plus what issue 19 found the page misstates:
// guardrails hiding two of web's tools, and "flaky", a server that was up
// and now fails its rediscovery (retrying, its last tool list kept).
func honestMux(t *testing.T, o api.StatusOptions, wrap func(http.Handler) http.Handler) *statusMux {
	t.Helper()
	// flaky serves until down is set, then answers 503 to everything.
	var down atomic.Bool
	fs := mcptest.NewServer("flaky")
	sdk := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return fs }, nil)
	flaky := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if down.Load() {
			http.Error(w, "down for the test", http.StatusServiceUnavailable)
			return
		}
		sdk.ServeHTTP(w, r)
	}))
	m := startStatusMuxWith(t, o, statusExtras{
		edit: func(doc, servers map[string]any) {
			servers["flaky"] = map[string]any{"type": "http", "url": flaky.URL + "/mcp", "session_init_timeout": 5}
			doc["guardrails"] = map[string]any{"denied_tools": []string{"web_echo", "web_add"}}
		},
		wrap: wrap,
	})
	down.Store(true)
	for ss := range fs.Sessions() {
		_ = ss.Close()
	}
	t.Cleanup(flaky.Close)         // after the mux's cleanup: its streams end first
	flaky.CloseClientConnections() // the control session ends; its reconnect gets 503
	deadline := time.Now().Add(20 * time.Second)
	for serverState(m, "flaky") != status.Retrying {
		if time.Now().After(deadline) {
			t.Fatalf("flaky did not turn retrying after its server closed: %q", serverState(m, "flaky"))
		}
		time.Sleep(20 * time.Millisecond) // polling a condition, with a deadline
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := m.srv.WaitDiscovery(ctx); err != nil {
		t.Fatal(err)
	}
	return m
}

func serverState(m *statusMux, name string) string {
	for _, s := range m.srv.Status().Servers {
		if s.Name == name {
			return s.State
		}
	}
	return ""
}

// TestStatusToolCountsReconcile: a server's tools are the ones it adds to
// the catalog, so the up servers', the built-in and the retrying servers'
// counts add up to the total; the guardrails' hidden tools are counted
// apart, and a server that is not up shows no tools (issue 19).
func TestStatusToolCountsReconcile(t *testing.T) {
	m := honestMux(t, api.StatusOptions{}, nil)
	_, body := get(t, m.ts.URL+"/api/status", nil)
	rep := decodeStatus(t, body)
	s := byName(rep)
	sum := rep.StaleTools + rep.BuiltinTools
	for _, v := range rep.Servers {
		sum += v.Tools
		if v.State != status.Up && (v.Tools != 0 || v.HiddenTools != 0) {
			t.Errorf("%s is %s but shows %d tools (%d hidden)", v.Name, v.State, v.Tools, v.HiddenTools)
		}
	}
	if sum != rep.Tools {
		t.Errorf("servers' tools + stale %d + built-in %d = %d, total %d", rep.StaleTools, rep.BuiltinTools, sum, rep.Tools)
	}
	if s["web"].HiddenTools != 2 || rep.HiddenTools != 2 || s["local"].HiddenTools != 0 {
		t.Errorf("hidden: web %d, local %d, total %d; want 2, 0, 2", s["web"].HiddenTools, s["local"].HiddenTools, rep.HiddenTools)
	}
	if s["web"].Tools != s["local"].Tools-2 {
		t.Errorf("web lists %d tools, local %d: the same server minus two hidden", s["web"].Tools, s["local"].Tools)
	}
	if f := s["flaky"]; f.State != status.Retrying || rep.StaleTools != s["local"].Tools {
		t.Errorf("flaky %+v; stale tools %d, want local's %d", f, rep.StaleTools, s["local"].Tools)
	}
	if d := s["down"]; d.Cause != "connection refused" || !strings.Contains(d.Reason, "dial tcp") {
		t.Errorf("down: cause %q of reason %q", d.Cause, d.Reason)
	}
}

// TestStatusPageChromiumCredentials opens the page as a browser user does
// with the admin token in the URL (http://user:token@host/): its refreshes
// reach /api/status with that token, "updated" ages, a refresh that fails
// says how, and the page shows tool counts that add up, the hidden tools,
// no counts for a retrying server and each failure's cause first (issue 19).
func TestStatusPageChromiumCredentials(t *testing.T) {
	var rotated atomic.Bool
	var authorized atomic.Int32
	wrap := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			next.ServeHTTP(w, r)
			if r.URL.Path == "/api/status" && r.Header.Get("Authorization") != "" && !rotated.Load() {
				authorized.Add(1)
				rotated.Store(true) // the token changes after the first refresh
			}
		})
	}
	m := honestMux(t, api.StatusOptions{
		Refresh: time.Second,
		AdminToken: func() string {
			if rotated.Load() {
				return "rotated-" + honestToken
			}
			return honestToken
		},
	}, wrap)
	u, _ := url.Parse(m.ts.URL + "/")
	u.User = url.UserPassword("admin", honestToken)
	dom := runChromium(t, "--virtual-time-budget=7000", "--dump-dom", u.String())

	if n := regexp.MustCompile(`data-refreshes="(\d+)"`).FindStringSubmatch(dom); n == nil || n[1] != "1" {
		t.Errorf("refreshes %v, want 1 (the first one, before the token changed); %d authorized /api/status requests", n, authorized.Load())
	}
	if !regexp.MustCompile(`<body[^>]*class="[^"]*stale`).MatchString(dom) {
		t.Error("the page does not say that its refreshes fail after the token changed")
	}
	if stale := regexp.MustCompile(`id="stale"[^>]*>([^<]*)<`).FindStringSubmatch(dom); stale == nil || !strings.Contains(stale[1], "401") {
		t.Errorf("the failure notice %v does not say why (HTTP 401)", stale)
	}
	age := regexp.MustCompile(`id="updated"[^>]*>(\d+) s ago<`).FindStringSubmatch(dom)
	if age == nil {
		t.Fatalf("\"updated\" does not age: %s", regexp.MustCompile(`id="updated"[^>]*>[^<]*<`).FindString(dom))
	}
	if n, _ := strconv.Atoi(age[1]); n < 3 {
		t.Errorf("updated %s s ago, want at least 3 s after the last good refresh", age[1])
	}
	if note := regexp.MustCompile(`id="t-tools-note"[^>]*>([^<]*)<`).FindStringSubmatch(dom); note == nil || !strings.Contains(note[1], "2 hidden by guardrails") {
		t.Errorf("the tool total does not name the hidden tools: %v", note)
	}
	flaky := regexp.MustCompile(`(?s)<tr data-server="flaky".*?</tr>`).FindString(dom)
	if !strings.Contains(flaky, `retrying`) || regexp.MustCompile(`<td class="n"[^>]*>[1-9]`).MatchString(flaky) {
		t.Errorf("the retrying server's row shows tool counts: %s", flaky)
	}
	down := regexp.MustCompile(`(?s)<tr data-server="down".*?</tr>`).FindString(dom)
	if !regexp.MustCompile(`<b class="cause">connection refused</b>`).MatchString(down) ||
		!regexp.MustCompile(`<pre class="reason" title="[^"]*dial tcp`).MatchString(down) {
		t.Errorf("the down server's row does not lead with the cause, full text kept: %s", down)
	}
}

// TestReadyzDetailMatchesStatus: /readyz's detail describes each server in
// the same snake_case fields, with the same values, as /api/status
// (issue 19).
func TestReadyzDetailMatchesStatus(t *testing.T) {
	m := startStatusMuxWith(t, api.StatusOptions{}, statusExtras{edit: func(doc, _ map[string]any) {
		doc["admin"] = map[string]any{"token": honestToken}
	}})
	auth := http.Header{"Authorization": {"Bearer " + honestToken}}
	_, rb := get(t, m.ts.URL+"/readyz", auth)
	_, sb := get(t, m.ts.URL+"/api/status", nil)
	var ready struct {
		Detail []map[string]any `json:"detail"`
	}
	var st struct {
		Servers []map[string]any `json:"servers"`
	}
	if err := json.Unmarshal(rb, &ready); err != nil || len(ready.Detail) == 0 {
		t.Fatalf("/readyz: %v %s", err, rb)
	}
	if err := json.Unmarshal(sb, &st); err != nil {
		t.Fatalf("/api/status: %v %s", err, sb)
	}
	if len(ready.Detail) != len(st.Servers) {
		t.Fatalf("/readyz lists %d servers, /api/status %d", len(ready.Detail), len(st.Servers))
	}
	for i, d := range ready.Detail {
		if !reflect.DeepEqual(d, st.Servers[i]) {
			t.Errorf("server %d:\n/readyz     %v\n/api/status %v", i, d, st.Servers[i])
		}
	}
}
