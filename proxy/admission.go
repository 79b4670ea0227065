package proxy

import (
	"fmt"
	"net/http"
	"strconv"

	"github.com/mcp-mux/mcp-mux/internal/wire"
)

// Session admission: inbound.max_sessions and each caller's share of it
// (inbound.max_sessions_per_user, shares.go), exactly.
//
// A session counts once its initialize succeeded (openSession), but many
// initializes may be in flight at once: counting open sessions alone would
// let them overshoot the limit by their number. So a POST that may open a
// session first takes an admission slot (admitSession), counted with the
// open sessions, in all and of its caller; a successful initialize turns the slot into its session
// (sessionTable.add, under the same lock), and the request frees it when it
// ends without having opened one.

// admissionHeader carries a request's admission slot from admitSession to
// the receiving middleware's initialize. Like userHeader it is set by
// mcp-mux only (authenticate removes a client's).
const admissionHeader = "Mcp-Mux-Internal-Admission"

// admitSession refuses a POST that would open a session past
// inbound.max_sessions or past its caller's share of it, and reports
// whether it may proceed; the caller calls release when the request has
// been served.
func (s *Server) admitSession(w http.ResponseWriter, r *http.Request, body []byte) (release func(), ok bool) {
	if r.Header.Get("Mcp-Session-Id") != "" {
		return func() {}, true
	}
	b := s.bounds().sessions
	token, refused := s.sessions.reserve(b, requestUser(r.Header))
	if refused == "" {
		r.Header.Set(admissionHeader, token)
		return func() { s.sessions.release(token) }, true
	}
	msg := fmt.Sprintf("mcp-mux serves at most %d sessions (%s); try again later", b.limit, b.key)
	if refused == b.shareKey {
		msg = fmt.Sprintf("this caller already has %d sessions, the most one caller may open (%s); close one or try again later", b.share, b.shareKey)
	}
	s.logFor(r.Context()).Warn("refusing a new session", "bound", refused)
	w.Header().Set("Retry-After", "1")
	writeRPCError(w, http.StatusServiceUnavailable, wire.TopLevelID(body), codeLimit, msg)
	return nil, false
}

// reserve takes an admission slot for user while open sessions and taken
// slots stay within b, in all and of user's; else it returns the key of the
// bound that refused.
func (t *sessionTable) reserve(b capBound, user string) (token, refused string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if refused = b.refusal(len(t.m)+len(t.held), t.users[user]); refused != "" {
		return "", refused
	}
	if t.held == nil {
		t.held = make(map[string]string)
	}
	t.seq++
	token = strconv.FormatUint(t.seq, 10)
	t.held[token] = user
	t.users.add(user)
	return token, ""
}

// release frees a slot that did not become a session.
func (t *sessionTable) release(token string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if user, ok := t.held[token]; ok {
		delete(t.held, token)
		t.users.done(user)
	}
}
