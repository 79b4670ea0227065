package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/internal/admission"
	"github.com/mcp-mux/mcp-mux/internal/config"
	"github.com/mcp-mux/mcp-mux/internal/proxy/callpath"
	"github.com/mcp-mux/mcp-mux/internal/proxy/sessionhost"
	"github.com/mcp-mux/mcp-mux/internal/sessionstore"
	"github.com/mcp-mux/mcp-mux/internal/telemetry"
	"github.com/mcp-mux/mcp-mux/internal/upstream"
	"github.com/mcp-mux/mcp-mux/internal/wire"
)

// sessionTable is this replica's view of the 2025-11-25 sessions. A
// session is its record in the store (package sessionstore: in process, or
// in Redis shared by every replica); a replica that serves a request of a
// session it has not seen loads the record once and keeps a
// callpath.Session built from it (the cache, kept fresh by the store's
// change notices) for as long as the session is used here. What the
// session holds on this replica (calls in flight, upstream call sessions,
// subscriptions, the SDK's resident session) is released when the session
// ends (DELETE, on any replica), or when it was idle here for the idle
// timeout.
type sessionTable struct {
	store   sessionstore.Store
	x       sessionstore.Exchange // requests to other replicas (holder.go)
	host    *sessionhost.Host
	replica string

	mu      sync.RWMutex
	byID    map[string]*callpath.Session
	loads   map[string]*recordLoad            // record reads in flight, one per id
	held    map[string]bool                   // sessions this replica holds (holder.go)
	streams map[string]*sessionstore.Follower // the GET stream of each session here
	// streamStop is closed by Drain or Close: GET streams end, their
	// clients resume on another replica.
	streamStop chan struct{}

	send  mcp.MethodHandler // the SDK's sending handler (in-request notifications)
	gate  *callpath.Life    // orders registration against Close
	wg    sync.WaitGroup    // session cleanups and background record writes (goBackground)
	bgMu  sync.Mutex        // orders goBackground against waitBackground
	bgEnd bool              // waitBackground has begun
	rt    *atomic.Pointer[callpath.Runtime]
	calls *callpath.Router
	log   hclog.Logger
	tel   *telemetry.Telemetry // the session duration metric
	// threadless is Options.ThreadlessIdle: when an idle session that
	// names no thread gives up its stdio call sessions.
	threadless time.Duration
	// recheckEvery is Options.SessionRecheck: how often the sessions here
	// are checked against their records (recheck).
	recheckEvery time.Duration

	// beforeCreate, when set (by tests only, export_test.go), runs in
	// create before the store admits the record: a test holds creates
	// there to put them in flight together.
	beforeCreate atomic.Pointer[func()]
	// afterRead, when set (by tests only, export_test.go), runs in load
	// once the record was read, before the session is registered: a test
	// holds a first load there to race it against a DELETE.
	afterRead atomic.Pointer[func(id string)]
}

// recordLoad is one read of a record that concurrent requests share.
type recordLoad struct {
	done chan struct{}
	st   *callpath.Session
	err  error
	// latest is what changes another replica announced while the record
	// was being read (under sessionTable.mu): applied after; reread says
	// one did not carry what changed.
	latest *sessionstore.Record
	reread bool
	// ended is set (under sessionTable.mu) when the session ended while
	// its record was being read: the load registers nothing.
	ended bool
}

// note keeps a change announced while the record is being read (under
// sessionTable.mu): the newest fields and everything the lists gained; a
// change too large for its notice (nil) has the record read again.
func (l *recordLoad) note(c *sessionstore.Record) {
	if c == nil {
		c = &sessionstore.Record{} // Rev 0: no fields, and a reread
		l.reread = true
	}
	if l.latest == nil {
		l.latest = c.Clone()
		return
	}
	merged := c.Clone()
	if l.latest.Rev > c.Rev {
		merged = l.latest.Clone()
	}
	merged.Threads = append(l.latest.Threads, c.Threads...)
	merged.Promoted = append(l.latest.Promoted, c.Promoted...)
	l.latest = merged
}

// storeTimeout bounds one store operation on a request's path.
const storeTimeout = 5 * time.Second

// defaultSessionRecheck is Options.SessionRecheck's default: a session
// DELETEd on another replica whose notice this one missed answers 404
// here within it.
const defaultSessionRecheck = 10 * time.Second

