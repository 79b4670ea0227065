package api

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"html/template"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/mcp-mux/mcp-mux/internal/inbound"
	"github.com/mcp-mux/mcp-mux/internal/status"
	"github.com/mcp-mux/mcp-mux/internal/taskpoll"
)

// StatusSource is what the status page reads (a *proxy.Server).
type StatusSource interface {
	Status() status.Snapshot
}

// TaskCounter counts durable tasks by status (a taskpoll.Store).
type TaskCounter interface {
	Counts(ctx context.Context) (map[taskpoll.Status]int, error)
}

// StatusOptions configure MountStatus.
type StatusOptions struct {
	Source StatusSource
	// Tasks returns the task counter; nil, or a nil result, when durable
	// tasks are off.
	Tasks func() TaskCounter
	// AdminToken returns the admin token. When it is not empty, both routes
	// need it: as a bearer token, or as the password of HTTP Basic auth (so
	// a browser can open the page).
	AdminToken func() string
	// Refresh is how often the page fetches /api/status; default 5s.
	Refresh time.Duration
}

// StatusRoutes are the status page's route patterns.
var StatusRoutes = []string{"GET /{$}", "GET /api/status"}

// taskCountTimeout bounds the task store query behind one status request.
const taskCountTimeout = 2 * time.Second

// MountStatus adds the status page (GET /) and its JSON (GET /api/status)
// to mux.
func MountStatus(mux *http.ServeMux, o StatusOptions) {
	if o.Refresh <= 0 {
		o.Refresh = 5 * time.Second
	}
	h := &statusAPI{o: o}
	mux.Handle(StatusRoutes[0], h.guard(h.page))
	mux.Handle(StatusRoutes[1], h.guard(h.json))
}

// StatusReport is the body of GET /api/status.
type StatusReport struct {
	Version  string    `json:"version"`
	Started  time.Time `json:"started"`
	Ready    bool      `json:"ready"`
	Draining bool      `json:"draining"`
	// Servers lists every configured server, in config order, then the
	// invalid entries.
	Servers []ServerReport `json:"servers"`
	// Tools is the size of the catalog: the up servers' tools, StaleTools
	// and BuiltinTools. HiddenTools are the tools the guardrails hide.
	Tools          int `json:"tools"`
	HiddenTools    int `json:"hidden_tools"`
	StaleTools     int `json:"stale_tools"`
	BuiltinTools   int `json:"builtin_tools"`
	Sessions       int `json:"sessions"`
	StdioProcesses int `json:"stdio_processes"`
	// Reloads are the recent reload attempts, newest first.
	Reloads []ReloadReport `json:"reloads"`
	// Warnings are the running config's warnings and its catalog's (tools
	// whose overridden annotations contradict each other), at most
	// status.MaxLines.
	Warnings []string    `json:"warnings"`
	Tasks    TasksReport `json:"tasks"`
	// SlowCalls and FailedCalls are the recent slow and failed tool calls,
	// prompt gets and resource reads (package audit), newest first, each
	// with its request id and, when it was traced, its trace id.
	SlowCalls   []CallReport `json:"slow_calls"`
	FailedCalls []CallReport `json:"failed_calls"`
	// TracesExported reports whether spans are exported (telemetry export
	// on): only then do calls have trace ids, and the page shows them;
	// otherwise it shows each call's request id (in its log lines and
	// audit record).
	TracesExported bool `json:"traces_exported"`
	// Profiles are the configured profiles with their tool counts; Limits
	// the limits rules with their use on this replica.
	Profiles []status.Profile `json:"profiles"`
	Limits   []status.Limit   `json:"limits"`
	// Approvals are the pending approval requests (at most
	// status.MaxApprovalsShown, soonest to expire first) and how many
	// there are.
	Approvals        []status.Approval `json:"approvals"`
	PendingApprovals int               `json:"pending_approvals"`
	// ToolChanges are the tool definitions servers changed since they
	// were pinned (pin_tools), waiting for an operator (at most
	// status.MaxToolChangesShown, oldest first), and how many there are.
	ToolChanges        []status.ToolChange `json:"tool_changes"`
	PendingToolChanges int                 `json:"pending_tool_changes"`
}

// CallReport is one recent call: the snapshot's own type.
type CallReport = status.Call

// ServerReport is one configured server: the snapshot's own type, so that
// /api/status and /readyz's detail (which proxy writes) describe a server
// in the same fields.
type ServerReport = status.Server

