package proxy

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/admission"
	"github.com/mcp-mux/mcp-mux/config"
	"github.com/mcp-mux/mcp-mux/proxy/callpath"
	"github.com/mcp-mux/mcp-mux/upstream"
)

// sessionTable holds the downstream sessions of the legacy era: it opens
// them after initialize, notifies them, closes them (idle ones too) and
// releases what they held when they end.
type sessionTable struct {
	mu    sync.RWMutex
	m     map[*mcp.ServerSession]*callpath.Session
	byID  map[string]*callpath.Session
	slots admission.Sessions // open sessions and admission slots, in all and by user (limits.go)

	send  mcp.MethodHandler // the SDK's sending handler: notifications
	gate  *callpath.Life    // orders registration against Close
	wg    sync.WaitGroup    // session cleanup goroutines (end)
	rt    *atomic.Pointer[callpath.Runtime]
	calls *callpath.Router
	log   hclog.Logger
	// threadless is Options.ThreadlessIdle: when an idle session that
	// names no thread gives up its stdio call sessions.
	threadless time.Duration

	// beforeOpen, when set (by tests only, export_test.go), runs in open
	// once it has found ss unregistered, before it registers it: a test
	// holds opens there to put them in flight together.
	beforeOpen atomic.Pointer[func(ss *mcp.ServerSession)]
}

// add registers st, turning the admission slot token (if any) into it, and
// reports whether it did (false: another open of the same SDK session did).
func (t *sessionTable) add(st *callpath.Session, token string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m[st.SS] != nil {
		return false // a concurrent open of the same session won: count it once
	}
	t.slots.Open(st.User, token)
	if t.byID == nil {
		t.byID = make(map[string]*callpath.Session)
	}
	t.m[st.SS] = st
	if st.ID != "" {
		t.byID[st.ID] = st
	}
	return true
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

// open registers a downstream session after a successful initialize
// and releases its upstream sessions when it ends.
func (t *sessionTable) open(ss *mcp.ServerSession, user, token string) *callpath.Session {
	if st := t.get(ss); st != nil {
		return st
	}
	if hold := t.beforeOpen.Load(); hold != nil {
		(*hold)(ss)
	}
	st := &callpath.Session{SS: ss, ID: ss.ID(), User: user, Send: t.send}
	if ip := ss.InitializeParams(); ip != nil {
		st.Caps, st.ClientCaps = upstream.Capabilities(ip.Capabilities), ip.Capabilities
	}
	st.Start()
	st.Touch()
	added := false
	opened := t.gate.Exclusive(func() {
		if added = t.add(st, token); added {
			t.wg.Go(func() { t.end(ss, st) })
		}
	})
	if opened && !added { // the admission slot is released when the request is served
		st.Cancel()
		return t.get(ss)
	}
	if !opened {
		st.Cancel()
		_ = ss.Close()
	}
	return st
}

// end waits for the session ss to end, then forgets it and releases
// its subscriptions and upstream sessions.
func (t *sessionTable) end(ss *mcp.ServerSession, st *callpath.Session) {
	_ = ss.Wait()
	st.Cancel()
	t.remove(ss)
	t.calls.DropSubscriptions(st)
	if st.ID == "" {
		return
	}
	for _, b := range t.rt.Load().Backends {
		b.Up.ReleaseThread(st.ID)
	}
}

// notify sends one notification to one session: on the stream of the
// request whose handler context ctx is, else on the standalone stream.
func (t *sessionTable) notify(ctx context.Context, ss *mcp.ServerSession, method string, params mcp.Params) {
	callpath.Notify(ctx, t.send, ss, method, params, t.log)
}

// close ends a downstream session: its requests in flight are
// cancelled first, so that closing it (which waits for its handlers) is prompt.
func (t *sessionTable) close(ss *mcp.ServerSession) {
	if st := t.get(ss); st != nil {
		st.Cancel()
	}
	_ = ss.Close()
}

// reap sweeps the sessions at least every second (sweep), so that a
// reload's new idle timeout applies soon.
func (t *sessionTable) reap(ctx context.Context) {
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-timer.C:
			timeout := t.sweep(now)
			timer.Reset(min(max(min(timeout, t.threadless)/8, 10*time.Millisecond), time.Second))
		}
	}
}

// sweep closes the downstream sessions idle for longer than
// inbound.session_idle_timeout_seconds (of the config applied now), and
// releases the stdio call sessions of idle sessions that name no thread
// (Options.ThreadlessIdle). It returns the idle timeout it applied.
func (t *sessionTable) sweep(now time.Time) time.Duration {
	rt := t.rt.Load()
	timeout := rt.Config.Inbound.SessionIdleTimeout
	if timeout <= 0 {
		timeout = defaultSessionTimeout
	}
	for _, ss := range t.all() {
		st := t.get(ss)
		if st == nil {
			continue
		}
		idle := now.Sub(time.Unix(0, st.LastSeen.Load()))
		switch {
		case idle > timeout:
			t.log.Debug("closing idle session", "session", st.ID)
			t.close(ss)
		case idle > t.threadless && st.ID != "" && !st.Busy() && st.ReleaseOwnThread():
			for _, b := range rt.Backends {
				if b.Config != nil && b.Config.Type == config.TypeStdio {
					b.Up.ReleaseIdleThread(st.ID)
				}
			}
		}
	}
	return timeout
}

// withKey returns the downstream sessions that called upstreams as key.
func (t *sessionTable) withKey(key upstream.Key) []*callpath.Session {
	var out []*callpath.Session
	for _, ss := range t.all() {
		if st := t.get(ss); st != nil && st.HasKey(key) {
			out = append(out, st)
		}
	}
	return out
}
