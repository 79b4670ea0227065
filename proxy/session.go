package proxy

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// session is mcp-mux's state for one downstream MCP session.
type session struct {
	ss       *mcp.ServerSession
	id       string
	user     string
	lastSeen atomic.Int64 // unix nanos of the last message

	mu    sync.Mutex
	calls map[string]context.CancelFunc // in-flight fast-path calls by raw JSON-RPC id
}

type sessionTable struct {
	mu   sync.RWMutex
	m    map[*mcp.ServerSession]*session
	byID map[string]*session
}

func (t *sessionTable) add(st *session) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.byID == nil {
		t.byID = make(map[string]*session)
	}
	t.m[st.ss] = st
	if st.id != "" {
		t.byID[st.id] = st
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
	delete(t.m, ss)
	if st != nil && t.byID[st.id] == st {
		delete(t.byID, st.id)
	}
	return st
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
func (s *Server) openSession(ss *mcp.ServerSession) *session {
	if st := s.sessions.get(ss); st != nil {
		return st
	}
	st := &session{ss: ss, id: ss.ID(), user: defaultUser}
	st.touch()
	s.sessions.add(st)
	go func() {
		_ = ss.Wait()
		s.sessions.remove(ss)
		if st.id == "" {
			return
		}
		for _, b := range s.rt.Load().backends {
			b.up.ReleaseThread(st.id)
		}
	}()
	return st
}

// notifyToolsChanged sends notifications/tools/list_changed to every session.
func (s *Server) notifyToolsChanged() {
	for _, ss := range s.sessions.all() {
		s.notify(ss, "notifications/tools/list_changed", &mcp.ToolListChangedParams{})
	}
}

// notify sends one notification to one session on its standalone stream.
func (s *Server) notify(ss *mcp.ServerSession, method string, params mcp.Params) {
	if s.send == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), notifyTimeout)
	defer cancel()
	var req mcp.Request
	switch p := params.(type) {
	case *mcp.ToolListChangedParams:
		req = &mcp.ServerRequest[*mcp.ToolListChangedParams]{Session: ss, Params: p}
	default:
		return
	}
	if _, err := s.send(ctx, method, req); err != nil {
		s.log.Debug("notification not delivered", "method", method, "session", ss.ID(), "err", err)
	}
}

// touch records activity for the idle timeout.
func (st *session) touch() { st.lastSeen.Store(time.Now().UnixNano()) }

// track registers a fast-path call so notifications/cancelled can end it.
func (st *session) track(id string, cancel context.CancelFunc) {
	st.mu.Lock()
	if st.calls == nil {
		st.calls = make(map[string]context.CancelFunc)
	}
	st.calls[id] = cancel
	st.mu.Unlock()
}

func (st *session) untrack(id string) {
	st.mu.Lock()
	delete(st.calls, id)
	st.mu.Unlock()
}

// cancelCall cancels the fast-path call named by notifications/cancelled params.
func (st *session) cancelCall(params json.RawMessage) {
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

// reapSessions closes downstream sessions idle for longer than timeout.
func (s *Server) reapSessions(ctx context.Context, timeout time.Duration) {
	t := time.NewTicker(max(timeout/8, 10*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			for _, ss := range s.sessions.all() {
				if st := s.sessions.get(ss); st != nil && now.Sub(time.Unix(0, st.lastSeen.Load())) > timeout {
					s.log.Debug("closing idle session", "session", st.id)
					_ = ss.Close()
				}
			}
		}
	}
}
