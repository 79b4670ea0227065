package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/internal/admission"
	"github.com/mcp-mux/mcp-mux/internal/bounds"
	"github.com/mcp-mux/mcp-mux/internal/proxy/callpath"
	"github.com/mcp-mux/mcp-mux/internal/proxy/modern"
	"github.com/mcp-mux/mcp-mux/internal/proxy/sessionhost"
	"github.com/mcp-mux/mcp-mux/internal/reqid"
	"github.com/mcp-mux/mcp-mux/internal/sessionstore"
	"github.com/mcp-mux/mcp-mux/internal/wire"
	"github.com/mcp-mux/mcp-mux/internal/wire/mcpwire"
)

// The HTTP side of 2025-11-25 sessions: POST, GET and DELETE of /mcp
// for a session on any replica.
//
// A POST without Mcp-Session-Id that is an initialize creates a session
// (its record first, admitted within the caps); any other POST names one,
// which lookup finds here or loads from its record. A client's answer to a
// request of mcp-mux's is routed by its id to the replica waiting for it;
// a tools/call or tools/list takes the fast path (fastpath.go); the rest
// goes to the session's resident SDK session (package sessionhost). A GET
// follows the session's event log; DELETE ends the session on every replica.

// streamRetry is the reconnection delay a GET stream closed by a
// draining replica asks its client for.
const streamRetry = 250 * time.Millisecond

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
		s.sessions.host.Ephemeral(w, r)
		return
	}
	st, err := s.sessions.lookup(r.Context(), sid, callpath.CallerFrom(r.Context()))
	if err != nil {
		s.sessions.refuse(w, r, body, err)
		return
	}
	s.sessions.touch(st)
	if single {
		if m.IsResponse() && s.answer(w, st, &m, body) {
			return
		}
		if e := modern.LegacyRefusal(m.Method); e != nil && m.IsCall() {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(wire.AppendError(nil, m.ID, e.Code, e.Message, nil))
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
	st, err := s.sessions.create(r.Context(), caller.User, caller.Profile, m.Params)
	if err != nil {
		s.sessions.refuse(w, r, body, err)
		return
	}
	lease, err := s.sessions.host.Create(st.ID)
	if err != nil {
		s.sessions.forget(st.ID)
		s.sessions.refuse(w, r, body, errSessionClosing)
		return
	}
	defer lease.Release()
	r.Body = io.NopCloser(bytes.NewReader(slices.Clone(body)))
	defer s.requests.bind(r)()
	lease.Serve(w, r)
	if lease.Session().InitializeParams() == nil { // the SDK refused it: no session
		_ = s.sessions.remove(context.WithoutCancel(r.Context()), st.ID)
	}
}

// serveSDK serves a POST of st through its resident SDK session,
// rebuilding it from st when it is not resident.
func (s *Server) serveSDK(w http.ResponseWriter, r *http.Request, st *callpath.Session, body []byte) {
	lease, err := s.sessions.host.Open(st.ID, func() *mcp.ServerSessionState { return state(st) })
	if err != nil {
		s.sessions.refuse(w, r, body, errSessionClosing)
		return
	}
	defer lease.Release()
	r.Body = io.NopCloser(bytes.NewReader(slices.Clone(body)))
	defer s.requests.bind(r)()
	lease.Serve(w, r)
}

// answer routes a client's response to a request mcp-mux sent it (its id
// names the replica that waits) and reports whether it was one.
func (s *Server) answer(w http.ResponseWriter, st *callpath.Session, m *wire.Message, body []byte) bool {
	replica, ok := requestReplica(m.ID)
	if !ok {
		return false
	}
	if replica == s.sessions.replica {
		st.Resolve(m)
	} else {
		ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
		err := s.sessions.store.Send(ctx, replica, sessionstore.Message{Kind: msgAnswer, Session: st.ID, Body: body})
		cancel()
		if err != nil {
			s.log.Debug("an answer to another replica's request was not delivered", "session", st.ID, "err", err)
		}
	}
	w.WriteHeader(http.StatusAccepted)
	return true
}

// requestReplica returns the replica named by the id (raw JSON) of a
// request mcp-mux sent a client.
func requestReplica(id []byte) (string, bool) {
	const prefix = `"` + callpath.RequestPrefix
	if !bytes.HasPrefix(id, []byte(prefix)) {
		return "", false
	}
	rest := string(id[len(prefix):])
	i := strings.LastIndexByte(rest, '-')
	if i <= 0 || !sessionstore.ValidReplica(rest[:i]) {
		return "", false
	}
	return rest[:i], true
}

// serveStream serves a session's GET stream: its event log from
// Last-Event-ID (or from now), until the client leaves, the session ends
// or this replica drains.
func (t *sessionTable) serveStream(w http.ResponseWriter, r *http.Request) {
	if !acceptsStream(r.Header.Values("Accept")) {
		http.Error(w, "Accept must contain 'text/event-stream' for GET requests", http.StatusBadRequest)
		return
	}
	sid := r.Header.Get("Mcp-Session-Id")
	if sid == "" {
		http.Error(w, "Bad Request: GET requires an Mcp-Session-Id header", http.StatusBadRequest)
		return
	}
	st, err := t.lookup(r.Context(), sid, callpath.CallerFrom(r.Context()))
	if err != nil {
		t.refuse(w, r, nil, err)
		return
	}
	after := ""
	if id, ok := callpath.CallStreamID(r.Header.Get("Last-Event-ID")); ok {
		interrupted(w, id)
		return
	}
	if h := r.Header.Get("Last-Event-ID"); h != "" {
		var ok bool
		if after, ok = sessionstore.LastEventID(h); !ok {
			http.Error(w, "Last-Event-ID is not an event id this session's stream hands out", http.StatusBadRequest)
			return
		}
	}
	ctx, cancel := context.WithTimeout(r.Context(), storeTimeout)
	f, err := t.store.Follow(ctx, sid, after)
	cancel()
	if err != nil {
		t.refuse(w, r, nil, err)
		return
	}
	defer f.Close()
	defer t.stream(sid, f)()
	// An open stream keeps a session's own-thread processes (sweep).
	defer st.OpenStream()()
	t.hold(st)
	sessionhost.ServeStream(r.Context(), w, f, sessionhost.StreamOptions{Stop: t.streamStop, Retry: streamRetry,
		Sent: func() { t.touch(st) }})
}

// interruptedCall is the answer to a tools/call whose response stream
// broke and was resumed: mcp-mux cannot tell whether the call ran.
const interruptedCall = `{"content":[{"type":"text","text":"mcp-mux: this call was interrupted before it answered (the mcp-mux replica serving it stopped, or its stream broke); it may or may not have run, so check before you retry it"}],"isError":true}`

// interrupted answers the resumption of a tools/call's broken response
// stream: its replica is gone (or it broke on the way), so the call
// answers here, as a tool error that says so, rather than never.
func interrupted(w http.ResponseWriter, id json.RawMessage) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache, no-transform")
	w.WriteHeader(http.StatusOK)
	_, _ = io.WriteString(w, "event: message\ndata: ")
	_, _ = w.Write(wire.AppendResult(nil, id, json.RawMessage(interruptedCall)))
	_, _ = io.WriteString(w, "\n\n")
}