// Session lookup errors (host.go answers each with its status).
var (
	errSessionForbidden = errors.New("this session belongs to another user")
	errSessionProfile   = errors.New("this session serves another profile")
	errSessionClosing   = errors.New("mcp-mux is shutting down")
)

// lookup returns the session id for caller c (its user and profile): this replica's, or one built from its record (one store round
// trip, shared by concurrent requests). It fails with
// sessionstore.ErrNotFound, errSessionForbidden (another user's, or one
// opened under another profile), or a store error (the store is
// unreachable: retryable).
func (t *sessionTable) lookup(ctx context.Context, id string, c callpath.Caller) (*callpath.Session, error) {
	st, err := t.find(ctx, id)
	if err != nil {
		return nil, err
	}
	if st, err = owned(st, c.User); err == nil && st.Profile != c.Profile {
		return nil, errSessionProfile
	}
	return st, err
}

// find returns the session id, whoever it belongs to.
func (t *sessionTable) find(ctx context.Context, id string) (*callpath.Session, error) {
	if st := t.get(id); st != nil {
		return st, nil
	}
	if !sessionstore.ValidID(id) {
		return nil, sessionstore.ErrNotFound
	}
	t.mu.Lock()
	if st := t.byID[id]; st != nil {
		t.mu.Unlock()
		return st, nil
	}
	if t.loads == nil {
		t.loads = make(map[string]*recordLoad)
	}
	l := t.loads[id]
	if l == nil {
		l = &recordLoad{done: make(chan struct{})}
		t.loads[id] = l
		t.mu.Unlock()
		l.st, l.err = t.load(id, l)
		close(l.done)
	} else {
		t.mu.Unlock()
		select {
		case <-l.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return l.st, l.err
}

func owned(st *callpath.Session, user string) (*callpath.Session, error) {
	if st.User != user {
		return nil, errSessionForbidden
	}
	return st, nil
}

// load reads the record of id and registers the session built from it;
// a change announced meanwhile (changed) is applied, so the session is
// never older than what the replica that changed it answered with.
func (t *sessionTable) load(id string, l *recordLoad) (*callpath.Session, error) {
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	rec, err := t.store.Get(ctx, id)
	if err != nil {
		t.mu.Lock()
		delete(t.loads, id)
		t.mu.Unlock()
		return nil, err
	}
	if hold := t.afterRead.Load(); hold != nil {
		(*hold)(id)
	}
	st := t.build(rec)
	added := t.add(st)
	t.mu.Lock()
	delete(t.loads, id)
	latest, ended, reread := l.latest, l.ended, l.reread
	st = t.byID[id]
	t.mu.Unlock()
	switch {
	case ended: // a DELETE won the race: the record read is no more
		t.forget(id)
		return nil, sessionstore.ErrNotFound
	case !added || st == nil:
		return nil, errSessionClosing
	}
	if latest != nil {
		t.apply(st, latest) // its fields unless older than what st has
	}
	if reread {
		t.goBackground(func() { t.reload(id) })
	}
	return st, nil
}

// create opens a new session of user whose initialize carries params:
// its record is admitted within inbound.max_sessions and the caller's
// share (a *sessionstore.LimitError past either), stored, and registered here.
func (t *sessionTable) create(ctx context.Context, user, profile string, params json.RawMessage) (*callpath.Session, error) {
	if len(params) > sessionstore.MaxInit {
		return nil, &wire.Error{Code: -32602, Message: "initialize params are too large"}
	}
	var ip struct {
		ProtocolVersion string `json:"protocolVersion"`
	}
	_ = json.Unmarshal(params, &ip)
	rec := &sessionstore.Record{ID: sessionstore.NewID(), User: user, Profile: profile, Protocol: sessionhost.Negotiate(ip.ProtocolVersion), Init: params}
	b := admission.Of(&t.rt.Load().Config.Inbound).Sessions
	if hold := t.beforeCreate.Load(); hold != nil {
		(*hold)()
	}
	ctx, cancel := context.WithTimeout(ctx, storeTimeout)
	defer cancel()
	if err := t.store.Create(ctx, rec, sessionstore.Bounds{Limit: b.Limit, Share: b.Share}); err != nil {
		return nil, err
	}
	st := t.build(rec)
	if !t.add(st) {
		t.forget(rec.ID)
		return nil, errSessionClosing
	}
	return st, nil
}

// negotiated records the version the SDK's initialize result res names,
// when it is not the one create assumed.
func (t *sessionTable) negotiated(st *callpath.Session, res mcp.Result) {
	ir, ok := res.(*mcp.InitializeResult)
	if !ok || ir.ProtocolVersion == "" || ir.ProtocolVersion == st.Protocol {
		return
	}
	st.Protocol = ir.ProtocolVersion
	t.background(st.ID, sessionstore.SetProtocol(ir.ProtocolVersion))
}

// build returns the session of rec as this replica serves it.
func (t *sessionTable) build(rec *sessionstore.Record) *callpath.Session {
	st := &callpath.Session{ID: rec.ID, User: rec.User, Profile: rec.Profile, Send: t.send, Replica: t.replica}
	id := rec.ID
	st.Outbox = func(ctx context.Context, msg json.RawMessage) error { return t.store.Append(ctx, id, msg) }
	st.OnThread = func(digest string) { // off the request's path
		t.goBackground(func() {
			ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
			defer cancel()
			if _, _, err := t.store.Add(ctx, id, sessionstore.ListThreads, digest); err != nil && !errors.Is(err, sessionstore.ErrNotFound) {
				t.log.Warn("recording a session's thread failed", "err", err)
			}
		})
	}
	st.Refresh = func() bool { return t.refresh(st) }
	st.OnPromote = func(ctx context.Context, names []string) error {
		ctx, cancel := context.WithTimeout(ctx, storeTimeout)
		defer cancel()
		rec, _, err := t.store.Add(ctx, id, sessionstore.ListPromoted, names...)
		if err == nil {
			t.apply(st, rec)
		}
		return err
	}
	st.Protocol, st.Init = rec.Protocol, decodeInit(rec.Init)
	if st.Init.Capabilities != nil {
		st.Caps, st.ClientCaps = upstream.Capabilities(st.Init.Capabilities), st.Init.Capabilities
	}
	t.apply(st, rec)
	st.Started = time.Now()
	st.Touch()
	return st
}

// apply brings st up to date with its record (or a change of it): what
// its lists hold (or gained) is added, its fields are applied unless st
// has seen a newer revision of them.
func (t *sessionTable) apply(st *callpath.Session, rec *sessionstore.Record) {
	st.AddThreads(rec.Threads)
	if len(rec.Promoted) > 0 {
		st.Promo.Add(t.rt.Load().View(st.Profile), rec.Promoted)
	}
	for {
		cur := st.Rev.Load()
		if rec.Rev < cur {
			return
		}
		if st.Rev.CompareAndSwap(cur, rec.Rev) {
			break
		}
	}
	if rec.Level != "" {
		st.SetLevel(rec.Level)
	}
	t.applyHolder(st, rec)
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

// goBackground runs fn on the table's background group, unless Close is
// already waiting for it (a change notice can arrive meanwhile: its work
// is moot then, and starting it would race the wait).
func (t *sessionTable) goBackground(fn func()) {
	t.bgMu.Lock()
	defer t.bgMu.Unlock()
	if !t.bgEnd {
		t.wg.Go(fn)
	}
}

// waitBackground stops new background work and waits for what runs.
func (t *sessionTable) waitBackground() {
	t.bgMu.Lock()
	t.bgEnd = true
	t.bgMu.Unlock()
	t.wg.Wait()
}

// background applies fn to the record of id off the request's path.
func (t *sessionTable) background(id string, fn func(*sessionstore.Record) bool) {
	t.goBackground(func() {
		ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
		defer cancel()
		if _, err := t.store.Update(ctx, id, fn); err != nil && !errors.Is(err, sessionstore.ErrNotFound) {
			t.log.Warn("recording a session change failed", "err", err)
		}
	})
}

// add registers st unless Close has begun or another request registered
// it first (then that one stays); it reports whether the table is open.
func (t *sessionTable) add(st *callpath.Session) bool {
	return t.gate.Exclusive(func() {
		t.mu.Lock()
		defer t.mu.Unlock()
		if t.byID == nil {
			t.byID = make(map[string]*callpath.Session)
		}
		if t.byID[st.ID] == nil {
			t.byID[st.ID] = st
		}
	})
}

func (t *sessionTable) get(id string) *callpath.Session {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.byID[id]
}

func (t *sessionTable) count() int {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return len(t.byID)
}

// total returns the number of sessions of every replica (this replica's
// when the store does not answer).
func (t *sessionTable) total() int {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if n, err := t.store.Count(ctx); err == nil {
		return n
	}
	return t.count()
}

func (t *sessionTable) all() []*callpath.Session {
	t.mu.RLock()
	defer t.mu.RUnlock()
	out := make([]*callpath.Session, 0, len(t.byID))
	for _, st := range t.byID {
		out = append(out, st)
	}
	return out
}

// touch records a request of st: for the idle timeout here, and for its
// record's TTL (the store batches those).
func (t *sessionTable) touch(st *callpath.Session) {
	st.Touch()
	t.store.Touch(st.ID, st.User)
}

// remove ends the session id everywhere (DELETE): its record goes, every
// replica releases what it held for it.
func (t *sessionTable) remove(ctx context.Context, id string) error {
	if st := t.get(id); st != nil {
		st.Cancel() // its requests in flight end first
	}
	ctx, cancel := context.WithTimeout(ctx, storeTimeout)
	defer cancel()
	err := t.store.Delete(ctx, id)
	if st := t.get(id); st != nil {
		t.tel.SessionEnded(st.Started, st.Protocol)
	}
	t.forget(id)
	return err
}

// forget releases what this replica holds for the session id: its
// requests in flight are cancelled, its resident SDK session closed, its
// subscriptions and upstream call sessions released (in the background).
func (t *sessionTable) forget(id string) {
	t.mu.Lock()
	st := t.byID[id]
	delete(t.byID, id)
	delete(t.held, id)
	t.mu.Unlock()
	t.host.End(id)
	if st == nil {
		return
	}
	st.Cancel()
	t.goBackground(func() {
		t.calls.DropSubscriptions(st)
		for _, b := range t.rt.Load().Backends {
			b.Up.ReleaseThread(st.ID)
		}
	})
}

// notify sends st a notification outside any request: through its event
// log, to its GET stream on whichever replica.
func (t *sessionTable) notify(st *callpath.Session, method string, params json.RawMessage) {
	if method == "notifications/message" && !st.WantsLog(params) {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), callpath.NotifyTimeout)
	defer cancel()
	if err := st.Outbox(ctx, wire.AppendNotification(nil, method, params)); err != nil {
		t.log.Debug("notification not delivered", "method", method, "session", st.ID, "err", err)
	}
}

// reap sweeps the sessions at least every second (sweep), so that a
// reload's new idle timeout applies soon, and rechecks them against their
// records every recheckEvery (recheck).
func (t *sessionTable) reap(ctx context.Context) {
	timer := time.NewTimer(0)
	defer timer.Stop()
	checked := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-timer.C:
			timeout := t.sweep(now)
			next := min(max(min(timeout, t.threadless)/8, 10*time.Millisecond), time.Second, t.recheckEvery)
			if now.Sub(checked) >= t.recheckEvery {
				checked = now
				t.goBackground(t.recheck)
			}
			timer.Reset(next)
		}
	}
}

