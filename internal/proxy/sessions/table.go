package sessions

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/internal/admission"
	"github.com/mcp-mux/mcp-mux/internal/proxy/callpath"
	"github.com/mcp-mux/mcp-mux/internal/proxy/sessionhost"
	"github.com/mcp-mux/mcp-mux/internal/sessionstore"
	"github.com/mcp-mux/mcp-mux/internal/upstream"
	"github.com/mcp-mux/mcp-mux/internal/wire"
)

// Lookup returns the session id for caller c (its user and profile): this
// replica's, or one built from its record (one store round trip, shared by
// concurrent requests). It fails with sessionstore.ErrNotFound, a refusal
// (another user's, or one opened under another profile), or a store error
// (the store is unreachable: retryable); Refuse answers each.
func (t *Table) Lookup(ctx context.Context, id string, c callpath.Caller) (*callpath.Session, error) {
	e, err := t.find(ctx, id)
	if err != nil {
		return nil, err
	}
	st := e.st
	if st.User != c.User {
		return nil, errSessionForbidden
	}
	if st.Profile != c.Profile {
		return nil, errSessionProfile
	}
	return st, nil
}

// find returns the session id, whoever it belongs to.
func (t *Table) find(ctx context.Context, id string) (*entry, error) {
	if e := t.cache.get(id); e != nil {
		return e, nil
	}
	if !sessionstore.ValidID(id) {
		return nil, sessionstore.ErrNotFound
	}
	e, l, first := t.cache.join(id)
	switch {
	case e != nil:
		return e, nil
	case first:
		l.e, l.err = t.load(id, l)
		close(l.done)
	default:
		select {
		case <-l.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return l.e, l.err
}

// load reads the record of id and registers the session built from it;
// a change announced meanwhile (changed) is applied, so the session is
// never older than what the replica that changed it answered with.
func (t *Table) load(id string, l *recordLoad) (*entry, error) {
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	rec, err := t.store.Get(ctx, id)
	if err != nil {
		t.cache.abandon(id)
		return nil, err
	}
	if h := t.hooks.Load(); h != nil && h.AfterRead != nil {
		h.AfterRead(id)
	}
	added := t.add(t.build(rec))
	e, latest, ended, reread := t.cache.finish(id, l)
	switch {
	case ended: // a DELETE won the race: the record read is no more
		t.forget(id)
		return nil, sessionstore.ErrNotFound
	case !added || e == nil:
		return nil, errSessionClosing
	}
	if latest != nil {
		t.apply(e, latest) // its fields unless older than what e has
	}
	if reread {
		t.bg.Go(func() { t.reload(id) })
	}
	return e, nil
}

// Create opens a new session of caller c whose initialize carries params:
// its record is admitted within inbound.max_sessions and the caller's
// share (a *sessionstore.LimitError past either), stored, and registered
// here with its resident SDK session, whose lease the caller releases.
func (t *Table) Create(ctx context.Context, c callpath.Caller, params json.RawMessage) (*callpath.Session, *sessionhost.Lease, error) {
	if len(params) > sessionstore.MaxInit {
		return nil, nil, &wire.Error{Code: -32602, Message: "initialize params are too large"}
	}
	var ip struct {
		ProtocolVersion string `json:"protocolVersion"`
	}
	_ = json.Unmarshal(params, &ip)
	rec := &sessionstore.Record{ID: sessionstore.NewID(), User: c.User, Profile: c.Profile, Protocol: sessionhost.Negotiate(ip.ProtocolVersion), Init: params}
	b := admission.Of(&t.rt.Load().Config.Inbound).Sessions
	if h := t.hooks.Load(); h != nil && h.BeforeCreate != nil {
		h.BeforeCreate()
	}
	sctx, cancel := context.WithTimeout(ctx, storeTimeout)
	defer cancel()
	if err := t.store.Create(sctx, rec, sessionstore.Bounds{Limit: b.Limit, Share: b.Share}); err != nil {
		return nil, nil, err
	}
	e := t.build(rec)
	if !t.add(e) {
		t.forget(rec.ID)
		return nil, nil, errSessionClosing
	}
	lease, err := t.host.Create(rec.ID)
	if err != nil {
		t.forget(rec.ID)
		return nil, nil, errSessionClosing
	}
	return e.st, lease, nil
}

// Resident returns a lease of st's resident SDK session, rebuilt from st
// when it is not resident; the caller releases it.
func (t *Table) Resident(st *callpath.Session) (*sessionhost.Lease, error) {
	lease, err := t.host.Open(st.ID, func() *mcp.ServerSessionState { return state(st) })
	if err != nil {
		return nil, errSessionClosing
	}
	return lease, nil
}

// Ephemeral serves a POST that names no session and is no initialize, as
// go-sdk's handler answers it.
func (t *Table) Ephemeral(w http.ResponseWriter, r *http.Request) { t.host.Ephemeral(w, r) }

// Negotiated records the version the SDK's initialize result res names,
// when it is not the one Create assumed.
func (t *Table) Negotiated(st *callpath.Session, res mcp.Result) {
	ir, ok := res.(*mcp.InitializeResult)
	if !ok || ir.ProtocolVersion == "" || ir.ProtocolVersion == st.Protocol {
		return
	}
	st.Protocol = ir.ProtocolVersion
	id, fn := st.ID, sessionstore.SetProtocol(ir.ProtocolVersion)
	t.bg.Go(func() { // off the request's path
		ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
		defer cancel()
		if _, err := t.store.Update(ctx, id, fn); err != nil && !errors.Is(err, sessionstore.ErrNotFound) {
			t.log.Warn("recording a session change failed", "err", err)
		}
	})
}

// build returns the session of rec as this replica serves it.
func (t *Table) build(rec *sessionstore.Record) *entry {
	st := &callpath.Session{ID: rec.ID, User: rec.User, Profile: rec.Profile, Send: t.send, Replica: t.replica}
	e := &entry{st: st}
	id := rec.ID
	st.Outbox = func(ctx context.Context, msg json.RawMessage) error { return t.store.Append(ctx, id, msg) }
	st.OnThread = func(digest string) { // off the request's path
		t.bg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
			defer cancel()
			if _, _, err := t.store.Add(ctx, id, sessionstore.ListThreads, digest); err != nil && !errors.Is(err, sessionstore.ErrNotFound) {
				t.log.Warn("recording a session's thread failed", "err", err)
			}
		})
	}
	st.Refresh = func() bool { return t.refresh(e) }
	st.OnPromote = func(ctx context.Context, names []string) error {
		ctx, cancel := context.WithTimeout(ctx, storeTimeout)
		defer cancel()
		rec, _, err := t.store.Add(ctx, id, sessionstore.ListPromoted, names...)
		if err == nil {
			t.apply(e, rec)
		}
		return err
	}
	st.Protocol, st.Init = rec.Protocol, decodeInit(rec.Init)
	if st.Init.Capabilities != nil {
		st.Caps, st.ClientCaps = upstream.Capabilities(st.Init.Capabilities), st.Init.Capabilities
	}
	t.apply(e, rec)
	e.started = time.Now()
	st.Touch()
	return e
}

