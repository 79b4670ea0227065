// Package subscriptions provides resource subscriptions shared by
// downstream sessions: a legacy session's resources/subscribe and the
// resource URIs of a 2026-07-28 subscriptions/listen. Each upstream server
// has a table of the URIs downstream holders (sessions, listen streams)
// hold, and its upstream is asked once per URI: subscribe when the first
// holder comes, unsubscribe when the last one leaves. The locks guard the
// tables only; every upstream round trip runs without one, so a slow
// server delays only the callers of its own URIs. At most one round trip
// per URI is in flight: whoever finishes one brings the upstream in line
// with the holders left (a URI released while its subscribe was in flight
// is unsubscribed then).
package subscriptions

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/mcp-mux/mcp-mux/internal/wire"
)

const (
	// MaxPerHolder bounds the resource URIs one downstream session (or one
	// listen stream) subscribes to.
	MaxPerHolder = 256
	// MaxURI bounds the bytes of one subscribed resource URI (and of one
	// resource URI catalog matches against the templates).
	MaxURI = 8 << 10
	// DefaultUnsubscribeTimeout is Options.UnsubscribeTimeout when it is
	// zero.
	DefaultUnsubscribeTimeout = 10 * time.Second
)

// Upstream is the server a subscription is held on: one per URI and
// table, compared by identity.
type Upstream interface {
	// Subscribe subscribes to (on) or unsubscribes from uri. An
	// unsubscribe leaves the server without the subscription whatever it
	// returns.
	Subscribe(ctx context.Context, uri string, on bool) error
}

// Options configure a Registry.
type Options struct {
	// UnsubscribeTimeout bounds the unsubscribe of a URI nobody holds any
	// more, whether or not the context of the call that released it is done
	// (DefaultUnsubscribeTimeout when zero).
	UnsubscribeTimeout time.Duration
}

// Registry holds every upstream server's subscription table, by server name.
type Registry struct {
	opts   Options
	mu     sync.Mutex
	tables map[string]*table
}

// New returns an empty Registry.
func New(opts Options) *Registry {
	opts.UnsubscribeTimeout = cmp.Or(opts.UnsubscribeTimeout, DefaultUnsubscribeTimeout)
	return &Registry{opts: opts, tables: make(map[string]*table)}
}

// errHoldLost: the holder's hold on the URI was released (it unsubscribed,
// or it closed) while it waited for the server.
var errHoldLost error = &wire.Error{Code: jsonrpc.CodeInternalError,
	Message: "the subscription was withdrawn (unsubscribed, or the session closed) before the server confirmed it"}

// CheckURI refuses a URI longer than MaxURI.
func CheckURI(uri string) error {
	if len(uri) > MaxURI {
		return &wire.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf(
			"resource URI of %d bytes: mcp-mux subscribes to URIs of at most %d bytes", len(uri), MaxURI)}
	}
	return nil
}

// CheckListenURIs applies the per-holder bounds to the resource URIs of a
// subscriptions/listen (a listen is a holder of its own).
func CheckListenURIs(uris []string) *jsonrpc.Error {
	if len(uris) > MaxPerHolder {
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf(
			"subscriptions/listen names %d resource URIs: at most %d per listen", len(uris), MaxPerHolder)}
	}
	for _, uri := range uris {
		var e *wire.Error
		if errors.As(CheckURI(uri), &e) {
			return &jsonrpc.Error{Code: e.Code, Message: e.Message}
		}
	}
	return nil
}

// table returns server's table, made on first use.
func (s *Registry) table(server string) *table {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.tables[server]
	if t == nil {
		t = &table{uris: make(map[string]*entry), unsubscribeTimeout: s.opts.UnsubscribeTimeout}
		s.tables[server] = t
	}
	return t
}

// all returns every table.
func (s *Registry) all() []*table {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*table, 0, len(s.tables))
	for _, t := range s.tables {
		out = append(out, t)
	}
	return out
}

// Subscribe makes h a holder of uri on server (up) and returns once up
// holds the subscription, or with the reason it does not; a failed
// subscribe leaves h without the URI.
func (s *Registry) Subscribe(ctx context.Context, h *Holder, server string, up Upstream, uri string) error {
	if err := CheckURI(uri); err != nil {
		return err
	}
	t := s.table(server)
	wait, added, err := t.hold(h, uri)
	if err != nil || !wait {
		return err
	}
	err = t.await(ctx, h, up, uri)
	if err != nil && added {
		if uerr := s.Unsubscribe(ctx, h, uri); uerr != nil {
			return fmt.Errorf("%w (and unsubscribing again: %v)", err, uerr)
		}
	}
	return err
}

// Unsubscribe releases h's hold on uri, in whichever table holds it, and
// unsubscribes the upstream when h was its last holder and no round trip
// is in flight (else the one in flight does when it ends). The error is
// the upstream's unsubscribe's, for the caller to log.
func (s *Registry) Unsubscribe(ctx context.Context, h *Holder, uri string) error {
	left := s.release(h, uri)
	var errs []error
	for _, t := range left {
		errs = append(errs, t.settle(ctx, uri))
	}
	return errors.Join(errs...)
}

// release takes uri from h and h from the holders of uri in every table,
// and returns the tables it was taken from, for the caller to settle.
func (s *Registry) release(h *Holder, uri string) []*table {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.uris[uri] {
		return nil
	}
	delete(h.uris, uri)
	var left []*table
	for _, t := range s.all() {
		if t.drop(h, uri) {
			left = append(left, t)
		}
	}
	return left
}

// UnsubscribeAll releases every subscription of a closed holder.
func (s *Registry) UnsubscribeAll(ctx context.Context, h *Holder) error {
	var errs []error
	for _, uri := range h.URIs() {
		errs = append(errs, s.Unsubscribe(ctx, h, uri))
	}
	return errors.Join(errs...)
}

// Holders is how many holders hold uri on server (0 for a server without
// a table, which it does not make).
func (s *Registry) Holders(server, uri string) int {
	s.mu.Lock()
	t := s.tables[server]
	s.mu.Unlock()
	if t == nil {
		return 0
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if e := t.uris[uri]; e != nil {
		return len(e.holders)
	}
	return 0
}
