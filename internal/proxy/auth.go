package proxy

import (
	"encoding/json"
	"io"
	"net/http"

	"github.com/mcp-mux/mcp-mux/internal/bounds"
	"github.com/mcp-mux/mcp-mux/internal/config"
	"github.com/mcp-mux/mcp-mux/internal/headers"
	"github.com/mcp-mux/mcp-mux/internal/profile"
	"github.com/mcp-mux/mcp-mux/internal/proxy/callpath"
	"github.com/mcp-mux/mcp-mux/internal/wire"
	"github.com/mcp-mux/mcp-mux/internal/wire/mcpwire"
)

// authenticate guards /mcp and /mcp/{profile}: it identifies the caller
// (401 with a challenge on failure), selects its profile (package profile:
// 404 for a path naming none, 403 for one the caller is not bound to),
// rejects a malformed secrets carrier (400, naming the header, never its
// content). Who the caller is — user, profile, carried secrets — is
// resolved here once and carried on the request's context
// (callpath.WithCaller), never in a header. A session is refused to
// anyone but its owner, under the profile it was opened with (403), where
// it is looked up (sessions.Table.Lookup).
func (s *Server) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rt := s.rt.Load() // Host and Origin were checked by GuardHosts
		id, err := rt.Auth.Identify(r)
		if err != nil {
			s.logFor(r.Context()).Debug("unauthenticated request", "reason", err)
			rt.Auth.Challenge(w, r, err)
			return
		}
		if err := checkHeaders(r.Header, &rt.Config.Inbound); err != nil {
			mcpwire.WriteError(w, http.StatusBadRequest, requestID(r), -32600, "request refused: "+err.Error(), nil)
			return
		}
		c := callpath.NewCaller(id.User, "")
		if name := rt.Config.Inbound.SecretsHeader; name != "" && r.Header.Get(name) != "" {
			if c.Secrets, err = headers.ParseSecrets(name, r.Header.Get(name)); err != nil {
				mcpwire.WriteError(w, http.StatusBadRequest, requestID(r), -32602, err.Error(), nil)
				return
			}
		}
		c.Profile, err = rt.Profiles.Select(id, r.Header, r.PathValue("profile"))
		if err != nil {
			s.logFor(r.Context()).Debug("profile refused", "reason", err)
			mcpwire.WriteError(w, profile.Status(err), requestID(r), -32600, err.Error(), nil)
			return
		}
		next.ServeHTTP(w, r.WithContext(callpath.WithCaller(r.Context(), c)))
	})
}

// checkHeaders checks the caller-chosen headers mcp-mux keeps, counts or
// forwards against their bounds (package bounds): the thread, the session
// id and Last-Event-ID. Every value of a repeated header is checked.
func checkHeaders(h http.Header, in *config.Inbound) error {
	for _, c := range []struct {
		name string
		max  int
	}{{in.ThreadHeader, bounds.Thread}, {"Mcp-Session-Id", bounds.Session}, {"Last-Event-ID", bounds.LastEventID}} {
		if c.name == "" {
			continue
		}
		for _, v := range h.Values(c.name) {
			if err := bounds.Text(c.name, v, c.max); err != nil {
				return err
			}
		}
	}
	return nil
}

// requestID returns the id of the JSON-RPC request a refused POST carried, or
// nil. Clients (the go-sdk among them) only surface an error response that
// answers their request's id; one with a null id is reported as a bare HTTP
// status, losing the message.
func requestID(r *http.Request) json.RawMessage {
	if r.Method != http.MethodPost || r.Body == nil {
		return nil
	}
	b, err := io.ReadAll(io.LimitReader(r.Body, callpath.MaxBody))
	if err != nil {
		return nil
	}
	switch id := wire.TopLevelID(b); {
	case len(id) == 0, id[0] == 'n', id[0] == 't', id[0] == 'f': // none, null, true, false
		return nil
	case len(id) > bounds.ID: // never echoed past its bound
		return nil
	default:
		return id
	}
}