// ReloadReport is one reload attempt: its problems, what it changed
// (servers added, removed, enabled, disabled or changed; top-level blocks
// changed) and the new config's warnings, each list at most
// status.MaxLines.
type ReloadReport struct {
	Time     time.Time `json:"time"`
	Trigger  string    `json:"trigger"`
	Outcome  string    `json:"outcome"`
	Problems []string  `json:"problems,omitempty"`
	Changes  []string  `json:"changes,omitempty"`
	Warnings []string  `json:"warnings,omitempty"`
}

// TasksReport counts durable tasks by status.
type TasksReport struct {
	Enabled bool `json:"enabled"`
	// ByStatus has every status, zero counts included, when the store
	// answered.
	ByStatus map[string]int `json:"by_status,omitempty"`
	// Error is set when the store did not answer (never its error text,
	// which may name hosts).
	Error string `json:"error,omitempty"`
}

// taskStatuses is the order the page lists task counts in.
var taskStatuses = []taskpoll.Status{
	taskpoll.StatusPending, taskpoll.StatusSubmitted, taskpoll.StatusWorking, taskpoll.StatusInputRequired,
	taskpoll.StatusCompleted, taskpoll.StatusFailed, taskpoll.StatusCancelled,
}

type statusAPI struct{ o StatusOptions }

// guard requires the admin token when one is configured.
func (h *statusAPI) guard(next http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token := ""
		if h.o.AdminToken != nil {
			token = h.o.AdminToken()
		}
		if token != "" && !inbound.PresentsToken(r, token) {
			if !scriptRequest(r) {
				w.Header().Set("WWW-Authenticate", `Basic realm="mcp-mux status", charset="UTF-8"`)
			}
			w.Header().Add("WWW-Authenticate", `Bearer realm="mcp-mux status"`)
			writeDetail(w, http.StatusUnauthorized, "the status page needs the admin token (bearer, or as the Basic auth password)")
			return
		}
		next(w, r)
	})
}

// scriptRequest reports whether a browser sent r from a script (the page's
// refresh) rather than to open a page: a Basic challenge there would make
// the browser prompt for a login on every failed refresh, so the page
// reports the 401 itself instead.
func scriptRequest(r *http.Request) bool {
	mode := r.Header.Get("Sec-Fetch-Mode")
	return mode != "" && mode != "navigate"
}

// report gathers the status now.
func (h *statusAPI) report(ctx context.Context) StatusReport {
	st := h.o.Source.Status()
	return StatusReport{
		Version: st.Version, Started: st.Started, Ready: st.Ready, Draining: st.Draining,
		Tools: st.Tools, HiddenTools: st.HiddenTools, StaleTools: st.StaleTools, BuiltinTools: st.BuiltinTools,
		Sessions: st.Sessions, StdioProcesses: st.StdioProcesses,
		Servers: serverReports(st.Servers), Reloads: reloadReports(st.Reloads), Tasks: h.taskReport(ctx),
		Warnings:  append([]string{}, st.Warnings...),
		SlowCalls: append([]CallReport{}, st.SlowCalls...), FailedCalls: append([]CallReport{}, st.FailedCalls...), TracesExported: st.Tracing,
		Profiles: append([]status.Profile{}, st.Profiles...), Limits: append([]status.Limit{}, st.Limits...),
		Approvals: append([]status.Approval{}, st.Approvals...), PendingApprovals: st.PendingApprovals,
		ToolChanges: append([]status.ToolChange{}, st.ToolChanges...), PendingToolChanges: st.PendingToolChanges,
	}
}

// serverReports are the servers of a snapshot, in its order ([] when
// there are none).
func serverReports(servers []status.Server) []ServerReport {
	return append(make([]ServerReport, 0, len(servers)), servers...)
}

// reloadReports are a snapshot's reloads, newest first.
func reloadReports(reloads []status.ReloadEvent) []ReloadReport {
	out := make([]ReloadReport, 0, len(reloads))
	for i := len(reloads) - 1; i >= 0; i-- {
		ev := reloads[i]
		out = append(out, ReloadReport{Time: ev.Time, Trigger: ev.Trigger, Outcome: ev.Outcome, Problems: ev.Problems,
			Changes: ev.Changes, Warnings: ev.Warnings})
	}
	return out
}

