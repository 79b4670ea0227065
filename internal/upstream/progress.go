package upstream

import (
	"context"
	"encoding/json"
	"sync"
)

// Progress is bound to the session that carries its call. A call that asks
// for progress names the token its params carry with WithProgressToken;
// while the call is in flight, the token is in the table of the session
// (conn) that carries it, and a notifications/progress arriving on that
// session with that token reaches the Handler with the call's context. Any
// other progress — another session's token, a guessed one, one of a call
// that has ended — is dropped: a server reaches only calls it carries.

type progressTokenKey struct{}

// WithProgressToken returns ctx for a call whose params carry progress
// token tok (in _meta): the server's progress with tok, on the session that
// carries the call, is delivered with ctx while the call is in flight.
func WithProgressToken(ctx context.Context, tok string) context.Context {
	return context.WithValue(ctx, progressTokenKey{}, tok)
}

func progressTokenFrom(ctx context.Context) string {
	tok, _ := ctx.Value(progressTokenKey{}).(string)
	return tok
}

// progressCalls is one session's table of the progress tokens of its calls
// in flight.
type progressCalls struct {
	mu sync.Mutex
	m  map[string]*progressCall
}

// progressCall is one registration; a pointer, so that a call ending drops
// only its own entry.
type progressCall struct{ ctx context.Context }

func noUnbind() {}

// bind registers the progress token of the call made with ctx, if any,
// until the returned func is called.
func (t *progressCalls) bind(ctx context.Context) (unbind func()) {
	tok := progressTokenFrom(ctx)
	if tok == "" {
		return noUnbind
	}
	e := &progressCall{ctx: ctx}
	t.mu.Lock()
	if t.m == nil {
		t.m = make(map[string]*progressCall)
	}
	t.m[tok] = e
	t.mu.Unlock()
	return func() {
		t.mu.Lock()
		if t.m[tok] == e {
			delete(t.m, tok)
		}
		t.mu.Unlock()
	}
}

// call returns the context of the call in flight on this session whose
// token the progress notification params name, or nil.
func (t *progressCalls) call(params json.RawMessage) context.Context {
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
	if e := t.m[tok]; e != nil {
		return e.ctx
	}
	return nil
}