// sweep lets go of the sessions idle here for longer than
// inbound.session_idle_timeout_seconds (of the config applied now; by
// then their records have expired too, unless another replica kept them
// in use), and releases the stdio call sessions of idle sessions that name
// no thread (Options.ThreadlessIdle). It returns the idle timeout it applied.
func (t *sessionTable) sweep(now time.Time) time.Duration {
	rt := t.rt.Load()
	timeout := rt.Config.Inbound.SessionIdleTimeout
	if timeout <= 0 {
		timeout = defaultSessionTimeout
	}
	// In process, the sessions of the only replica end here (their records
	// do not expire on their own); shared, their records expire TTL after
	// their last use on any replica.
	local, _ := t.store.(*sessionstore.Local)
	if local == nil {
		t.store.SetTTL(timeout)
	}
	for _, st := range t.all() {
		idle := now.Sub(time.Unix(0, st.LastSeen.Load()))
		switch {
		case idle > timeout:
			t.log.Debug("closing idle session", "session", st.ID)
			if local != nil {
				_ = local.Delete(context.Background(), st.ID)
				t.tel.SessionEnded(st.Started, st.Protocol)
			}
			t.forget(st.ID)
		case idle > t.threadless && !st.Busy() && st.ReleaseOwnThread():
			for _, b := range rt.Backends {
				if b.Config != nil && b.Config.Type == config.TypeStdio {
					b.Up.ReleaseIdleThread(st.ID)
				}
			}
		}
	}
	return timeout
}

