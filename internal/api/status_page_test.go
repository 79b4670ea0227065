package api_test

import (
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/internal/api"
	"github.com/mcp-mux/mcp-mux/internal/audit"
	"github.com/mcp-mux/mcp-mux/internal/config"
	"github.com/mcp-mux/mcp-mux/internal/proxy"
)

// richMux is startStatusMux's mux (auth mode none, telemetry export off)
// with something in every table: a failed and a slow call recorded with
// the default hashed caller ids, and one reload that adds, removes and
// changes servers and has a near-miss key and a tool whose override
// annotations contradict each other.
func richMux(t *testing.T, o api.StatusOptions, wrap func(http.Handler) http.Handler) *statusMux {
	t.Helper()
	a, err := audit.New(audit.Options{Slow: time.Nanosecond}) // every call is slow; callers hashed
	if err != nil {
		t.Fatal(err)
	}
	var doc, servers map[string]any
	m := startStatusMuxWith(t, o, statusExtras{audit: a, wrap: wrap, edit: func(d, s map[string]any) {
		doc, servers = d, s
		s["gone"] = map[string]any{"type": "http", "url": s["web"].(map[string]any)["url"]}
	}})
	c := mcp.NewClient(&mcp.Implementation{Name: "status-rich", Version: "1"}, nil)
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: m.ts.URL + "/mcp"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	for _, name := range []string{"web_echo", "web_fail"} {
		if _, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: map[string]any{"text": "x"}}); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}

	next := maps.Clone(servers)
	web := maps.Clone(servers["web"].(map[string]any))
	web["description"] = "now described"
	web["tools"] = map[string]any{"echo": map[string]any{"annotations": map[string]any{"readOnlyHint": true, "destructiveHint": true}}}
	next["web"] = web
	local := maps.Clone(servers["local"].(map[string]any))
	local["enabeld"] = true
	next["local"] = local
	delete(next, "gone")
	next["extra"] = map[string]any{"type": "http", "url": web["url"]}
	nextDoc := maps.Clone(doc)
	nextDoc["mcpServers"] = next
	raw, _ := json.Marshal(nextDoc)
	cfg, err := config.Parse(raw, config.LoadOptions{Filename: "extensions_config.json"})
	if err != nil {
		t.Fatal(err)
	}
	if ev := m.srv.Reload("api", cfg, nil); ev.Outcome != proxy.ReloadApplied {
		t.Fatalf("reload: %+v", ev)
	}
	return m
}

// nearMiss is the warning the reload's near-miss key gives.
const nearMiss = `local: enabeld: unknown key, kept but not used; did you mean "enabled"?`

// contradiction is the start of the warning of the override's annotations.
const contradiction = `server "web", tool "echo": annotations contradict each other: readOnlyHint (override) and destructiveHint (override) are both true`

