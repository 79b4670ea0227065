package proxy

import (
	"crypto/subtle"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/mcp-mux/mcp-mux/proxy/callpath"
	"github.com/mcp-mux/mcp-mux/status"
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

// Status returns a snapshot of the running mux.
func (s *Server) Status() Status {
	rt := s.rt.Load()
	st := Status{
		Version:  s.opts.Version,
		Started:  s.started,
		Ready:    s.isReady(),
		Draining: s.draining.Load(),
		Tools:    rt.Catalog.Load().Len(),
		Sessions: len(s.sessions.all()),
		Reloads:  s.Reloads(),
	}
	for _, sc := range rt.Config.Servers {
		ss := ServerStatus{Name: sc.Name, Transport: sc.Type}
		b := rt.ByName[sc.Name]
		switch {
		case b != nil: // running (possibly on kept settings while disabled in the file)
			ss.State = b.Up.State()
			if err := b.Up.Err(); err != nil {
				ss.Reason = err.Error()
			}
			l := b.Up.Lists()
			ss.Tools, ss.Prompts, ss.Resources = len(l.Tools), len(l.Prompts), len(l.Resources)
			ss.UpstreamSessions, ss.StdioProcesses = b.Up.Sessions(), b.Up.Processes()
		case !sc.Enabled:
			ss.State = StateDisabled
		default:
			ss.State, ss.Reason = StateSkipped, rt.Skipped[sc.Name]
		}
		st.StdioProcesses += ss.StdioProcesses
		st.Servers = append(st.Servers, ss)
	}
	for _, se := range rt.Config.Invalid {
		ss := ServerStatus{Name: se.Name, State: StateInvalid, Reason: se.Error()}
		if b := rt.ByName[se.Name]; b != nil { // kept on its last good settings
			ss.State, ss.Transport = b.Up.State(), b.Up.Transport()
			ss.Tools, ss.UpstreamSessions, ss.StdioProcesses = len(b.Up.Tools()), b.Up.Sessions(), b.Up.Processes()
			ss.Reason = "the file's entry is invalid, running on the last good settings: " + se.Error()
			st.StdioProcesses += ss.StdioProcesses
		}
		st.Servers = append(st.Servers, ss)
	}
	return st
}

// Drain turns readiness false (before a shutdown), so that load balancers
// stop sending new requests while in-flight ones finish.
func (s *Server) Drain() { s.draining.Store(true) }

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

// serveReady answers /readyz: readiness (a config applied, not draining and,
// with durable tasks on, the task store reachable), the catalog size and how
// many configured servers are in each state. It is unauthenticated, so it
// carries counts only, never names or error text; with a valid admin token
// (Authorization: Bearer <admin.token>) it adds each server's status.
func (s *Server) serveReady(w http.ResponseWriter, r *http.Request) {
	rt := s.rt.Load()
	st := s.Status()
	counts := map[string]int{StateUp: 0, StateStarting: 0, StateRetrying: 0, StateInvalid: 0, StateSkipped: 0, StateDisabled: 0}
	for _, ss := range st.Servers {
		counts[ss.State]++
	}
	out := struct {
		Ready   bool           `json:"ready"`
		Tools   int            `json:"tools"`
		Servers map[string]int `json:"servers"`
		Store   *bool          `json:"task_store_reachable,omitempty"`
		Detail  []ServerStatus `json:"detail,omitempty"`
	}{Ready: st.Ready, Tools: st.Tools, Servers: counts}
	if s.tasks != nil {
		storeOK := s.durable.ready(r.Context())
		out.Ready = out.Ready && storeOK
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

// GuardHosts applies the DNS-rebinding and cross-origin checks of
// inbound.allowed_hosts and inbound.allowed_origins to every request of h.
// Handler is guarded already; serve wraps the listener's whole route mux
// (the task and admin APIs, the status page) with it too.
func (s *Server) GuardHosts(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Every route passes here, so the body deadline starts here too (limits.go).
		s.bodies.Limit(w, r)
		if err := s.rt.Load().Origins.Check(r); err != nil {
			http.Error(w, "Forbidden: "+err.Error(), http.StatusForbidden)
			return
		}
		h.ServeHTTP(w, r)
	})
}
