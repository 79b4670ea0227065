package proxy

import (
	"context"
	"encoding/json"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/admission"
	"github.com/mcp-mux/mcp-mux/internal/wire"
	"github.com/mcp-mux/mcp-mux/subscriptions"
	"github.com/mcp-mux/mcp-mux/upstream"
)

// session is mcp-mux's state for one downstream MCP session.
type session struct {
	SS       *mcp.ServerSession
	ID       string
	User     string
	Caps     string            // upstream.Capabilities of the client: call sessions declare them
	Send     mcp.MethodHandler // the SDK's sending handler (server-to-client requests)
	LastSeen atomic.Int64      // unix nanos of the last message
	// ClientCaps are the capabilities the client declared: at initialize
	// for a session, in _meta for a 2026-07-28 request.
	ClientCaps *mcp.ClientCapabilities

	// ctx ends with the session (end); every request admitted on the
	// session (limits.go) is cancelled with it. inflight counts those requests.
	ctx      context.Context
	end      context.CancelFunc
	inflight admission.Calls

	reqSeq atomic.Uint64

	mu      sync.Mutex
	calls   map[string]context.CancelFunc // in-flight fast-path calls by raw JSON-RPC id
	pending map[string]chan *wire.Message // fast-path requests to the client, by raw id
	Level   string                        // logging/setLevel; "" = none
	keys    map[upstream.Key]bool         // (user, thread) scopes this session called with
	Subs    subscriptions.Holder          // subscribed resource URIs

	Promo promotions // tool_search promotions (package catalog)
}

type sessionTable struct {
	mu    sync.RWMutex
	m     map[*mcp.ServerSession]*session
	byID  map[string]*session
	slots admission.Sessions // open sessions and admission slots, in all and by user (limits.go)
}

// add registers st, turning the admission slot token (if any) into it.
func (t *sessionTable) add(st *session, token string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.slots.Open(st.User, token)
	if t.byID == nil {
		t.byID = make(map[string]*session)
	}
	t.m[st.SS] = st
	if st.ID != "" {
		t.byID[st.ID] = st
	}
}

func (t *sessionTable) get(ss *mcp.ServerSession) *session {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.m[ss]
}

func (t *sessionTable) byIDGet(id string) *session {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.byID[id]
}

func (t *sessionTable) remove(ss *mcp.ServerSession) *session {
	t.mu.Lock()
	defer t.mu.Unlock()
	st := t.m[ss]
	if st == nil {
		return nil
	}
	delete(t.m, ss)
	t.slots.Close(st.User)
	if t.byID[st.ID] == st {
		delete(t.byID, st.ID)
	}
	return st
}

func (t *sessionTable) count() int {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return len(t.m)
}

func (t *sessionTable) all() []*mcp.ServerSession {
	t.mu.RLock()
	defer t.mu.RUnlock()
	out := make([]*mcp.ServerSession, 0, len(t.m))
	for ss := range t.m {
		out = append(out, ss)
	}
	return out
}

// openSession registers a downstream session after a successful initialize
// and releases its upstream sessions when it ends.
func (s *Server) openSession(ss *mcp.ServerSession, user, token string) *session {
	if st := s.sessions.get(ss); st != nil {
		return st
	}
	st := &session{SS: ss, ID: ss.ID(), User: user, Send: s.send}
	if ip := ss.InitializeParams(); ip != nil {
		st.Caps, st.ClientCaps = upstream.Capabilities(ip.Capabilities), ip.Capabilities
	}
	st.ctx, st.end = context.WithCancel(context.Background())
	st.Touch()
	s.lifeMu.Lock()
	defer s.lifeMu.Unlock()
	if s.closed.Load() {
		st.end()
		_ = ss.Close()
		return st
	}
	s.sessions.add(st, token)
	s.sessionsWG.Go(func() {
		_ = ss.Wait()
		st.end()
		s.sessions.remove(ss)
		s.dropSubscriptions(st)
		if st.ID == "" {
			return
		}
		for _, b := range s.rt.Load().Backends {
			b.Up.ReleaseThread(st.ID)
		}
	})
	return st
}

// notifyAll sends a list_changed notification to every session.
func (s *Server) notifyAll(method string) {
	for _, ss := range s.sessions.all() {
		s.notify(context.Background(), ss, method, nil)
	}
}

// notify sends one notification to one session: on the stream of the
// request whose handler context ctx is, else on the standalone stream.
func (s *Server) notify(ctx context.Context, ss *mcp.ServerSession, method string, params mcp.Params) {
	if s.send == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, notifyTimeout)
	defer cancel()
	var req mcp.Request
	switch method {
	case "notifications/tools/list_changed":
		req = &mcp.ServerRequest[*mcp.ToolListChangedParams]{Session: ss, Params: &mcp.ToolListChangedParams{}}
	case "notifications/prompts/list_changed":
		req = &mcp.ServerRequest[*mcp.PromptListChangedParams]{Session: ss, Params: &mcp.PromptListChangedParams{}}
	case "notifications/resources/list_changed":
		req = &mcp.ServerRequest[*mcp.ResourceListChangedParams]{Session: ss, Params: &mcp.ResourceListChangedParams{}}
	case "notifications/resources/updated":
		p, _ := params.(*mcp.ResourceUpdatedNotificationParams)
		req = &mcp.ServerRequest[*mcp.ResourceUpdatedNotificationParams]{Session: ss, Params: p}
	default:
		return
	}
	if _, err := s.send(ctx, method, req); err != nil {
		s.log.Debug("notification not delivered", "method", method, "session", ss.ID(), "err", err)
	}
}