// acceptsStream reports whether an Accept header takes event streams.
func acceptsStream(values []string) bool {
	for _, v := range values {
		for _, raw := range strings.Split(v, ",") {
			base, _, _ := strings.Cut(strings.TrimSpace(raw), ";")
			switch strings.ToLower(strings.TrimSpace(base)) {
			case "text/event-stream", "text/*", "*/*":
				return true
			}
		}
	}
	return false
}

// serveDelete ends a session on every replica.
func (t *sessionTable) serveDelete(w http.ResponseWriter, r *http.Request) {
	sid := r.Header.Get("Mcp-Session-Id")
	if sid == "" {
		http.Error(w, "Bad Request: DELETE requires an Mcp-Session-Id header", http.StatusBadRequest)
		return
	}
	if _, err := t.lookup(r.Context(), sid, callpath.CallerFrom(r.Context())); err != nil {
		t.refuse(w, r, nil, err)
		return
	}
	if err := t.remove(r.Context(), sid); err != nil {
		t.refuse(w, r, nil, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// refuseSession answers a request whose session could not be found,
// opened or reached.
func (t *sessionTable) refuse(w http.ResponseWriter, r *http.Request, body []byte, err error) {
	id := wire.TopLevelID(body)
	var le *sessionstore.LimitError
	switch {
	case errors.Is(err, sessionstore.ErrNotFound):
		http.Error(w, "session not found", http.StatusNotFound)
	case errors.Is(err, errSessionForbidden), errors.Is(err, errSessionProfile):
		mcpwire.WriteError(w, http.StatusForbidden, id, -32600, err.Error(), nil)
	case errors.As(err, &le):
		b := admission.Of(&t.rt.Load().Config.Inbound).Sessions
		msg := fmt.Sprintf("mcp-mux serves at most %d sessions (%s); try again later", b.Limit, b.Key)
		bound := b.Key
		if le.Share {
			msg = fmt.Sprintf("this caller already has %d sessions, the most one caller may open (%s); close one or try again later", b.Share, b.ShareKey)
			bound = b.ShareKey
		}
		reqid.Logger(r.Context(), t.log).Warn("refusing a new session", "bound", bound)
		w.Header().Set("Retry-After", "1")
		mcpwire.WriteError(w, http.StatusServiceUnavailable, id, admission.CodeLimit, msg, nil)
	case errors.Is(err, errSessionClosing):
		w.Header().Set("Retry-After", "1")
		mcpwire.WriteError(w, http.StatusServiceUnavailable, id, -32603, "mcp-mux is shutting down; retry (another replica serves the session)", nil)
	default:
		var we *wire.Error
		var be *bounds.Error
		switch {
		case errors.As(err, &we):
			mcpwire.WriteError(w, http.StatusBadRequest, id, we.Code, we.Message, nil)
			return
		case errors.As(err, &be): // a value past what a session's record keeps
			mcpwire.WriteError(w, http.StatusBadRequest, id, -32600, be.Error(), nil)
			return
		}
		reqid.Logger(r.Context(), t.log).Warn("session store unavailable", "err", err)
		w.Header().Set("Retry-After", "1")
		mcpwire.WriteError(w, http.StatusServiceUnavailable, id, -32603, "the session store is unreachable; retry", nil)
	}
}