// TestStatusCallerAndReloads: with auth mode none the recent calls show
// the caller as anonymous (not the one hash every caller shares), and with
// telemetry export off each call's request id instead of an empty trace
// id; a reload lists what it changed and its warnings, and the running
// config's warnings have a section of their own — in the JSON, the HTML
// and the page its script re-rendered.
func TestStatusCallerAndReloads(t *testing.T) {
	m := richMux(t, api.StatusOptions{Refresh: 300 * time.Millisecond}, nil)
	_, body := get(t, m.ts.URL+"/api/status", nil)
	rep := decodeStatus(t, body)
	if len(rep.FailedCalls) != 1 || len(rep.SlowCalls) != 2 {
		t.Fatalf("failed %+v, slow %+v", rep.FailedCalls, rep.SlowCalls)
	}
	f := rep.FailedCalls[0]
	if !f.Anonymous || f.Caller != "" || f.TraceID != "" || f.RequestID == "" || rep.TracesExported {
		t.Errorf("failed call %+v (traces exported %v): want anonymous, no caller hash, a request id", f, rep.TracesExported)
	}
	if len(rep.Reloads) != 1 {
		t.Fatalf("reloads %+v", rep.Reloads)
	}
	r := rep.Reloads[0]
	for _, want := range []string{"changed web", "added extra", "removed gone"} {
		if !strings.Contains(strings.Join(r.Changes, "\n"), want) {
			t.Errorf("reload changes %q lack %q", r.Changes, want)
		}
	}
	for _, list := range [][]string{r.Warnings, rep.Warnings} {
		joined := strings.Join(list, "\n")
		if !strings.Contains(joined, nearMiss) || !strings.Contains(joined, contradiction) {
			t.Errorf("warnings %q lack the near miss or the contradiction", list)
		}
	}

	_, page := get(t, m.ts.URL+"/", nil)
	dom := runChromium(t, "--virtual-time-budget=3000", "--dump-dom", m.ts.URL+"/")
	if n := regexp.MustCompile(`data-refreshes="(\d+)"`).FindStringSubmatch(dom); n == nil || n[1] == "0" {
		t.Fatalf("the page's script did not refresh: %v", n)
	}
	failedRow := regexp.MustCompile(`(?s)<tr data-target="web_fail" data-outcome="tool_error">.*?</tr>`)
	for name, html := range map[string]string{"served": string(page), "re-rendered": dom} {
		row := failedRow.FindString(html)
		if !regexp.MustCompile(`<span class="muted" title="no caller identity[^"]*">anonymous</span>`).MatchString(row) ||
			!strings.Contains(row, `<td class="trace">`+f.RequestID+`</td>`) {
			t.Errorf("%s page: the failed call's row does not show an anonymous caller and its request id %s: %s", name, f.RequestID, row)
		}
		if !strings.Contains(html, `<th class="ref">request id</th>`) {
			t.Errorf("%s page: the id column is not headed request id", name)
		}
		reloads := grepAround(html, `id="reloads"`)
		for _, want := range []string{"<li>changed web</li>", "<li>added extra</li>", "<li>removed gone</li>", `<pre class="reason warning">` + nearMiss[:20]} {
			if !strings.Contains(reloads, want) {
				t.Errorf("%s page: recent reloads lack %s: %s", name, want, reloads)
			}
		}
		if w := grepAround(html, `id="warnings"`); !strings.Contains(w, "readOnlyHint (override) and destructiveHint (override)") {
			t.Errorf("%s page: the config warnings lack the contradiction: %s", name, w)
		}
	}
}

// narrowProbe is a page that opens the status page in a 420 px wide frame
// and, once its script has refreshed, writes the frame's widths into
// #result: its document's scroll and client widths, and the sections
// wider than their box.
const narrowProbe = `<!doctype html><html><body style="margin:0">
<iframe id="f" src="/" style="width:420px;height:900px;border:0"></iframe><div id="result"></div>
<script>
var f = document.getElementById("f");
function check() {
  var d = f.contentDocument;
  if (!d || !d.body || !Number(d.body.dataset.refreshes)) { setTimeout(check, 100); return; }
  var r = document.getElementById("result"), over = [];
  d.querySelectorAll("section").forEach(function (s) { if (s.scrollWidth > s.clientWidth) over.push(s.querySelector("h2").textContent); });
  r.dataset.scrollWidth = d.documentElement.scrollWidth;
  r.dataset.clientWidth = d.documentElement.clientWidth;
  r.dataset.overflowing = over.join(",");
}
f.onload = check;
</script></body></html>`

// framable serves narrowProbe at /narrow-probe and lets the status page
// be framed by its own origin (it forbids any framing), so the probe can
// measure it; nothing else of the page changes.
func framable(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/narrow-probe" {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			_, _ = w.Write([]byte(narrowProbe))
			return
		}
		next.ServeHTTP(&frameWriter{ResponseWriter: w}, r)
	})
}

// frameWriter writes a response with frame-ancestors 'self' in place of
// 'none'.
type frameWriter struct {
	http.ResponseWriter
	wrote bool
}

func (w *frameWriter) WriteHeader(code int) {
	if !w.wrote {
		h := w.Header()
		h.Set("Content-Security-Policy", strings.Replace(h.Get("Content-Security-Policy"), "frame-ancestors 'none'", "frame-ancestors 'self'", 1))
		w.wrote = true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *frameWriter) Write(b []byte) (int, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(b)
}

// narrowWidths opens the probe and returns the status page's document
// scroll and client widths in a 420 px frame, and the sections wider
// than their box.
func narrowWidths(t *testing.T, m *statusMux) (scroll, client int, overflowing string) {
	t.Helper()
	dom := runChromium(t, "--virtual-time-budget=4000", "--window-size=1000,1000", "--dump-dom", m.ts.URL+"/narrow-probe")
	res := regexp.MustCompile(`<div id="result" data-scroll-width="(\d+)" data-client-width="(\d+)" data-overflowing="([^"]*)"`).FindStringSubmatch(dom)
	if res == nil {
		t.Fatalf("the probe measured nothing:\n%s", dom)
	}
	scroll, _ = strconv.Atoi(res[1])
	client, _ = strconv.Atoi(res[2])
	return scroll, client, res[3]
}
