package sessionstore

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"sync"
)

// KindReply is the Kind of a message that answers another (Exchange).
const KindReply = "reply"

// Exchange pairs the requests one replica sends another with their
// replies: two messages, one round trip each, for a request that must run
// where a session's state is (its GET stream's holder, a parked call).
type Exchange struct {
	mu      sync.Mutex
	pending map[string]chan Message
}

// Call sends m to replica through s and waits for its reply, until ctx ends.
func (x *Exchange) Call(ctx context.Context, s Store, replica string, m Message) (Message, error) {
	m.From, m.Corr = s.Replica(), rand.Text()
	ch := make(chan Message, 1)
	x.mu.Lock()
	if x.pending == nil {
		x.pending = make(map[string]chan Message)
	}
	x.pending[m.Corr] = ch
	x.mu.Unlock()
	defer func() {
		x.mu.Lock()
		delete(x.pending, m.Corr)
		x.mu.Unlock()
	}()
	if err := s.Send(ctx, replica, m); err != nil {
		return Message{}, err
	}
	select {
	case r := <-ch:
		return r, nil
	case <-ctx.Done():
		return Message{}, fmt.Errorf("no answer from replica %s: %w", replica, ctx.Err())
	}
}

// Reply answers the request req with body, through s.
func Reply(ctx context.Context, s Store, req Message, body json.RawMessage) error {
	return s.Send(ctx, req.From, Message{Kind: KindReply, Session: req.Session, Corr: req.Corr, Body: body})
}

// Take hands a reply to the Call waiting for it and reports whether m was
// a reply (whether or not anyone still waits).
func (x *Exchange) Take(m Message) bool {
	if m.Kind != KindReply {
		return false
	}
	x.mu.Lock()
	ch := x.pending[m.Corr]
	x.mu.Unlock()
	if ch != nil {
		select {
		case ch <- m:
		default:
		}
	}
	return true
}