// apply brings e up to date with its record (or a change of it): what
// its lists hold (or gained) is added, its fields are applied unless e
// has seen a newer revision of them.
func (t *Table) apply(e *entry, rec *sessionstore.Record) {
	st := e.st
	st.AddThreads(rec.Threads)
	if len(rec.Promoted) > 0 {
		st.Promo.Add(t.rt.Load().View(st.Profile), rec.Promoted)
	}
	for {
		cur := e.rev.Load()
		if rec.Rev < cur {
			return
		}
		if e.rev.CompareAndSwap(cur, rec.Rev) {
			break
		}
	}
	if rec.Level != "" {
		st.SetLevel(rec.Level)
	}
	t.holder.applyHolder(st, rec)
}

// decodeInit decodes initialize params as go-sdk does: its
// ClientCapabilities keep the roots capability in RootsV2, which
// encoding/json alone leaves empty (go-sdk #607).
func decodeInit(raw json.RawMessage) *mcp.InitializeParams {
	ip := &mcp.InitializeParams{}
	_ = json.Unmarshal(raw, ip)
	var v2 struct {
		Capabilities struct {
			Roots *mcp.RootCapabilities `json:"roots"`
		} `json:"capabilities"`
	}
	if json.Unmarshal(raw, &v2) == nil && ip.Capabilities != nil && v2.Capabilities.Roots != nil {
		ip.Capabilities.RootsV2 = v2.Capabilities.Roots
		ip.Capabilities.Roots = *v2.Capabilities.Roots
	}
	return ip
}

