package admission

import (
	"fmt"
	"net/http"
	"strconv"
	"sync"

	"github.com/hashicorp/go-hclog"

	"github.com/mcp-mux/mcp-mux/config"
	"github.com/mcp-mux/mcp-mux/internal/reqid"
	"github.com/mcp-mux/mcp-mux/internal/wire"
	"github.com/mcp-mux/mcp-mux/internal/wire/mcpwire"
)

// Session admission: inbound.max_sessions and each caller's share of it
// (inbound.max_sessions_per_user), exactly.
//
// A session counts once its initialize succeeded (Open), but many
// initializes may be in flight at once: counting open sessions alone would
// let them overshoot the limit by their number. So a POST that may open a
// session first takes an admission slot (Admit), counted with the open
// sessions, in all and of its caller; a successful initialize turns the
// slot into its session (Open, under the same lock), and the request frees
// it when it ends without having opened one.

// Header carries a request's admission slot from Admit to the initialize
// that opens its session. It is set by mcp-mux only: remove a client's.
const Header = "Mcp-Mux-Internal-Admission"

// Sessions counts open sessions and the admission slots of requests that
// may open one, in all and by caller. The zero value is ready to use.
type Sessions struct {
	mu    sync.Mutex
	open  int               // open sessions
	held  map[string]string // admission slots by token: the user
	users Counts            // open sessions and slots by user
	seq   uint64
}

// noRelease is the release of a request that took no slot.
func noRelease() {}

// Admit refuses a POST that would open a session past in's
// inbound.max_sessions or past its caller's (user's) share of it, and
// reports whether it may proceed; the caller calls release when the
// request has been served. A request of an open session (Mcp-Session-Id)
// takes no slot. A refusal is answered here (HTTP 503, Retry-After, a
// JSON-RPC error with the id of the call in body) and logged to log.
func (a *Sessions) Admit(w http.ResponseWriter, r *http.Request, body []byte, in *config.Inbound, user string, log hclog.Logger) (release func(), ok bool) {
	if r.Header.Get("Mcp-Session-Id") != "" {
		return noRelease, true
	}
	b := Of(in).Sessions
	token, refused := a.Reserve(b, user)
	if refused == "" {
		r.Header.Set(Header, token)
		return func() { a.Release(token) }, true
	}
	msg := fmt.Sprintf("mcp-mux serves at most %d sessions (%s); try again later", b.Limit, b.Key)
	if refused == b.ShareKey {
		msg = fmt.Sprintf("this caller already has %d sessions, the most one caller may open (%s); close one or try again later", b.Share, b.ShareKey)
	}
	reqid.Logger(r.Context(), log).Warn("refusing a new session", "bound", refused)
	w.Header().Set("Retry-After", "1")
	mcpwire.WriteError(w, http.StatusServiceUnavailable, wire.TopLevelID(body), CodeLimit, msg, nil)
	return nil, false
}

// Reserve takes an admission slot for user while open sessions and taken
// slots stay within b, in all and of user's; else it returns the key of the
// bound that refused.
func (a *Sessions) Reserve(b Bound, user string) (token, refused string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if refused = b.Refusal(a.open+len(a.held), a.users[user]); refused != "" {
		return "", refused
	}
	if a.held == nil {
		a.held = make(map[string]string)
	}
	a.seq++
	token = strconv.FormatUint(a.seq, 10)
	a.held[token] = user
	a.users.Add(user)
	return token, ""
}

// Release frees a slot that did not become a session.
func (a *Sessions) Release(token string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if user, ok := a.held[token]; ok {
		delete(a.held, token)
		a.users.Done(user)
	}
}

// Open counts an opened session of user, turning the admission slot token
// (if any) into it.
func (a *Sessions) Open(user, token string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.open++
	if _, ok := a.held[token]; ok {
		delete(a.held, token) // the slot's count is the session's now
	} else {
		a.users.Add(user)
	}
}

// Close counts a closed session of user.
func (a *Sessions) Close(user string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.open--
	a.users.Done(user)
}
