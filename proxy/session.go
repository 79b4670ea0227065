package proxy

import (
	"context"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// session is mcp-mux's state for one downstream MCP session.
type session struct {
	ss   *mcp.ServerSession
	id   string
	user string
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
