package proxy

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/mcp-mux/mcp-mux/catalog"
	"github.com/mcp-mux/mcp-mux/internal/wire"
	"github.com/mcp-mux/mcp-mux/upstream"
)

// Resource subscriptions: a legacy session's resources/subscribe and the
// resource URIs of a 2026-07-28 subscriptions/listen. Each upstream server
// has a table of the URIs downstream sessions hold, and its upstream is
// asked once per URI: subscribe when the first session comes, unsubscribe
// when the last one leaves. The locks guard the tables only; every
// upstream round trip runs without one, so a slow server delays only the
// callers of its own URIs. At most one round trip per URI is in flight:
// whoever finishes one brings the upstream in line with the holders left
// (a URI released while its subscribe was in flight is unsubscribed then).

const (
	// maxSessionSubscriptions bounds the resource URIs one downstream
	// session (or one listen stream) subscribes to.
	maxSessionSubscriptions = 256
	// maxResourceURI bounds the bytes of one subscribed resource URI.
	maxResourceURI = catalog.MaxResourceURI
)

// subscriptions holds every upstream server's subscription table, by
// server name.
type subscriptions struct {
	mu     sync.Mutex
	tables map[string]*subscriptionTable
}

// subscriptionTable is one upstream server's subscribed URIs.
type subscriptionTable struct {
	mu   sync.Mutex
	uris map[string]*uriSubscription
}

// uriSubscription is one URI: the sessions holding it and the upstream's
// state.
type uriSubscription struct {
	holders map[*session]struct{}
	on      *upstream.Upstream // the upstream that holds the subscription; nil: none
	// stale may hold it: its subscribe was cancelled in flight, after the
	// request may have reached it. It is unsubscribed once nobody holds the URI.
	stale *upstream.Upstream
	op    *subscribeOp // the round trip in flight; nil: none
}

// subscribeOp is one upstream subscribe or unsubscribe.
type subscribeOp struct {
	on   bool
	done chan struct{} // closed when it ended; err is set by then
	err  error
}

// errHoldLost: the session's hold on the URI was released (it unsubscribed,
// or it closed) while it waited for the server.
var errHoldLost error = &wire.Error{Code: jsonrpc.CodeInternalError,
	Message: "the subscription was withdrawn (unsubscribed, or the session closed) before the server confirmed it"}

// checkSubscriptionURI refuses a URI longer than maxResourceURI.
func checkSubscriptionURI(uri string) error {
	if len(uri) > maxResourceURI {
		return &wire.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf(
			"resource URI of %d bytes: mcp-mux subscribes to URIs of at most %d bytes", len(uri), maxResourceURI)}
	}
	return nil
}

// checkListenURIs applies the per-session bounds to the resource URIs of a
// subscriptions/listen (a listen is a session of its own).
func checkListenURIs(uris []string) *jsonrpc.Error {
	if len(uris) > maxSessionSubscriptions {
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf(
			"subscriptions/listen names %d resource URIs: at most %d per listen", len(uris), maxSessionSubscriptions)}
	}
	for _, uri := range uris {
		var e *wire.Error
		if errors.As(checkSubscriptionURI(uri), &e) {
			return &jsonrpc.Error{Code: e.Code, Message: e.Message}
		}
	}
	return nil
}

// table returns server's table, made on first use.
func (s *subscriptions) table(server string) *subscriptionTable {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tables == nil {
		s.tables = make(map[string]*subscriptionTable)
	}
	t := s.tables[server]
	if t == nil {
		t = &subscriptionTable{uris: make(map[string]*uriSubscription)}
		s.tables[server] = t
	}
	return t
}

func (s *subscriptions) all() []*subscriptionTable {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*subscriptionTable, 0, len(s.tables))
	for _, t := range s.tables {
		out = append(out, t)
	}
	return out
}

// subscribe makes st a holder of uri on server (up) and returns once up
// holds the subscription, or with the reason it does not; a failed
// subscribe leaves st without the URI.
func (s *subscriptions) subscribe(ctx context.Context, st *session, server string, up *upstream.Upstream, uri string) error {
	if err := checkSubscriptionURI(uri); err != nil {
		return err
	}
	t := s.table(server)
	wait, added, err := t.hold(st, uri)
	if err != nil || !wait {
		return err
	}
	err = t.await(ctx, st, up, uri)
	if err != nil && added {
		if uerr := s.unsubscribe(ctx, st, uri); uerr != nil {
			return fmt.Errorf("%w (and unsubscribing again: %v)", err, uerr)
		}
	}
	return err
}

// unsubscribe releases st's hold on uri, in whichever table holds it, and
// unsubscribes the upstream when st was its last holder and no round trip
// is in flight (else the one in flight does when it ends). The error is
// the upstream's unsubscribe's, for the caller to log.
func (s *subscriptions) unsubscribe(ctx context.Context, st *session, uri string) error {
	st.mu.Lock()
	if !st.subs[uri] {
		st.mu.Unlock()
		return nil
	}
	delete(st.subs, uri)
	var left []*subscriptionTable
	for _, t := range s.all() {
		if t.drop(st, uri) {
			left = append(left, t)
		}
	}
	st.mu.Unlock()
	var errs []error
	for _, t := range left {
		t.mu.Lock()
		if e := t.uris[uri]; e != nil {
			errs = append(errs, t.settleLocked(ctx, uri, e))
		}
		t.mu.Unlock()
	}
	return errors.Join(errs...)
}

