package proxy

import (
	"crypto/subtle"
	"encoding/json"
	"net/http"
	"strings"
)

// Server states, as /readyz counts them.
const (
	StateUp       = "up"       // discovered; serving its tools
	StateStarting = "starting" // first discovery still running
	StateRetrying = "retrying" // discovery failed; retried with backoff
	StateInvalid  = "invalid"  // skipped at load (invalid settings)
	StateDisabled = "disabled" // "enabled": false
)

// ServerStatus is one configured server's state. Reason is error or
// validation text (credentials scrubbed), for authenticated readers only.
type ServerStatus struct {
	Name     string `json:"name"`
	State    string `json:"state"`
	Tools    int    `json:"tools"`
	Sessions int    `json:"sessions"`
	Reason   string `json:"reason,omitempty"`
}

// ServerStatuses returns every configured server of the running config —
// running, invalid and disabled — in config order (running ones first).
func (s *Server) ServerStatuses() []ServerStatus {
	rt := s.rt.Load()
	var out []ServerStatus
	seen := make(map[string]bool)
	for _, b := range rt.backends {
		st := ServerStatus{Name: b.name, State: StateUp, Tools: len(b.up.Tools()), Sessions: b.up.Sessions()}
		select {
		case <-b.up.Discovered():
			if err := b.up.Err(); err != nil {
				st.State, st.Reason = StateRetrying, err.Error()
			}
		default:
			st.State = StateStarting
		}
		out = append(out, st)
		seen[b.name] = true
	}
	for _, sc := range rt.cfg.Servers {
		if seen[sc.Name] {
			continue
		}
		seen[sc.Name] = true
		if !sc.Enabled {
			out = append(out, ServerStatus{Name: sc.Name, State: StateDisabled})
			continue
		}
		out = append(out, ServerStatus{Name: sc.Name, State: StateInvalid, Reason: rt.skipped[sc.Name]})
	}
	for _, se := range rt.cfg.Invalid {
		if seen[se.Name] {
			continue
		}
		seen[se.Name] = true
		msgs := make([]string, len(se.Problems))
		for i, p := range se.Problems {
			msgs[i] = p.Error()
		}
		out = append(out, ServerStatus{Name: se.Name, State: StateInvalid, Reason: strings.Join(msgs, "; ")})
	}
	return out
}

// serveReady answers /readyz: readiness (a config applied and, with durable
// tasks on, the task store reachable), the catalog size and how many
// servers are in each state. It is unauthenticated, so it carries counts
// only, never names or error text; with a valid admin token
// (Authorization: Bearer <admin.token>) it adds each server's status.
func (s *Server) serveReady(w http.ResponseWriter, r *http.Request) {
	rt := s.rt.Load()
	storeOK := s.taskStoreReady(r.Context())
	statuses := s.ServerStatuses()
	counts := map[string]int{StateUp: 0, StateStarting: 0, StateRetrying: 0, StateInvalid: 0, StateDisabled: 0}
	for _, st := range statuses {
		counts[st.State]++
	}
	out := struct {
		Ready   bool           `json:"ready"`
		Tools   int            `json:"tools"`
		Servers map[string]int `json:"servers"`
		Store   *bool          `json:"task_store_reachable,omitempty"`
		Detail  []ServerStatus `json:"detail,omitempty"`
	}{Ready: s.ready.Load(), Tools: len(rt.cat.Load().order), Servers: counts}
	if s.tasks != nil {
		out.Ready = out.Ready && storeOK
		out.Store = &storeOK
	}
	if adminAuthorized(rt, r) {
		out.Detail = statuses
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	if !out.Ready {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	_ = json.NewEncoder(w).Encode(out)
}

// adminAuthorized reports whether r carries the configured admin token.
func adminAuthorized(rt *runtime, r *http.Request) bool {
	tok := rt.cfg.Admin.Token
	if tok.IsZero() {
		return false
	}
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	return ok && subtle.ConstantTimeCompare([]byte(got), []byte(tok.Reveal())) == 1
}

// GuardHosts applies the DNS-rebinding and cross-origin checks of
// inbound.allowed_hosts and inbound.allowed_origins to every request of h.
// Handler is guarded already; wrap any other handler served on the same
// listener (the admin API, the status page) with it too.
func (s *Server) GuardHosts(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := s.rt.Load().origins.check(r); err != nil {
			http.Error(w, "Forbidden: "+err.Error(), http.StatusForbidden)
			return
		}
		h.ServeHTTP(w, r)
	})
}
