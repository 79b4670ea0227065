// Resource subscriptions, held on the discovery session.

package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Subscribe subscribes to (on) or unsubscribes from a resource URI. Call
// sessions carry no event stream of their own (it would cost the server work
// on every call), so subscriptions live on the discovery session, where the
// server's notifications/resources/updated arrive; they are renewed when
// that session reconnects. The Handler receives the updates. A 2026-07-28
// server has no resources/subscribe: each URI is a subscriptions/listen
// stream of its own, at most MaxResourceListens of them.
func (u *Upstream) Subscribe(ctx context.Context, uri string, on bool) error {
	held, ok := u.subs.set(uri, on, func() bool { return u.Era() >= VersionModern })
	if !ok {
		return fmt.Errorf("mcp-mux holds at most %d resource subscriptions (subscriptions/listen streams) on a 2026-07-28 server", MaxResourceListens)
	}
	c := u.control.Load()
	if c == nil || !c.alive() {
		if on {
			return errors.New("the server is not connected; the subscription starts when it is")
		}
		return nil
	}
	err := u.sendSubscribe(ctx, c, uri, on)
	if err != nil && on && !held {
		u.subs.forget(uri) // refused: it holds no place
	}
	return u.scrubs.Error(err, nil)
}

func (u *Upstream) sendSubscribe(ctx context.Context, c *conn, uri string, on bool) error {
	if c.cs.InitializeResult().ProtocolVersion >= VersionModern {
		return listenResource(ctx, c, uri, on) // modernsubs.go
	}
	method := "resources/unsubscribe"
	if on {
		method = "resources/subscribe"
	}
	params, _ := json.Marshal(map[string]string{"uri": uri})
	_, err := c.request(ctx, u, method, params, nil, nil)
	return err
}

// resubscribe renews the subscriptions on a new discovery session.
func (u *Upstream) resubscribe(c *conn) {
	for _, uri := range u.subs.list() {
		ctx, cancel := context.WithTimeout(u.ctx, 10*time.Second)
		if err := u.sendSubscribe(ctx, c, uri, true); err != nil {
			u.log.Warn("renewing a resource subscription failed", "err", u.scrubs.Error(err, nil))
		}
		cancel()
	}
}

// subscriptions is the set of resource URIs subscribed on the discovery
// session.
type subscriptions struct {
	mu sync.Mutex
	m  map[string]bool
}

// set adds (on) or removes uri and reports whether it was held before. A
// new uri is refused (ok false) when MaxResourceListens are held and
// limited says the cap applies.
func (s *subscriptions) set(uri string, on bool, limited func() bool) (held, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = make(map[string]bool)
	}
	if on && !s.m[uri] && len(s.m) >= MaxResourceListens && limited() {
		return false, false
	}
	held = s.m[uri]
	if on {
		s.m[uri] = true
	} else {
		delete(s.m, uri)
	}
	return held, true
}

func (s *subscriptions) forget(uri string) {
	s.mu.Lock()
	delete(s.m, uri)
	s.mu.Unlock()
}

// holds reports whether the resources/updated params name a URI that
// mcp-mux holds a subscription for on this server: a server cannot announce
// updates of another server's resources.
func (s *subscriptions) holds(params json.RawMessage) bool {
	var p struct {
		URI string `json:"uri"`
	}
	if json.Unmarshal(params, &p) != nil {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m[p.URI]
}

// list returns the URIs held.
func (s *subscriptions) list() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	uris := make([]string, 0, len(s.m))
	for uri := range s.m {
		uris = append(uris, uri)
	}
	return uris
}
