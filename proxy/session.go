package proxy

import (
	"context"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/admission"
	"github.com/mcp-mux/mcp-mux/proxy/callpath"
	"github.com/mcp-mux/mcp-mux/upstream"
)

type sessionTable struct {
	mu    sync.RWMutex
	m     map[*mcp.ServerSession]*callpath.Session
	byID  map[string]*callpath.Session
	slots admission.Sessions // open sessions and admission slots, in all and by user (limits.go)
}

// add registers st, turning the admission slot token (if any) into it.
func (t *sessionTable) add(st *callpath.Session, token string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.slots.Open(st.User, token)
	if t.byID == nil {
		t.byID = make(map[string]*callpath.Session)
	}
	t.m[st.SS] = st
	if st.ID != "" {
		t.byID[st.ID] = st
	}
}

func (t *sessionTable) get(ss *mcp.ServerSession) *callpath.Session {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.m[ss]
}

func (t *sessionTable) byIDGet(id string) *callpath.Session {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.byID[id]
}

func (t *sessionTable) remove(ss *mcp.ServerSession) *callpath.Session {
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
func (s *Server) openSession(ss *mcp.ServerSession, user, token string) *callpath.Session {
	if st := s.sessions.get(ss); st != nil {
		return st
	}
	st := &callpath.Session{SS: ss, ID: ss.ID(), User: user, Send: s.send}
	if ip := ss.InitializeParams(); ip != nil {
		st.Caps, st.ClientCaps = upstream.Capabilities(ip.Capabilities), ip.Capabilities
	}
	st.Start()
	st.Touch()
	opened := s.gate.Exclusive(func() {
		s.sessions.add(st, token)
		s.sessionsWG.Go(func() { s.endSession(ss, st) })
	})
	if !opened {
		st.Cancel()
		_ = ss.Close()
	}
	return st
}

// endSession waits for the session ss to end, then forgets it and releases
// its subscriptions and upstream sessions.
func (s *Server) endSession(ss *mcp.ServerSession, st *callpath.Session) {
	_ = ss.Wait()
	st.Cancel()
	s.sessions.remove(ss)
	s.calls.DropSubscriptions(st)
	if st.ID == "" {
		return
	}
	for _, b := range s.rt.Load().Backends {
		b.Up.ReleaseThread(st.ID)
	}
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

// notifyTimeout bounds sending one notification to a client.
const notifyTimeout = callpath.NotifyTimeout
