package proxy

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"

	"github.com/mcp-mux/mcp-mux/internal/catalog"
	"github.com/mcp-mux/mcp-mux/internal/proxy/callpath"
	"github.com/mcp-mux/mcp-mux/internal/status"
	"github.com/mcp-mux/mcp-mux/internal/upstream"
)

// Server states in a Status (package status).
const (
	StateStarting = status.Starting
	StateUp       = status.Up
	StateRetrying = status.Retrying
	StateInvalid  = status.Invalid
	StateSkipped  = status.Skipped
	StateDisabled = status.Disabled
)

// ServerStatus is one configured server as the running mux sees it.
type ServerStatus = status.Server

// Status is a snapshot of the running mux.
type Status = status.Snapshot

// Status returns a snapshot of the running mux. A server's tools are
// those it adds to the catalog, counted only while it is up: the tools a
// retrying server's last discovery left in the catalog are StaleTools.
// Sessions counts every replica's, which asks the session store (one
// round trip, bounded).
func (s *Server) Status() Status {
	st := s.localStatus()
	st.Sessions = s.sessions.Total()
	s.approvals.status(context.Background(), &st)
	s.pins.status(&st)
	if stats := s.accounts.stats(); stats != nil {
		rt := s.rt.Load()
		for i := range st.Servers {
			b := rt.ByName[st.Servers[i].Name]
			if a, ok := stats[st.Servers[i].Name]; ok && b != nil && b.ConnectsAccounts(&s.accounts) {
				st.Servers[i].Accounts = accountsStatus(a)
			}
		}
	}
	return st
}

// localStatus is Status without Sessions: what this process knows, with
// no store round trip, for /readyz.
func (s *Server) localStatus() Status {
	rt := s.rt.Load()
	cat := rt.Catalog.Load()
	counts := cat.ToolCounts()
	st := Status{
		Version:      s.opts.Version,
		Started:      s.started,
		Ready:        s.isReady(),
		Draining:     s.draining.Load(),
		Tools:        cat.Len(),
		BuiltinTools: counts[""].Listed,
		Reloads:      s.Reloads(),
		Warnings:     status.Bound(slices.Concat(rt.Warnings, cat.Warnings())),
		Tracing:      s.tel.Tracing(),
	}
	st.SlowCalls, st.FailedCalls = s.opts.Audit.Recent()
	st.Profiles, st.Limits = status.Profiles(cat.ProfileSizes()), s.limits.Usage()
	for _, sc := range rt.Config.Servers {
		ss := ServerStatus{Name: sc.Name, Transport: sc.Type}
		b := rt.ByName[sc.Name]
		switch {
		case b != nil: // running (possibly on kept settings while disabled in the file)
			runningStatus(&ss, b, "")
		case !sc.Enabled:
			ss.State = StateDisabled
		default:
			ss.State, ss.Reason = StateSkipped, rt.Skipped[sc.Name]
		}
		addServer(&st, &ss, counts)
	}
	for _, se := range rt.Config.Invalid {
		ss := ServerStatus{Name: se.Name, State: StateInvalid, Reason: se.Error()}
		if b := rt.ByName[se.Name]; b != nil { // kept on its last good settings
			ss.Transport = b.Up.Transport()
			runningStatus(&ss, b, "the file's entry is invalid, running on the last good settings: "+se.Error())
		}
		addServer(&st, &ss, counts)
	}
	return st
}

// runningStatus fills a running server's state, reason (reason, when set,
// in place of its discovery error) and counts other than its tools.
func runningStatus(ss *ServerStatus, b *callpath.Backend, reason string) {
	ss.State = b.Up.State()
	if err := b.Up.Err(); err != nil {
		ss.Reason, ss.Cause = err.Error(), errorCause(err)
	}
	if reason != "" {
		ss.Reason, ss.Cause = reason, ""
	}
	if se, ok := errors.AsType[*upstream.StatusError](b.Up.Err()); ok && b.PerUser && reason == "" && se.Code == http.StatusUnauthorized {
		ss.Reason, ss.Cause = awaitingReason, "awaiting a connected account"
	}
	l := b.Up.Lists() // the last discovered, also while retrying
	ss.Protocol, ss.Eras = l.Protocol, l.Eras
	if ss.State == StateUp {
		ss.Prompts, ss.Resources = len(l.Prompts), len(l.Resources)
	}
	ss.UpstreamSessions, ss.StdioProcesses = b.Up.Sessions(), b.Up.Processes()
}

// addServer appends a server to the snapshot with its catalog tool counts (only
// while it is up; a server that is not up adds its listed ones to
// StaleTools).
func addServer(st *Status, ss *ServerStatus, counts map[string]catalog.ToolCount) {
	tc := counts[ss.Name]
	if ss.State == StateUp {
		ss.Tools, ss.HiddenTools = tc.Listed, tc.Hidden
	} else {
		st.StaleTools += tc.Listed
	}
	st.HiddenTools += tc.Hidden
	st.StdioProcesses += ss.StdioProcesses
	st.Servers = append(st.Servers, *ss)
}