// Touch records activity for the idle timeout.
func (st *session) Touch() { st.LastSeen.Store(time.Now().UnixNano()) }

// Track registers a fast-path call so notifications/cancelled can end it.
func (st *session) Track(id string, cancel context.CancelFunc) {
	st.mu.Lock()
	if st.calls == nil {
		st.calls = make(map[string]context.CancelFunc)
	}
	st.calls[id] = cancel
	st.mu.Unlock()
}

func (st *session) Untrack(id string) {
	st.mu.Lock()
	delete(st.calls, id)
	st.mu.Unlock()
}

// CancelCall cancels the fast-path call named by notifications/cancelled params.
func (st *session) CancelCall(params json.RawMessage) {
	var p struct {
		RequestID json.RawMessage `json:"requestId"`
	}
	if json.Unmarshal(params, &p) != nil || p.RequestID == nil {
		return
	}
	st.mu.Lock()
	cancel := st.calls[string(p.RequestID)]
	st.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// Cancel cancels every request admitted on the session.
func (st *session) Cancel() {
	if st.end != nil {
		st.end()
	}
}

// closeSession ends a downstream session: its requests in flight are
// cancelled first, so that closing it (which waits for its handlers) is prompt.
func (s *Server) closeSession(ss *mcp.ServerSession) {
	if st := s.sessions.get(ss); st != nil {
		st.Cancel()
	}
	_ = ss.Close()
}

// reapSessions closes downstream sessions idle for longer than
// inbound.session_idle_timeout_seconds (of the config applied at the time).
func (s *Server) reapSessions(ctx context.Context) {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			timeout := s.rt.Load().Config.Inbound.SessionIdleTimeout
			if timeout <= 0 {
				timeout = defaultSessionTimeout
			}
			for _, ss := range s.sessions.all() {
				if st := s.sessions.get(ss); st != nil && now.Sub(time.Unix(0, st.LastSeen.Load())) > timeout {
					s.log.Debug("closing idle session", "session", st.ID)
					s.closeSession(ss)
				}
			}
			// At least every second, so that a reload's new timeout applies soon.
			t.Reset(min(max(timeout/8, 10*time.Millisecond), time.Second))
		}
	}
}

// logSeverity orders MCP logging levels.
var logSeverity = map[string]int{"debug": 0, "info": 1, "notice": 2, "warning": 3, "error": 4, "critical": 5, "alert": 6, "emergency": 7}

// SetLevel records the level the client asked for with logging/SetLevel.
func (st *session) SetLevel(level string) {
	st.mu.Lock()
	st.Level = level
	st.mu.Unlock()
}

// WantsLog reports whether a notifications/message passes the session's
// level. Like the SDK, nothing is sent before the client sets a level.
func (st *session) WantsLog(params json.RawMessage) bool {
	st.mu.Lock()
	level := st.Level
	st.mu.Unlock()
	if level == "" {
		return false
	}
	var p struct {
		Level string `json:"level"`
	}
	_ = json.Unmarshal(params, &p)
	sev, ok := logSeverity[p.Level]
	return !ok || sev >= logSeverity[level]
}

// Supports reports whether the client declared the capability a
// server-to-client request needs.
func (st *session) Supports(method string) bool {
	c := st.ClientCaps
	if c == nil {
		return false
	}
	switch method {
	case "sampling/createMessage":
		return c.Sampling != nil
	case "elicitation/create":
		return c.Elicitation != nil
	case "roots/list":
		return c.RootsV2 != nil
	}
	return true
}

// expect allocates an id for a request mcp-mux sends the client on a
// fast-path stream. The SDK numbers its own requests, so string ids never clash.
func (st *session) expect() (string, chan *wire.Message) {
	id := `"mux-s-` + strconv.FormatUint(st.reqSeq.Add(1), 10) + `"`
	ch := make(chan *wire.Message, 1)
	st.mu.Lock()
	if st.pending == nil {
		st.pending = make(map[string]chan *wire.Message)
	}
	st.pending[id] = ch
	st.mu.Unlock()
	return id, ch
}

func (st *session) forget(id string) {
	st.mu.Lock()
	delete(st.pending, id)
	st.mu.Unlock()
}

// Resolve hands a client's response to the fast-path request waiting for it.
func (st *session) Resolve(m *wire.Message) bool {
	st.mu.Lock()
	ch, ok := st.pending[string(m.ID)]
	delete(st.pending, string(m.ID))
	st.mu.Unlock()
	if ok {
		msg := *m
		ch <- &msg
	}
	return ok
}

// useKey records that the session called upstreams as key.
func (st *session) useKey(k upstream.Key) {
	st.mu.Lock()
	if st.keys == nil {
		st.keys = make(map[upstream.Key]bool)
	}
	st.keys[k] = true
	st.mu.Unlock()
}

func (st *session) UsedKeys() []upstream.Key {
	st.mu.Lock()
	defer st.mu.Unlock()
	out := make([]upstream.Key, 0, len(st.keys))
	for k := range st.keys {
		out = append(out, k)
	}
	return out
}

// HasThread reports whether the session called upstreams as thread.
func (st *session) HasThread(thread string) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	for k := range st.keys {
		if k.Thread == thread {
			return true
		}
	}
	return false
}

func (st *session) HasKey(k upstream.Key) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.keys[k]
}