// taskReport counts durable tasks by status, if they are on, waiting at
// most taskCountTimeout for the store.
func (h *statusAPI) taskReport(ctx context.Context) TasksReport {
	var tc TaskCounter
	if h.o.Tasks != nil {
		tc = h.o.Tasks()
	}
	if tc == nil {
		return TasksReport{}
	}
	ctx, cancel := context.WithTimeout(ctx, taskCountTimeout)
	defer cancel()
	counts, err := tc.Counts(ctx)
	if err != nil {
		return TasksReport{Enabled: true, Error: "the task store did not answer"}
	}
	rep := TasksReport{Enabled: true, ByStatus: make(map[string]int, len(taskStatuses))}
	for _, s := range taskStatuses {
		rep.ByStatus[string(s)] = counts[s]
	}
	return rep
}

func noStore(w http.ResponseWriter) {
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
}

func (h *statusAPI) json(w http.ResponseWriter, r *http.Request) {
	noStore(w)
	writeJSON(w, http.StatusOK, h.report(r.Context()))
}

func (h *statusAPI) page(w http.ResponseWriter, r *http.Request) {
	var b [16]byte
	_, _ = rand.Read(b[:])
	nonce := base64.RawStdEncoding.EncodeToString(b[:])
	noStore(w)
	w.Header().Set("Content-Security-Policy",
		"default-src 'none'; connect-src 'self'; script-src 'nonce-"+nonce+"'; style-src 'nonce-"+nonce+"'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'")
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_ = statusPage.Execute(w, pageData{
		StatusReport:   h.report(r.Context()),
		Nonce:          nonce,
		RefreshMS:      h.o.Refresh.Milliseconds(),
		TaskStatuses:   taskStatuses,
		AnonymousTitle: anonymousTitle, NoCallerTitle: noCallerTitle,
	})
}

// toolsNote says what the tool total holds besides the up servers' tools:
// "(2 hidden by guardrails, 4 built-in, 3 last listed by servers not up)",
// each part only when it is not zero; "" when there is none.
func toolsNote(r StatusReport) string {
	var parts []string
	if r.HiddenTools > 0 {
		parts = append(parts, fmt.Sprintf("%d hidden by guardrails", r.HiddenTools))
	}
	if r.BuiltinTools > 0 {
		parts = append(parts, fmt.Sprintf("%d built-in", r.BuiltinTools))
	}
	if r.StaleTools > 0 {
		parts = append(parts, fmt.Sprintf("%d last listed by servers not up", r.StaleTools))
	}
	if len(parts) == 0 {
		return ""
	}
	return "(" + strings.Join(parts, ", ") + ")"
}

type pageData struct {
	StatusReport
	Nonce        string
	RefreshMS    int64
	TaskStatuses []taskpoll.Status
	// The titles of a caller cell that shows no id, for the script.
	AnonymousTitle, NoCallerTitle string
}

var statusPage = template.Must(template.New("status").Funcs(template.FuncMap{
	"when": func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05Z") },
	"count": func(m map[string]int, s taskpoll.Status) int {
		return m[string(s)]
	},
	"toolsNote": toolsNote,
	"join":      strings.Join,
	"refused":   refusedText,
	"row":       func(tracing bool, c CallReport) callRow { return callRow{CallReport: c, Tracing: tracing} },
}).Parse(statusHTML + callHTML + limitHTML))

// callRow is a recent call as the page shows it: with its trace id when
// traces are exported, else its request id.
type callRow struct {
	CallReport
	Tracing bool
}