// withKey returns the sessions that called upstreams as key here.
func (t *sessionTable) withKey(key upstream.Key) []*callpath.Session {
	var out []*callpath.Session
	for _, st := range t.all() {
		if st.HasKey(key) {
			out = append(out, st)
		}
	}
	return out
}

// changed applies a record change another replica made: the session
// ended (a load of it in flight registers nothing), or its record changed
// (the notice carries what changed; without, it is read again in the
// background).
func (t *sessionTable) changed(c sessionstore.Change) {
	if c.Ended {
		t.mu.Lock()
		if l := t.loads[c.ID]; l != nil {
			l.ended = true
		}
		t.mu.Unlock()
		t.forget(c.ID)
		return
	}
	t.mu.Lock()
	st := t.byID[c.ID]
	if l := t.loads[c.ID]; st == nil && l != nil {
		l.note(c.Record) // being read: applied once it is (load)
	}
	t.mu.Unlock()
	switch {
	case st == nil:
	case c.Record != nil:
		t.apply(st, c.Record)
	default:
		t.goBackground(func() { t.reload(c.ID) })
	}
}

// record applies fn to st's record now (a change other replicas must see
// before this request is answered), and to st.
func (t *sessionTable) record(ctx context.Context, st *callpath.Session, fn func(*sessionstore.Record) bool) error {
	ctx, cancel := context.WithTimeout(ctx, storeTimeout)
	defer cancel()
	rec, err := t.store.Update(ctx, st.ID, fn)
	if err != nil {
		return err
	}
	t.apply(st, rec)
	return nil
}