// unsubscribeAll releases every subscription of a closed session.
func (s *subscriptions) unsubscribeAll(ctx context.Context, st *session) error {
	var errs []error
	for _, uri := range st.subscriptions() {
		errs = append(errs, s.unsubscribe(ctx, st, uri))
	}
	return errors.Join(errs...)
}

// hold marks uri subscribed for st and counts st as its holder in t.
// wait: the caller waits for the upstream (await); added: this call made
// the hold (a session holds a URI once, however often it subscribes). A
// session holding the URI on another server's table has nothing to wait
// for. Past maxSessionSubscriptions it is refused.
func (t *subscriptionTable) hold(st *session, uri string) (wait, added bool, err error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.uris[uri]
	if st.subs[uri] {
		_, here := e.heldBy(st)
		return here, false, nil
	}
	if len(st.subs) >= maxSessionSubscriptions {
		return false, false, &wire.Error{Code: codeLimit, Message: fmt.Sprintf(
			"this session holds %d resource subscriptions, the most mcp-mux allows per session; unsubscribe from one first", len(st.subs))}
	}
	if st.subs == nil {
		st.subs = make(map[string]bool)
	}
	st.subs[uri] = true
	if e == nil {
		e = &uriSubscription{holders: make(map[*session]struct{})}
		t.uris[uri] = e
	}
	e.holders[st] = struct{}{}
	return true, true, nil
}

// heldBy reports whether st holds e (a nil e has no holders).
func (e *uriSubscription) heldBy(st *session) (*uriSubscription, bool) {
	if e == nil {
		return nil, false
	}
	_, ok := e.holders[st]
	return e, ok
}

// drop removes st from uri's holders; true when st was one. The caller
// settles the entry after letting go of st.mu.
func (t *subscriptionTable) drop(st *session, uri string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	e, ok := t.uris[uri].heldBy(st)
	if ok {
		delete(e.holders, st)
	}
	return ok
}

// await returns once up holds uri while st holds it: at once when it does,
// after the round trip in flight, or after subscribing itself when none
// is. A subscribe that failed fails its waiters too, unless it failed
// because its own caller went away (the next waiter then asks again).
func (t *subscriptionTable) await(ctx context.Context, st *session, up *upstream.Upstream, uri string) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	for {
		e, ok := t.uris[uri].heldBy(st)
		switch {
		case !ok:
			return errHoldLost
		case e.on == up && e.op == nil:
			return nil
		case e.op != nil:
			op := e.op
			t.mu.Unlock()
			select {
			case <-op.done:
			case <-ctx.Done():
				t.mu.Lock()
				return ctx.Err()
			}
			t.mu.Lock()
			if op.on && op.err != nil && !errors.Is(op.err, context.Canceled) && !errors.Is(op.err, context.DeadlineExceeded) {
				return op.err
			}
		default:
			err := t.roundTrip(ctx, e, up, uri, true)
			settleErr := t.settleLocked(ctx, uri, e)
			if err != nil {
				return err
			}
			if settleErr != nil {
				return settleErr
			}
		}
	}
}

// roundTrip asks up to subscribe to (on) or unsubscribe from uri, with
// t.mu released for the duration; e is the URI's entry, idle. Called and
// returns with t.mu held.
func (t *subscriptionTable) roundTrip(ctx context.Context, e *uriSubscription, up *upstream.Upstream, uri string, on bool) error {
	op := &subscribeOp{on: on, done: make(chan struct{})}
	e.op = op
	t.mu.Unlock()
	op.err = up.Subscribe(ctx, uri, on)
	t.mu.Lock()
	e.op = nil
	switch {
	case !on:
		e.on, e.stale = nil, nil // the upstream forgets it either way (Upstream.Subscribe)
	case op.err == nil:
		e.on, e.stale = up, nil
	case errors.Is(op.err, context.Canceled) || errors.Is(op.err, context.DeadlineExceeded):
		e.stale = up
	}
	close(op.done)
	return op.err
}

// settleLocked unsubscribes a URI nobody holds any more (from the upstream
// that holds it, or may), unless a round trip is in flight (its end
// settles), and forgets an idle entry without holders. Called and returns
// with t.mu held; the unsubscribe is bounded by notifyTimeout whether or
// not ctx is done.
func (t *subscriptionTable) settleLocked(ctx context.Context, uri string, e *uriSubscription) error {
	var err error
	if up := cmp.Or(e.on, e.stale); len(e.holders) == 0 && e.op == nil && up != nil {
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), notifyTimeout)
		err = t.roundTrip(uctx, e, up, uri, false)
		cancel()
	}
	if len(e.holders) == 0 && e.op == nil && e.on == nil && e.stale == nil && t.uris[uri] == e {
		delete(t.uris, uri)
	}
	return err
}
