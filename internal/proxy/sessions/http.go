package sessions

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/mcp-mux/mcp-mux/internal/admission"
	"github.com/mcp-mux/mcp-mux/internal/bounds"
	"github.com/mcp-mux/mcp-mux/internal/proxy/callpath"
	"github.com/mcp-mux/mcp-mux/internal/proxy/sessionhost"
	"github.com/mcp-mux/mcp-mux/internal/reqid"
	"github.com/mcp-mux/mcp-mux/internal/sessionstore"
	"github.com/mcp-mux/mcp-mux/internal/wire"
	"github.com/mcp-mux/mcp-mux/internal/wire/mcpwire"
)

// The HTTP side of a session that is the table's: its GET stream and its
// DELETE, on any replica, and the answers to a request whose session could
// not be found, opened or reached.

// streamRetry is the reconnection delay a GET stream closed by a
// draining replica asks its client for.
const streamRetry = 250 * time.Millisecond

// streams are the GET streams of the sessions here: one per session, as
// go-sdk allows, and stop, cancelled by StopStreams, ends them all.
type streams struct {
	mu      sync.Mutex
	byID    map[string]*sessionstore.Follower
	stop    context.Context
	stopAll context.CancelFunc // ends every stream (their clients resume on another replica)
}

// replace makes f the GET stream of session id on this replica, ending the
// one it replaces: a client that reconnects before the old stream's end
// was noticed is served, not refused. Call the returned function when f
// ends.
func (s *streams) replace(id string, f *sessionstore.Follower) func() {
	s.mu.Lock()
	if s.byID == nil {
		s.byID = make(map[string]*sessionstore.Follower)
	}
	old := s.byID[id]
	s.byID[id] = f
	s.mu.Unlock()
	if old != nil {
		old.Close()
	}
	return func() {
		s.mu.Lock()
		if s.byID[id] == f {
			delete(s.byID, id)
		}
		s.mu.Unlock()
	}
}

// ServeStream serves a session's GET stream: its event log from
// Last-Event-ID (or from now), until the client leaves, the session ends
// or this replica drains.
func (t *Table) ServeStream(w http.ResponseWriter, r *http.Request) {
	if !acceptsStream(r.Header.Values("Accept")) {
		http.Error(w, "Accept must contain 'text/event-stream' for GET requests", http.StatusBadRequest)
		return
	}
	sid := r.Header.Get("Mcp-Session-Id")
	if sid == "" {
		http.Error(w, "Bad Request: GET requires an Mcp-Session-Id header", http.StatusBadRequest)
		return
	}
	st, err := t.Lookup(r.Context(), sid, callpath.CallerFrom(r.Context()))
	if err != nil {
		t.Refuse(w, r, nil, err)
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
		t.Refuse(w, r, nil, err)
		return
	}
	unlist := t.streams.replace(sid, f)
	// An open stream keeps a session's own-thread processes (Sweep).
	closed := t.cache.entryOf(st).openStream()
	t.holder.hold(st)
	sessionhost.ServeStream(w, r, f, sessionhost.StreamOptions{Stop: t.streams.stop, Retry: streamRetry,
		Sent: func() { t.Touch(st) }, WriteTimeout: callpath.NotifyTimeout, Keeper: t.keeper, Go: t.bg.TryGo,
		Ended: func() {
			f.Close()
			unlist()
			closed()
		}})
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

// ServeDelete ends a session on every replica.
func (t *Table) ServeDelete(w http.ResponseWriter, r *http.Request) {
	sid := r.Header.Get("Mcp-Session-Id")
	if sid == "" {
		http.Error(w, "Bad Request: DELETE requires an Mcp-Session-Id header", http.StatusBadRequest)
		return
	}
	if _, err := t.Lookup(r.Context(), sid, callpath.CallerFrom(r.Context())); err != nil {
		t.Refuse(w, r, nil, err)
		return
	}
	if err := t.Remove(r.Context(), sid); err != nil {
		t.Refuse(w, r, nil, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// storeRetryAfter is the Retry-After (seconds) of a request refused because
// the session store did not answer: an outage of Redis rarely ends within
// a second, and each of its round trips may take up to 5 s.
const storeRetryAfter = "5"

// Refuse answers a request (its body, nil for none) whose session could
// not be found, opened or reached (err from Lookup, Create or Resident).
func (t *Table) Refuse(w http.ResponseWriter, r *http.Request, body []byte, err error) {
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
		w.Header().Set("Retry-After", storeRetryAfter)
		mcpwire.WriteError(w, http.StatusServiceUnavailable, id, -32603, "the session store is unreachable; retry after "+storeRetryAfter+" s", nil)
	}
}