// refusedText is a limit's refusals by kind: "in_flight 2, rate 5"; "0".
func refusedText(m map[string]int64) string {
	kinds := make([]string, 0, len(m))
	for k := range m {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	parts := make([]string, len(kinds))
	for i, k := range kinds {
		parts[i] = fmt.Sprintf("%s %d", k, m[k])
	}
	if len(parts) == 0 {
		return "0"
	}
	return strings.Join(parts, ", ")
}

// limitHTML renders a limits rule (the script's limits rows, in HTML).
const limitHTML = `{{define "limit"}}<tr data-limit="{{.Name}}"><td>{{.Name}}</td><td>{{.Scope}}</td>` +
	`<td>{{if or .Server .Tool}}{{.Server}}{{if and .Server .Tool}} · {{end}}{{.Tool}}{{else}}any{{end}}</td>` +
	`<td class="n">{{if .Calls}}{{.Calls}} / {{.PerSeconds}} s{{else}}—{{end}}</td>` +
	`<td class="n">{{if .InFlight}}{{.Running}} ({{.InFlight}}){{else}}—{{end}}</td><td class="n">{{refused .Refused}}</td></tr>{{end}}`

// callHTML renders a recent call (the script's calls(), in HTML): an
// anonymous caller as "anonymous", one records show no id of as "—"; the
// trace id when traces are exported, else the request id.
const callHTML = `{{define "callHead"}}<tr><th>time</th><th>method</th><th>target</th><th>caller</th><th>outcome</th><th class="n">ms</th>` +
	`<th class="ref">{{if .}}trace id{{else}}request id{{end}}</th></tr>{{end}}` +
	`{{define "call"}}<tr data-target="{{.Target}}" data-outcome="{{.Outcome}}"><td>{{when .Time}}</td><td>{{.Kind}}</td>` +
	`<td>{{if .Server}}{{.Server}} · {{end}}{{.Target}}</td>` +
	`<td>{{if .Anonymous}}<span class="muted" title="` + anonymousTitle + `">anonymous</span>{{else if .Caller}}{{.Caller}}` +
	`{{else}}<span class="muted" title="` + noCallerTitle + `">—</span>{{end}}</td>` +
	`<td>{{.Outcome}}{{if .Denial}}: {{.Denial}}{{end}}{{if and .ErrorType (ne .ErrorType .Outcome)}} ({{.ErrorType}}){{end}}</td>` +
	`<td class="n">{{printf "%.1f" .DurationMS}}</td><td class="trace">{{if .Tracing}}{{.TraceID}}{{else}}{{.RequestID}}{{end}}</td></tr>{{end}}`

// The titles of a call's caller cell when it shows no id.
const (
	anonymousTitle = "no caller identity: inbound.auth.mode is none"
	noCallerTitle  = "caller ids are not recorded (telemetry.audit.user_id: none)"
)

// statusHTML is the page: rendered here, then re-rendered by its script
// from /api/status every RefreshMS. No external assets.
const statusHTML = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>mcp-mux status</title>
<style nonce="{{.Nonce}}">
:root { --fg:#1d232b; --muted:#5d6875; --line:#dfe3e8; --bg:#f7f8fa; --up:#1a7f37; --warn:#9a6700; --bad:#cf222e; --off:#6e7781; }
* { box-sizing: border-box; }
body { margin:0; font:14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color:var(--fg); background:var(--bg); }
header { display:flex; gap:1.5rem; align-items:baseline; flex-wrap:wrap; padding:1rem 1.5rem; background:#fff; border-bottom:1px solid var(--line); }
header h1 { font-size:1.15rem; margin:0; }
header .meta { color:var(--muted); }
main { padding:1rem 1.5rem 2rem; display:grid; grid-template-columns:minmax(0, 1fr); gap:1.25rem; }
section { background:#fff; border:1px solid var(--line); border-radius:6px; padding:.75rem 1rem; min-width:0; }
.scroll { overflow-x:auto; }
h2 { font-size:.95rem; margin:.1rem 0 .6rem; }
table { border-collapse:collapse; width:100%; }
th, td { text-align:left; padding:.35rem .6rem; border-top:1px solid var(--line); vertical-align:top; }
th { color:var(--muted); font-weight:600; border-top:none; }
td.n, th.n { text-align:right; font-variant-numeric:tabular-nums; }
.state { display:inline-block; padding:0 .45rem; border-radius:999px; font-size:.8rem; font-weight:600; color:#fff; }
.state-up { background:var(--up); } .state-starting, .state-retrying { background:var(--warn); }
.state-invalid, .state-skipped { background:var(--bad); } .state-disabled { background:var(--off); }
b.cause { display:block; margin-top:.2rem; font-weight:600; color:var(--bad); }
pre.reason { margin:.25rem 0 0; white-space:pre-wrap; word-break:break-word; font:12px/1.4 ui-monospace, SFMono-Regular, Menlo, monospace; color:#57606a; max-height:12rem; overflow:auto; }
.totals { display:flex; gap:2rem; flex-wrap:wrap; }
.totals div b { display:block; font-size:1.4rem; font-variant-numeric:tabular-nums; }
.muted { color:var(--muted); }
td.trace { font:12px ui-monospace, SFMono-Regular, Menlo, monospace; }
pre.warning { color:var(--warn); }
td pre.reason { min-width:14rem; } /* a narrow window scrolls the table rather than squeezing the text */
ul.lines { margin:0; padding-left:1.1rem; }
@media (max-width:600px) {
  header, main { padding-left:.6rem; padding-right:.6rem; }
  header { gap:.4rem 1rem; }
  section { padding:.6rem; }
  .totals { gap:1rem; }
}
#stale { display:none; color:var(--bad); font-weight:600; }
body.stale #stale { display:inline; }
</style>
</head>
<body data-refresh-ms="{{.RefreshMS}}" data-refreshes="0">
<header>
  <h1>mcp-mux</h1>
  <span class="meta">version <span id="version">{{.Version}}</span></span>
  <span class="meta">started <span id="started">{{when .Started}}</span></span>
  <span class="meta">ready: <b id="ready">{{if .Draining}}draining{{else if .Ready}}yes{{else}}no{{end}}</b></span>
  <span class="meta">updated <span id="updated">just now</span></span>
  <span id="stale">status refresh failed</span>
</header>
<main>
<section>
  <h2>Totals</h2>
  <div class="totals">
    <div><b id="t-servers">{{len .Servers}}</b>servers</div>
    <div><b id="t-tools">{{.Tools}}</b>tools in the catalog <span id="t-tools-note" class="muted">{{toolsNote .StatusReport}}</span></div>
    <div><b id="t-sessions">{{.Sessions}}</b>downstream sessions</div>
    <div><b id="t-procs">{{.StdioProcesses}}</b>stdio processes</div>
  </div>
</section>
<section>
  <h2>Servers</h2>
  <div class="scroll"><table>
    <thead><tr><th>server</th><th>transport</th><th>state</th><th class="n">tools</th><th class="n">prompts</th><th class="n">resources</th><th class="n">upstream sessions</th><th class="n">stdio processes</th></tr></thead>
    <tbody id="servers">
    {{- range .Servers}}
      <tr data-server="{{.Name}}" data-state="{{.State}}"><td><b>{{.Name}}</b>{{if .Cause}}<b class="cause">{{.Cause}}</b>{{end}}{{if .Reason}}<pre class="reason" title="{{.Reason}}">{{.Reason}}</pre>{{end}}{{with .Accounts}}<div class="muted accounts">connected accounts: {{.Connected}} users · consents {{.ConsentsCompleted}} completed, {{.ConsentsFailed}} failed of {{.ConsentsStarted}} · {{.Refreshes}} refreshes</div>{{end}}</td><td>{{.Transport}}{{if .Protocol}} <span class="muted protocol" title="eras it speaks: {{join .Eras ", "}}">{{.Protocol}}</span>{{end}}</td><td><span class="state state-{{.State}}">{{.State}}</span></td>
        {{- if eq .State "up"}}<td class="n">{{.Tools}}{{if .HiddenTools}} <span class="muted" title="hidden by guardrails">(+{{.HiddenTools}} hidden)</span>{{end}}</td><td class="n">{{.Prompts}}</td><td class="n">{{.Resources}}</td>
        {{- else}}{{$t := printf "not counted while the server is %s" .State}}<td class="n muted" title="{{$t}}">—</td><td class="n muted" title="{{$t}}">—</td><td class="n muted" title="{{$t}}">—</td>{{end -}}
        <td class="n">{{.UpstreamSessions}}</td><td class="n">{{.StdioProcesses}}</td></tr>
    {{- else}}
      <tr><td colspan="8" class="muted">no servers configured</td></tr>
    {{- end}}
    </tbody>
  </table></div>
</section>
<section>
  <h2>Config warnings</h2>
  <div id="warnings">{{range .Warnings}}<pre class="reason warning">{{.}}</pre>{{else}}<span class="muted">no warnings</span>{{end}}</div>
</section>
<section>
  <h2>Durable tasks</h2>
  <div id="tasks" class="scroll">
  {{- if not .Tasks.Enabled}}<span class="muted">durable tasks are off (mcp_tasks.enabled)</span>
  {{- else if .Tasks.Error}}<span class="muted">{{.Tasks.Error}}</span>
  {{- else}}<table><thead><tr>{{range .TaskStatuses}}<th class="n">{{.}}</th>{{end}}</tr></thead><tbody><tr>{{$t := .Tasks.ByStatus}}{{range .TaskStatuses}}<td class="n" data-status="{{.}}">{{count $t .}}</td>{{end}}</tr></tbody></table>
  {{- end}}
  </div>
</section>
<section>
  <h2>Profiles and limits</h2>
  <div class="scroll"><table>
    <thead><tr><th>profile</th><th class="n">tools</th></tr></thead>
    <tbody id="profiles">{{range .Profiles}}<tr data-profile="{{.Name}}"><td>{{.Name}}</td><td class="n">{{.Tools}}</td></tr>{{else}}<tr><td colspan="2" class="muted">no profiles configured: every caller sees every tool</td></tr>{{end}}</tbody>
  </table></div>
  <div class="scroll"><table>
    <thead><tr><th>limit</th><th>for each</th><th>applies to</th><th class="n">calls / period</th><th class="n">in flight (cap)</th><th class="n">refused here</th></tr></thead>
    <tbody id="limits">{{range .Limits}}{{template "limit" .}}{{else}}<tr><td colspan="6" class="muted">no limits configured</td></tr>{{end}}</tbody>
  </table></div>
</section>
<section>
  <h2>Pending approvals ({{.PendingApprovals}})</h2>
  <div class="scroll"><table>
    <thead><tr><th>approval</th><th>caller</th><th>server</th><th>tool</th><th>rule</th><th>arguments (redacted)</th><th>expires</th></tr></thead>
    <tbody id="approvals">{{range .Approvals}}<tr data-approval="{{.ID}}"><td><code>{{.ID}}</code></td><td><code>{{.Caller}}</code></td><td>{{.Server}}</td><td>{{.Tool}}</td><td>{{.Rule}}</td><td><pre class="reason">{{.Preview}}</pre></td><td>{{when .Expires}}</td></tr>{{else}}<tr><td colspan="7" class="muted">no call waits for an approval</td></tr>{{end}}</tbody>
  </table></div>
</section>
<section>
  <h2>Changed tool definitions ({{.PendingToolChanges}})</h2>
  <div class="scroll"><table>
    <thead><tr><th>server</th><th>tool</th><th>pin_tools</th><th>changed</th><th>served</th><th>since</th></tr></thead>
    <tbody id="tool-changes">{{range .ToolChanges}}<tr><td>{{.Server}}</td><td><code>{{.Tool}}</code></td><td>{{.Mode}}</td><td>{{range $i, $p := .Parts}}{{if $i}}, {{end}}{{$p}}{{end}}</td><td>{{if eq .Mode "warn"}}new definition{{else if .Held}}pinned definition; calls refused{{else}}withheld; calls refused{{end}}</td><td>{{when .Since}}</td></tr>{{else}}<tr><td colspan="6" class="muted">no server changed a pinned tool definition</td></tr>{{end}}</tbody>
  </table></div>
</section>
<section>
  <h2>Recent failed calls</h2>
  <div class="scroll"><table>
    <thead>{{template "callHead" .TracesExported}}</thead>
    <tbody id="failed-calls">{{range .FailedCalls}}{{template "call" (row $.TracesExported .)}}{{else}}<tr><td colspan="7" class="muted">no failed calls since start</td></tr>{{end}}</tbody>
  </table></div>
</section>
<section>
  <h2>Recent slow calls</h2>
  <div class="scroll"><table>
    <thead>{{template "callHead" .TracesExported}}</thead>
    <tbody id="slow-calls">{{range .SlowCalls}}{{template "call" (row $.TracesExported .)}}{{else}}<tr><td colspan="7" class="muted">no slow calls since start</td></tr>{{end}}</tbody>
  </table></div>
</section>
<section>
  <h2>Recent reloads</h2>
  <div class="scroll"><table>
    <thead><tr><th>time</th><th>trigger</th><th>outcome</th><th>changes</th><th>problems and warnings</th></tr></thead>
    <tbody id="reloads">
    {{- range .Reloads}}
      <tr><td>{{when .Time}}</td><td>{{.Trigger}}</td><td>{{.Outcome}}</td>
        <td>{{if .Changes}}<ul class="lines">{{range .Changes}}<li>{{.}}</li>{{end}}</ul>{{else}}<span class="muted">—</span>{{end}}</td>
        <td>{{range .Problems}}<pre class="reason">{{.}}</pre>{{end}}{{range .Warnings}}<pre class="reason warning">{{.}}</pre>{{end}}</td></tr>
    {{- else}}
      <tr><td colspan="5" class="muted">no reloads since start</td></tr>
    {{- end}}
    </tbody>
  </table></div>
</section>
</main>
<script nonce="{{.Nonce}}">
(function () {
  "use strict";
  var body = document.body, every = Number(body.dataset.refreshMs) || 5000;
  var taskStatuses = {{.TaskStatuses}};
  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = String(text);
    return e;
  }
  function when(iso) { return new Date(iso).toISOString().replace("T", " ").replace(/\.\d+Z$/, "Z"); }
  function row(cells) { var tr = el("tr"); cells.forEach(function (c) { tr.appendChild(c); }); return tr; }
  function num(v) { return el("td", "n", v); }
  function empty(cols, text) { var td = el("td", "muted", text); td.colSpan = cols; return row([td]); }
  // toolsNote says what the tool total holds besides the up servers' tools
  // (the template's toolsNote, in JavaScript).
  function toolsNote(s) {
    var parts = [];
    if (s.hidden_tools) parts.push(s.hidden_tools + " hidden by guardrails");
    if (s.builtin_tools) parts.push(s.builtin_tools + " built-in");
    if (s.stale_tools) parts.push(s.stale_tools + " last listed by servers not up");
    return parts.length ? "(" + parts.join(", ") + ")" : "";
  }
  function countCells(v) {
    if (v.state !== "up") {
      var why = "not counted while the server is " + v.state;
      return [0, 1, 2].map(function () { var td = el("td", "n muted", "\u2014"); td.title = why; return td; });
    }
    var tools = num(v.tools);
    if (v.hidden_tools) {
      var h = el("span", "muted", " (+" + v.hidden_tools + " hidden)"); h.title = "hidden by guardrails"; tools.appendChild(h);
    }
    return [tools, num(v.prompts), num(v.resources)];
  }
  function render(s) {
    document.getElementById("version").textContent = s.version;
    document.getElementById("ready").textContent = s.draining ? "draining" : (s.ready ? "yes" : "no");
    document.getElementById("t-servers").textContent = s.servers.length;
    document.getElementById("t-tools").textContent = s.tools;
    document.getElementById("t-tools-note").textContent = toolsNote(s);
    document.getElementById("t-sessions").textContent = s.sessions;
    document.getElementById("t-procs").textContent = s.stdio_processes;
    var servers = document.getElementById("servers");
    servers.replaceChildren();
    s.servers.forEach(function (v) {
      var name = el("td"); name.appendChild(el("b", "", v.name));
      if (v.cause) name.appendChild(el("b", "cause", v.cause));
      if (v.reason) { var pre = el("pre", "reason", v.reason); pre.title = v.reason; name.appendChild(pre); }
      var state = el("td"); state.appendChild(el("span", "state state-" + v.state, v.state));
      var tp = el("td", "", v.transport || "");
      if (v.protocol) { var pv = el("span", "muted protocol", " " + v.protocol); pv.title = "eras it speaks: " + (v.eras || []).join(", "); tp.appendChild(pv); }
      var tr = row([name, tp, state].concat(countCells(v), [num(v.upstream_sessions), num(v.stdio_processes)]));
      tr.dataset.server = v.name; tr.dataset.state = v.state;
      servers.appendChild(tr);
    });
    if (!s.servers.length) servers.appendChild(empty(8, "no servers configured"));
    var tasks = document.getElementById("tasks");
    tasks.replaceChildren();
    if (!s.tasks.enabled) tasks.appendChild(el("span", "muted", "durable tasks are off (mcp_tasks.enabled)"));
    else if (s.tasks.error) tasks.appendChild(el("span", "muted", s.tasks.error));
    else {
      var t = el("table"), head = el("tr"), counts = el("tr");
      taskStatuses.forEach(function (st) {
        head.appendChild(el("th", "n", st));
        var td = num(s.tasks.by_status[st] || 0); td.dataset.status = st; counts.appendChild(td);
      });
      var th = el("thead"); th.appendChild(head); var tb = el("tbody"); tb.appendChild(counts);
      t.appendChild(th); t.appendChild(tb); tasks.appendChild(t);
    }
    var warnings = document.getElementById("warnings");
    warnings.replaceChildren();
    s.warnings.forEach(function (w) { warnings.appendChild(el("pre", "reason warning", w)); });
    if (!s.warnings.length) warnings.appendChild(el("span", "muted", "no warnings"));
    var reloads = document.getElementById("reloads");
    reloads.replaceChildren();
    s.reloads.forEach(function (r) {
      var changes = el("td"), notes = el("td");
      if ((r.changes || []).length) {
        var ul = el("ul", "lines");
        r.changes.forEach(function (c) { ul.appendChild(el("li", "", c)); });
        changes.appendChild(ul);
      } else changes.appendChild(el("span", "muted", "\u2014"));
      (r.problems || []).forEach(function (p) { notes.appendChild(el("pre", "reason", p)); });
      (r.warnings || []).forEach(function (w) { notes.appendChild(el("pre", "reason warning", w)); });
      reloads.appendChild(row([el("td", "", when(r.time)), el("td", "", r.trigger), el("td", "", r.outcome), changes, notes]));
    });
    if (!s.reloads.length) reloads.appendChild(empty(5, "no reloads since start"));
    var profiles = document.getElementById("profiles");
    profiles.replaceChildren();
    s.profiles.forEach(function (p) { var tr = row([el("td", "", p.name), num(p.tools)]); tr.dataset.profile = p.name; profiles.appendChild(tr); });
    if (!s.profiles.length) profiles.appendChild(empty(2, "no profiles configured: every caller sees every tool"));
    var limits = document.getElementById("limits");
    limits.replaceChildren();
    s.limits.forEach(function (l) {
      var refused = Object.keys(l.refused).sort().map(function (k) { return k + " " + l.refused[k]; }).join(", ");
      var tr = row([el("td", "", l.name), el("td", "", l.scope), el("td", "", [l.server, l.tool].filter(Boolean).join(" \u00b7 ") || "any"),
        num(l.calls ? l.calls + " / " + l.per_seconds + " s" : "\u2014"), num(l.in_flight ? l.running + " (" + l.in_flight + ")" : "\u2014"), num(refused || "0")]);
      tr.dataset.limit = l.name;
      limits.appendChild(tr);
    });
    if (!s.limits.length) limits.appendChild(empty(6, "no limits configured"));
    document.querySelectorAll("th.ref").forEach(function (th) { th.textContent = s.traces_exported ? "trace id" : "request id"; });
    calls("failed-calls", s.failed_calls, "no failed calls since start", s.traces_exported);
    calls("slow-calls", s.slow_calls, "no slow calls since start", s.traces_exported);
  }
  // caller is a call's caller cell (the template's): "anonymous" when no
  // authentication identified it, "\u2014" when records show no ids.
  function caller(c) {
    var td = el("td");
    if (c.anonymous || !c.caller) {
      var span = el("span", "muted", c.anonymous ? "anonymous" : "\u2014");
      span.title = c.anonymous ? {{.AnonymousTitle}} : {{.NoCallerTitle}};
      td.appendChild(span);
    } else td.textContent = c.caller;
    return td;
  }
  // calls renders recent calls (the template's "call" rows): the trace id
  // when traces are exported, else the request id.
  function calls(id, list, none, tracing) {
    var tb = document.getElementById(id);
    tb.replaceChildren();
    list.forEach(function (c) {
      var outcome = el("td", "", c.outcome + (c.denial_reason ? ": " + c.denial_reason : "") + (c.error_type && c.error_type !== c.outcome ? " (" + c.error_type + ")" : ""));
      var tr = row([el("td", "", when(c.time)), el("td", "", c.kind), el("td", "", (c.server ? c.server + " \u00b7 " : "") + c.target),
        caller(c), outcome, num(c.duration_ms.toFixed(1)), el("td", "trace", (tracing ? c.trace_id : c.request_id) || "")]);
      tr.dataset.target = c.target; tr.dataset.outcome = c.outcome;
      tb.appendChild(tr);
    });
    if (!list.length) tb.appendChild(empty(7, none));
  }
  // The data is as of the page load, then of the last good refresh.
  var lastOK = Date.now();
  function tick() {
    var secs = Math.floor((Date.now() - lastOK) / 1000);
    document.getElementById("updated").textContent =
      secs < 1 ? "just now" : secs < 120 ? secs + " s ago" : Math.floor(secs / 60) + " min ago";
  }
  function base64(text) {
    var bin = "";
    new TextEncoder().encode(text).forEach(function (c) { bin += String.fromCharCode(c); });
    return btoa(bin);
  }
  // status fetches /api/status beside the page. A browser refuses fetch()
  // of a URL with credentials, and a page opened as
  // http://user:token@host/ resolves relative URLs to one: the credentials
  // move into an Authorization header and out of the URL.
  function status() {
    var u = new URL("api/status", location.href), headers = {};
    if (u.username || u.password) {
      headers.Authorization = "Basic " + base64(decodeURIComponent(u.username) + ":" + decodeURIComponent(u.password));
      u.username = ""; u.password = "";
    }
    return fetch(u.href, {cache: "no-store", credentials: "same-origin", headers: headers});
  }
  function refresh() {
    status()
      .then(function (r) {
        if (!r.ok) throw new Error("HTTP " + r.status + (r.statusText ? " " + r.statusText : ""));
        return r.json();
      })
      .then(function (s) {
        render(s);
        lastOK = Date.now();
        body.classList.remove("stale");
        body.dataset.refreshes = String(Number(body.dataset.refreshes) + 1);
      })
      .catch(function (e) {
        document.getElementById("stale").textContent = "status refresh failed: " + ((e && e.message) || "no answer");
        body.classList.add("stale");
      })
      .then(function () { tick(); setTimeout(refresh, every); });
  }
  setInterval(tick, 1000);
  setTimeout(refresh, every);
})();
</script>
</body>
</html>
`
