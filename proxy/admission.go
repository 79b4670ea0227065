package proxy

import (
	"fmt"
	"net/http"
	"strconv"

	"github.com/mcp-mux/mcp-mux/internal/wire"
)

// Session admission: inbound.max_sessions, exactly.
//
// A session counts once its initialize succeeded (openSession), but many
// initializes may be in flight at once: counting open sessions alone would
// let them overshoot the limit by their number. So a POST that may open a
// session first takes an admission slot (admitSession), counted with the
// open sessions; a successful initialize turns the slot into its session
// (sessionTable.add, under the same lock), and the request frees it when it
// ends without having opened one.

// admissionHeader carries a request's admission slot from admitSession to
// the receiving middleware's initialize. Like userHeader it is set by
// mcp-mux only (authenticate removes a client's).
const admissionHeader = "Mcp-Mux-Internal-Admission"

// admitSession refuses a POST that would open a session past
// inbound.max_sessions and reports whether it may proceed; the caller calls
// release when the request has been served.
func (s *Server) admitSession(w http.ResponseWriter, r *http.Request, body []byte) (release func(), ok bool) {
	if r.Header.Get("Mcp-Session-Id") != "" {
		return func() {}, true
	}
	limit := s.maxSessions()
	token, ok := s.sessions.reserve(limit)
	if ok {
		r.Header.Set(admissionHeader, token)
		return func() { s.sessions.release(token) }, true
	}
	s.logFor(r.Context()).Warn("refusing a new session: at inbound.max_sessions", "max_sessions", limit)
	w.Header().Set("Retry-After", "1")
	writeRPCError(w, http.StatusServiceUnavailable, wire.TopLevelID(body), codeLimit,
		fmt.Sprintf("mcp-mux serves at most %d sessions (inbound.max_sessions); try again later", limit))
	return nil, false
}

// reserve takes an admission slot while open sessions and taken slots are
// fewer than limit.
func (t *sessionTable) reserve(limit int) (string, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.m)+len(t.held) >= limit {
		return "", false
	}
	if t.held == nil {
		t.held = make(map[string]bool)
	}
	t.seq++
	token := strconv.FormatUint(t.seq, 10)
	t.held[token] = true
	return token, true
}

// release frees a slot that did not become a session.
func (t *sessionTable) release(token string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.held, token)
}
