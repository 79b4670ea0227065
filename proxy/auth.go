package proxy

import (
	"encoding/json"
	"net/http"

	"github.com/mcp-mux/mcp-mux/headers"
)

// userHeader carries the authenticated user id from the HTTP layer to MCP
// handlers (in stateful mode handlers see each request's headers, not its
// context). mcp-mux sets it after authentication and removes any copy a
// client sent.
const userHeader = "Mcp-Mux-Internal-User"

// authenticate guards /mcp: it identifies the caller (401 with a challenge
// on failure), rejects a malformed secrets carrier (400, naming the header,
// never its content), and refuses a session to anyone but its owner (403).
func (s *Server) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Header.Del(userHeader)
		rt := s.rt.Load()
		user, err := rt.auth.Authenticate(r)
		if err != nil {
			s.log.Debug("unauthenticated request", "reason", err)
			rt.auth.Challenge(w, r, err)
			return
		}
		if name := rt.cfg.Inbound.SecretsHeader; name != "" && r.Header.Get(name) != "" {
			if _, err := headers.ParseSecrets(name, r.Header.Get(name)); err != nil {
				writeRPCError(w, http.StatusBadRequest, -32602, err.Error())
				return
			}
		}
		if sid := r.Header.Get("Mcp-Session-Id"); sid != "" {
			if st := s.sessions.byIDGet(sid); st != nil && st.user != user {
				writeRPCError(w, http.StatusForbidden, -32600, "this session belongs to another user")
				return
			}
		}
		r.Header.Set(userHeader, user)
		next.ServeHTTP(w, r)
	})
}

func writeRPCError(w http.ResponseWriter, status int, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": nil, "error": map[string]any{"code": code, "message": msg}})
	_, _ = w.Write(b)
}

// requestUser returns the authenticated user of a request's headers.
func requestUser(h http.Header) string {
	if u := h.Get(userHeader); u != "" {
		return u
	}
	return defaultUser
}