// state is the SDK session state of st, to rebuild its resident session
// from: initialized, on its negotiated version and logging level.
func state(st *callpath.Session) *mcp.ServerSessionState {
	return &mcp.ServerSessionState{InitializeParams: st.Init, InitializedParams: &mcp.InitializedParams{},
		NegotiatedProtocolVersion: st.Protocol, LogLevel: mcp.LoggingLevel(st.LogLevel())}
}

// add registers e unless Close has begun or another request registered
// it first (then that one stays); it reports whether the table is open.
func (t *Table) add(e *entry) bool {
	return t.gate.Exclusive(func() { t.cache.put(e) })
}

// sessionsOf returns the sessions of es.
func sessionsOf(es []*entry) []*callpath.Session {
	out := make([]*callpath.Session, len(es))
	for i, e := range es {
		out[i] = e.st
	}
	return out
}

// Get returns this replica's session id, or nil.
func (t *Table) Get(id string) *callpath.Session {
	if e := t.cache.get(id); e != nil {
		return e.st
	}
	return nil
}

// Count returns the number of sessions this replica keeps.
func (t *Table) Count() int { return t.cache.count() }

// Total returns the number of sessions of every replica (this replica's
// when the store does not answer).
func (t *Table) Total() int {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if n, err := t.store.Count(ctx); err == nil {
		return n
	}
	return t.cache.count()
}

// All returns the sessions this replica keeps.
func (t *Table) All() []*callpath.Session { return sessionsOf(t.cache.all()) }

// Held returns the sessions this replica holds (their GET stream is
// here): those that hear of what every replica learns at once.
func (t *Table) Held() []*callpath.Session { return sessionsOf(t.cache.holding()) }

// WithKey returns the sessions that called upstreams as key here.
func (t *Table) WithKey(key upstream.Key) []*callpath.Session {
	var out []*callpath.Session
	for _, e := range t.cache.all() {
		if e.st.HasKey(key) {
			out = append(out, e.st)
		}
	}
	return out
}

// Touch records a request of st: for the idle timeout here, and for its
// record's TTL (the store batches those).
func (t *Table) Touch(st *callpath.Session) {
	st.Touch()
	t.store.Touch(st.ID, st.User)
}

// Remove ends the session id everywhere (DELETE): its record goes, every
// replica releases what it held for it.
func (t *Table) Remove(ctx context.Context, id string) error {
	if e := t.cache.get(id); e != nil {
		e.st.Cancel() // its requests in flight end first
	}
	ctx, cancel := context.WithTimeout(ctx, storeTimeout)
	defer cancel()
	err := t.store.Delete(ctx, id)
	if e := t.cache.get(id); e != nil {
		t.tel.SessionEnded(e.started, e.st.Protocol)
	}
	t.forget(id)
	return err
}

// forget releases what this replica holds for the session id: its
// requests in flight are cancelled, its resident SDK session closed, its
// subscriptions and upstream call sessions released (in the background).
func (t *Table) forget(id string) {
	e := t.cache.take(id)
	t.host.End(id)
	if e == nil {
		return
	}
	st := e.st
	st.Cancel()
	t.bg.Go(func() {
		t.calls.DropSubscriptions(st)
		for _, b := range t.rt.Load().Backends {
			b.Up.ReleaseThread(st.ID)
		}
	})
}

// Notify sends st a notification outside any request: through its event
// log, to its GET stream on whichever replica.
func (t *Table) Notify(st *callpath.Session, method string, params json.RawMessage) {
	if method == "notifications/message" && !st.WantsLog(params) {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), callpath.NotifyTimeout)
	defer cancel()
	if err := st.Outbox(ctx, wire.AppendNotification(nil, method, params)); err != nil {
		t.log.Debug("notification not delivered", "method", method, "session", st.ID, "err", err)
	}
}

// Record applies fn to st's record now (a change other replicas must see
// before this request is answered), and to st.
func (t *Table) Record(ctx context.Context, st *callpath.Session, fn func(*sessionstore.Record) bool) error {
	ctx, cancel := context.WithTimeout(ctx, storeTimeout)
	defer cancel()
	rec, err := t.store.Update(ctx, st.ID, fn)
	if err != nil {
		return err
	}
	t.apply(t.cache.entryOf(st), rec)
	return nil
}