// recheck checks the sessions this replica keeps against their records
// (one store round trip per few hundred): a session whose record is gone
// (its end went unheard, or it expired) is let go of, one whose record
// is newer is read again. It runs every recheckEvery and when the store
// reconnects (changes and ends may have gone unheard while its link was
// down), so that a DELETE answered 204 means 404 here within recheckEvery
// even when its notice was lost.
func (t *sessionTable) recheck() {
	if _, local := t.store.(*sessionstore.Local); local {
		return // in process, every end is seen at once
	}
	sessions := t.all()
	if len(sessions) == 0 {
		return
	}
	ids := make([]string, len(sessions))
	for i, st := range sessions {
		ids[i] = st.ID
	}
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	revs, err := t.store.Revisions(ctx, ids)
	if err != nil {
		t.log.Debug("checking sessions against their records", "err", err)
		return
	}
	for _, st := range sessions {
		rev, ok := revs[st.ID]
		switch {
		case !ok:
			t.log.Debug("letting go of a session whose record is gone", "session", st.ID)
			t.forget(st.ID)
		case rev > st.Rev.Load():
			t.reload(st.ID)
		}
	}
}

// refresh reads st's record again and applies it; it reports whether the
// record may hold what st lacked: a newer revision, or promotions (a
// change made here since may have moved st's revision past one whose
// notice is still on its way). In process there is nothing to read.
func (t *sessionTable) refresh(st *callpath.Session) bool {
	if _, local := t.store.(*sessionstore.Local); local {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	rec, err := t.store.Get(ctx, st.ID)
	if err != nil {
		return false
	}
	newer := rec.Rev > st.Rev.Load() || len(rec.Promoted) > 0
	t.apply(st, rec)
	return newer
}

// reload reads the record of id again and applies it to this replica's
// session; it reports whether the session is still there.
func (t *sessionTable) reload(id string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	rec, err := t.store.Get(ctx, id)
	if errors.Is(err, sessionstore.ErrNotFound) {
		t.forget(id)
		return false
	}
	st := t.get(id)
	if err != nil || st == nil {
		return st != nil
	}
	t.apply(st, rec)
	return true
}

// message takes what another replica sent this one: a reply to its own
// request, a request to run here (holder.go), or a client's answer to a
// request this replica sent (its id names it).
func (t *sessionTable) message(m sessionstore.Message) {
	if t.x.Take(m) {
		return
	}
	switch m.Kind {
	case msgSubscribe:
		t.subscribeHere(m)
		return
	case msgAnswer:
	default:
		return
	}
	st := t.get(m.Session)
	if st == nil {
		return
	}
	var msg wire.Message
	if wire.Decode(m.Body, &msg) == nil && msg.IsResponse() {
		st.Resolve(&msg)
	}
}

// Kinds of sessionstore.Message.
const msgAnswer = "answer"
