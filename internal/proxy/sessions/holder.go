package sessions

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/internal/proxy/callpath"
	"github.com/mcp-mux/mcp-mux/internal/sessionstore"
	"github.com/mcp-mux/mcp-mux/internal/subscriptions"
	"github.com/mcp-mux/mcp-mux/internal/wire"
	"github.com/mcp-mux/mcp-mux/internal/wire/mcpwire"
)

// The holder of a session: the replica that serves (or last served) its
// GET stream, named in the session's record. A replica that opens the
// session's GET stream takes it over.
//
// Messages that every replica learns of at once (a reload's list_changed,
// a durable task's event) are logged for a session only by its holder, so
// each reaches the session once; a message of one session alone (a
// promotion's list_changed, an upstream's log or request) is logged by the
// replica where it happens.
//
// The holder also holds the session's upstream resource subscriptions (the
// URIs are in the record): a resources/subscribe on any replica records
// the URI and has the holder subscribe (msgSubscribe; the replica that got
// it subscribes itself when no replica holds the session or its holder is
// gone). A replica that becomes the holder subscribes to what the record
// lists; one that sees another take over drops its own.

// msgSubscribe asks the holder to subscribe (or unsubscribe) a session.
const msgSubscribe = "subscribe"

// subscribeBody is a msgSubscribe's request.
type subscribeBody struct {
	URI string `json:"uri"`
	On  bool   `json:"on"`
}

// replyBody is the answer to a request another replica ran.
type replyBody struct {
	Error *wire.Error `json:"error,omitempty"`
}

// forwardTimeout bounds a request another replica runs for this one.
const forwardTimeout = 10 * time.Second

// holder is the table's side of the holder protocol.
type holder struct{ t *Table }

// Subscribe serves a session's resources/subscribe (on) or unsubscribe:
// the URI goes into its record, and its holder subscribes.
func (t *Table) Subscribe(ctx context.Context, st *callpath.Session, uri string, on bool) (mcp.Result, error) {
	return t.holder.subscribe(ctx, st, uri, on)
}

// hold makes this replica the holder of st (its GET stream opened here)
// and, when it was not, subscribes it to what its record lists (in the
// background).
func (h *holder) hold(st *callpath.Session) {
	t := h.t
	if t.cache.hold(st.ID) {
		return
	}
	t.bg.Go(func() {
		ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
		defer cancel()
		// Subscribe first, then take over: the replica that held the
		// subscriptions drops them when it sees the new holder, and by then
		// they are held here (but for one made in between, taken up after).
		if rec, err := t.store.Get(ctx, st.ID); err == nil {
			h.adopt(ctx, st, rec.Subs)
		}
		if _, err := t.store.Update(ctx, st.ID, sessionstore.SetHolder(t.replica, true)); err != nil {
			t.log.Debug("taking over a session's stream", "session", st.ID, "err", err)
			return
		}
		if rec, err := t.store.Get(ctx, st.ID); err == nil {
			h.adopt(ctx, st, rec.Subs)
		}
	})
}

// adopt subscribes st here to the URIs it does not hold yet.
func (h *holder) adopt(ctx context.Context, st *callpath.Session, uris []string) {
	t := h.t
	for _, uri := range uris {
		if !st.Subs.Has(uri) {
			if _, err := t.calls.SubscribeURI(ctx, st, uri, true); err != nil {
				t.log.Debug("resubscribing a session taken over", "session", st.ID, "err", err)
			}
		}
	}
}

// applyHolder notes who holds the session of rec: when another replica
// took it over, this one stops holding it and drops its subscriptions.
func (h *holder) applyHolder(st *callpath.Session, rec *sessionstore.Record) {
	t := h.t
	if rec.Holder == t.replica || rec.Holder == "" {
		return
	}
	t.cache.unhold(rec.ID)
	if len(st.Subs.URIs()) > 0 {
		t.bg.Go(func() { t.calls.DropSubscriptions(st) })
	}
}

// subscribe records a subscribe (on) or unsubscribe of st to uri and has
// the holder of st run it (this replica when none holds st). A subscribe
// is checked against the limits rules first, so a refused one is never
// recorded (nor taken up by a later holder).
func (h *holder) subscribe(ctx context.Context, st *callpath.Session, uri string, on bool) (mcp.Result, error) {
	t := h.t
	var we *wire.Error
	if err := subscriptions.CheckURI(uri); errors.As(err, &we) { // before the record keeps it
		return nil, &jsonrpc.Error{Code: we.Code, Message: we.Message}
	}
	if on { // the limits rules, before the record keeps it
		release, refused := t.calls.AdmitSubscribe(ctx, st, uri)
		if refused != nil {
			return nil, refused
		}
		defer release()
	}
	sctx, cancel := context.WithTimeout(ctx, storeTimeout)
	var rec *sessionstore.Record
	var err error
	if on {
		rec, _, err = t.store.Add(sctx, st.ID, sessionstore.ListSubs, uri)
	} else {
		rec, err = t.store.Remove(sctx, st.ID, sessionstore.ListSubs, uri)
	}
	cancel()
	if err != nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "recording the subscription failed (the session store is unreachable); retry"}
	}
	if rec.Holder == "" || rec.Holder == t.replica {
		return t.calls.SubscribeURI(ctx, st, uri, on)
	}
	body, _ := json.Marshal(subscribeBody{URI: uri, On: on})
	fctx, cancel := context.WithTimeout(ctx, forwardTimeout)
	defer cancel()
	reply, err := t.x.Call(fctx, t.store, rec.Holder, sessionstore.Message{Kind: msgSubscribe, Session: st.ID, Body: body})
	switch {
	case errors.Is(err, sessionstore.ErrNoReplica): // the holder is gone: the next one subscribes again
		return t.calls.SubscribeURI(ctx, st, uri, on)
	case err != nil:
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("the replica serving this session's stream did not subscribe: %v; retry", err)}
	}
	var rb replyBody
	if json.Unmarshal(reply.Body, &rb) == nil && rb.Error != nil {
		return nil, &jsonrpc.Error{Code: rb.Error.Code, Message: rb.Error.Message}
	}
	return &mcpwire.RawResult{Raw: json.RawMessage(`{}`)}, nil
}

// subscribeHere runs another replica's msgSubscribe for a session this one
// holds, and replies.
func (h *holder) subscribeHere(m sessionstore.Message) {
	t := h.t
	t.bg.Go(func() {
		ctx, cancel := context.WithTimeout(context.Background(), forwardTimeout)
		defer cancel()
		var rb replyBody
		var b subscribeBody
		e, err := t.find(ctx, m.Session)
		if err == nil {
			err = json.Unmarshal(m.Body, &b)
		}
		if err == nil {
			_, err = t.calls.SubscribeURI(ctx, e.st, b.URI, b.On)
		}
		if err != nil {
			rb.Error = &wire.Error{Code: jsonrpc.CodeInternalError, Message: err.Error()}
			var je *jsonrpc.Error
			if errors.As(err, &je) {
				rb.Error.Code, rb.Error.Message = je.Code, je.Message
			}
		}
		body, _ := json.Marshal(rb)
		if err := sessionstore.Reply(ctx, t.store, m, body); err != nil {
			t.log.Debug("replying to another replica", "err", err)
		}
	})
}
