package proxy

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"slices"

	"github.com/mcp-mux/mcp-mux/internal/proxy/callpath"
	"github.com/mcp-mux/mcp-mux/internal/proxy/modern"
	"github.com/mcp-mux/mcp-mux/internal/proxy/sessionhost"
	"github.com/mcp-mux/mcp-mux/internal/wire"
)

// The HTTP side of 2025-11-25 sessions: POST, GET and DELETE of /mcp
// for a session on any replica.
//
// A POST without Mcp-Session-Id that is an initialize creates a session
// (its record first, admitted within the caps); any other POST names one,
// which the table (package sessions) finds here or loads from its record.
// A client's answer to a request of mcp-mux's is routed by its id to the
// replica waiting for it; a tools/call or tools/list takes the fast path
// (fastpath.go); the rest goes to the session's resident SDK session
// (package sessionhost). GET (the session's event log) and DELETE (the
// session's end on every replica) are package sessions'.

// serveSession serves a 2025-11-25 POST whose body was read (body) and
// scanned (batch).
func (s *Server) serveSession(w http.ResponseWriter, r *http.Request, body []byte, batch bool) {
	if !sessionhost.CheckPOST(w, r, batch) {
		return
	}
	caller := callpath.CallerFrom(r.Context())
	var m wire.Message
	single := !batch && wire.Decode(body, &m) == nil
	r.Header.Del(callpath.RequestIDHeader)
	sid := r.Header.Get("Mcp-Session-Id")
	if sid == "" {
		if single && m.Method == "initialize" && m.IsCall() {
			s.serveInitialize(w, r, body, caller, &m)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(slices.Clone(body)))
		s.sessions.Ephemeral(w, r)
		return
	}
	st, err := s.sessions.Lookup(r.Context(), sid, callpath.CallerFrom(r.Context()))
	if err != nil {
		s.sessions.Refuse(w, r, body, err)
		return
	}
	s.sessions.Touch(st)
	if single {
		if m.IsResponse() && s.sessions.Answer(w, st, &m, body) {
			return
		}
		if e := modern.LegacyRefusal(m.Method); e != nil && m.IsCall() {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(wire.AppendError(nil, m.ID, e.Code, e.Message, nil))
			return
		}
		if serveSkill(s.calls, w, r, st, &m) { // skills.go
			return
		}
		if slices.Contains(fastVersions, r.Header.Get("Mcp-Protocol-Version")) && s.serveFast(w, r, st, &m) {
			return
		}
		if m.IsCall() {
			r.Header.Set(callpath.RequestIDHeader, string(m.ID)) // its SERVER span's (middleware.go)
		}
	}
	s.serveSDK(w, r, st, body)
}

// fastVersions are the protocol versions (Mcp-Protocol-Version, "" for
// none) the fast path serves; 2024-11-05 goes to the SDK.
var fastVersions = []string{"", "2025-11-25", "2025-06-18", "2025-03-26"}

// serveInitialize opens a session: its record (refused past the caps),
// then its resident SDK session, which answers the initialize.
func (s *Server) serveInitialize(w http.ResponseWriter, r *http.Request, body []byte, caller callpath.Caller, m *wire.Message) {
	st, lease, err := s.sessions.Create(r.Context(), caller, m.Params)
	if err != nil {
		s.sessions.Refuse(w, r, body, err)
		return
	}
	defer lease.Release()
	r.Body = io.NopCloser(bytes.NewReader(slices.Clone(body)))
	defer s.requests.bind(r)()
	lease.Serve(w, r)
	if lease.Session().InitializeParams() == nil { // the SDK refused it: no session
		_ = s.sessions.Remove(context.WithoutCancel(r.Context()), st.ID)
	}
}

// serveSDK serves a POST of st through its resident SDK session,
// rebuilding it from st when it is not resident.
func (s *Server) serveSDK(w http.ResponseWriter, r *http.Request, st *callpath.Session, body []byte) {
	lease, err := s.sessions.Resident(st)
	if err != nil {
		s.sessions.Refuse(w, r, body, err)
		return
	}
	defer lease.Release()
	r.Body = io.NopCloser(bytes.NewReader(slices.Clone(body)))
	defer s.requests.bind(r)()
	lease.Serve(w, r)
}