// errorCause is the most specific part of a discovery error: the last
// ": "-separated part of its text outside quotes ("connection refused" of
// "…: dial tcp 127.0.0.1:1: connect: connection refused"), followed, for a
// stdio server, by its last stderr line (cut to 200 characters). It reads
// the error's text and the stderr lines, which are scrubbed of credentials,
// never the chain beneath them. "" when the text is a single part and
// there is no stderr line (the cause would repeat the reason).
func errorCause(err error) string {
	text, last := err.Error(), ""
	if se, ok := errors.AsType[*upstream.StderrError](err); ok {
		text, last = se.Err.Error(), se.Last
	}
	parts := splitOutsideQuotes(text, ": ")
	if len(parts) < 2 && last == "" {
		return ""
	}
	cause := strings.TrimSpace(parts[len(parts)-1])
	if last != "" {
		if r := []rune(last); len(r) > 200 {
			last = string(r[:200]) + "…"
		}
		cause += " (stderr: " + last + ")"
	}
	return cause
}

// splitOutsideQuotes splits s at each sep that is not inside a
// double-quoted part (Go's %q quoting: a backslash escapes the next byte).
func splitOutsideQuotes(s, sep string) []string {
	var parts []string
	start, quoted := 0, false
	for i := 0; i < len(s); i++ {
		switch {
		case quoted && s[i] == '\\':
			i++
		case s[i] == '"':
			quoted = !quoted
		case !quoted && strings.HasPrefix(s[i:], sep):
			parts = append(parts, s[start:i])
			start = i + len(sep)
			i += len(sep) - 1
		}
	}
	return append(parts, s[start:])
}

// Drain turns readiness false (before a shutdown), so that load balancers
// stop sending new requests while in-flight ones finish, and ends the GET
// streams, whose clients resume on another replica.
func (s *Server) Drain() {
	s.draining.Store(true)
	s.sessions.StopStreams()
}

func (s *Server) isReady() bool { return s.ready.Load() && !s.draining.Load() }

// OpsHandler serves /healthz, /readyz and /metrics alone: for a second
// listener that probes and scrapers reach when the MCP endpoint listens on
// loopback only.
func (s *Server) OpsHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", serveHealth)
	mux.HandleFunc("GET /readyz", s.serveReady)
	mux.Handle("GET /metrics", s.metrics.handler())
	return mux
}

func serveHealth(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain")
	_, _ = w.Write([]byte("ok\n"))
}

// serveReady answers /readyz: readiness (a config applied, not draining),
// the catalog size, how many configured servers are in each state, with
// durable tasks whether the task store answers and, with limits rules,
// their state ("degraded: store unreachable, failing open" while Redis is
// down). A store that is down leaves the replica ready — it still serves
// what needs no store — and is read from what the background probes last
// saw: /readyz never waits on Redis. It is unauthenticated, so it carries
// counts only, never names or error text; with a valid admin token
// (Authorization: Bearer <admin.token>) it adds each server's status.
func (s *Server) serveReady(w http.ResponseWriter, r *http.Request) {
	rt := s.rt.Load()
	st := s.localStatus() // Status would count the sessions in Redis
	counts := map[string]int{StateUp: 0, StateStarting: 0, StateRetrying: 0, StateInvalid: 0, StateSkipped: 0, StateDisabled: 0}
	for _, ss := range st.Servers {
		counts[ss.State]++
	}
	out := struct {
		Ready   bool           `json:"ready"`
		Tools   int            `json:"tools"`
		Servers map[string]int `json:"servers"`
		Store   *bool          `json:"task_store_reachable,omitempty"`
		Limits  string         `json:"limits,omitempty"`
		Detail  []ServerStatus `json:"detail,omitempty"`
	}{Ready: st.Ready, Tools: st.Tools, Servers: counts, Limits: s.limits.Health()}
	if s.tasks != nil {
		storeOK := s.durable.reachable() // degraded, still ready: a replica serves what needs no store
		out.Store = &storeOK
	}
	if adminAuthorized(rt, r) {
		out.Detail = st.Servers
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	if !out.Ready {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	_ = json.NewEncoder(w).Encode(out)
}

// adminAuthorized reports whether r carries the configured admin token.
func adminAuthorized(rt *callpath.Runtime, r *http.Request) bool {
	tok := rt.Config.Admin.Token
	if tok.IsZero() {
		return false
	}
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	return ok && subtle.ConstantTimeCompare([]byte(got), []byte(tok.Reveal())) == 1
}
