package upstream

import (
	"encoding/json"
	"sync"
)

// Progress is bound to the session that carries its call. A call that asks
// for progress names the token its params carry (Call.ProgressToken);
// while the call is in flight, the token is in the table of the session
// (conn) that carries it, and a notifications/progress arriving on that
// session with that token reaches the call's CallSink. Any other progress
// — another session's token, a guessed one, one of a call that has ended —
// is dropped: a server reaches only calls it carries.

// progressCalls is one session's table of the progress tokens of its calls
// in flight.
type progressCalls struct {
	mu sync.Mutex
	m  map[string]*callRoute
}

func noUnbind() {}

// bind registers the progress token of call r, if any, until the returned
// func is called.
func (t *progressCalls) bind(r *callRoute) (unbind func()) {
	if r == nil || r.token == "" {
		return noUnbind
	}
	tok := r.token
	t.mu.Lock()
	if t.m == nil {
		t.m = make(map[string]*callRoute)
	}
	t.m[tok] = r
	t.mu.Unlock()
	return func() {
		t.mu.Lock()
		if t.m[tok] == r {
			delete(t.m, tok)
		}
		t.mu.Unlock()
	}
}

// call returns the call in flight on this session whose token the progress
// notification params name, or nil.
func (t *progressCalls) call(params json.RawMessage) *callRoute {
	var p struct {
		Token json.RawMessage `json:"progressToken"`
	}
	if json.Unmarshal(params, &p) != nil {
		return nil
	}
	var tok string
	if json.Unmarshal(p.Token, &tok) != nil || tok == "" {
		return nil // tokens mcp-mux sends are strings
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.m[tok]
}
