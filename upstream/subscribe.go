// Resource subscriptions, held on the discovery session.

package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
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
	u.subsMu.Lock()
	if u.subs == nil {
		u.subs = make(map[string]bool)
	}
	if on && !u.subs[uri] && len(u.subs) >= MaxResourceListens && u.Era() >= VersionModern {
		u.subsMu.Unlock()
		return fmt.Errorf("mcp-mux holds at most %d resource subscriptions (subscriptions/listen streams) on a 2026-07-28 server", MaxResourceListens)
	}
	held := u.subs[uri]
	if on {
		u.subs[uri] = true
	} else {
		delete(u.subs, uri)
	}
	u.subsMu.Unlock()
	c := u.control.Load()
	if c == nil || !c.alive() {
		if on {
			return errors.New("the server is not connected; the subscription starts when it is")
		}
		return nil
	}
	err := u.sendSubscribe(ctx, c, uri, on)
	if err != nil && on && !held {
		u.subsMu.Lock()
		delete(u.subs, uri) // refused: it holds no place
		u.subsMu.Unlock()
	}
	return u.scrub(err, nil)
}

// holdsSubscription reports whether the resources/updated params name a
// URI that mcp-mux holds a subscription for on this server: a server cannot
// announce updates of another server's resources.
func (u *Upstream) holdsSubscription(params json.RawMessage) bool {
	var p struct {
		URI string `json:"uri"`
	}
	if json.Unmarshal(params, &p) != nil {
		return false
	}
	u.subsMu.Lock()
	defer u.subsMu.Unlock()
	return u.subs[p.URI]
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
	_, err := c.request(ctx, u, method, params, nil)
	return err
}

// resubscribe renews the subscriptions on a new discovery session.
func (u *Upstream) resubscribe(c *conn) {
	u.subsMu.Lock()
	uris := make([]string, 0, len(u.subs))
	for uri := range u.subs {
		uris = append(uris, uri)
	}
	u.subsMu.Unlock()
	for _, uri := range uris {
		ctx, cancel := context.WithTimeout(u.ctx, 10*time.Second)
		if err := u.sendSubscribe(ctx, c, uri, true); err != nil {
			u.log.Warn("renewing a resource subscription failed", "err", u.scrub(err, nil))
		}
		cancel()
	}
}
