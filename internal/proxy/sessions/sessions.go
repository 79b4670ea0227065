// Package sessions is this replica's side of the 2025-11-25 sessions. A
// session is its record in the store (package sessionstore: in process, or
// in Redis shared by every replica); a replica that serves a request of a
// session it has not seen loads the record once and keeps a
// callpath.Session built from it (the Table, kept fresh by the store's
// change notices and a periodic recheck) for as long as the session is used
// here. The package owns that table, the session's creation and end, its
// resident SDK session (package sessionhost), the holder of its GET stream
// with its upstream subscriptions (holder.go), the messages replicas
// exchange for it, and the HTTP GET (its stream) and DELETE of a session
// on any replica (http.go).
//
// What a session holds on this replica (calls in flight, upstream call
// sessions, subscriptions, the SDK's resident session) is released when
// the session ends (DELETE, on any replica), or when it was idle here for
// the idle timeout.
package sessions

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/internal/listenstream"
	"github.com/mcp-mux/mcp-mux/internal/proxy/callpath"
	"github.com/mcp-mux/mcp-mux/internal/proxy/retryfwd"
	"github.com/mcp-mux/mcp-mux/internal/proxy/sessionhost"
	"github.com/mcp-mux/mcp-mux/internal/sessionstore"
	"github.com/mcp-mux/mcp-mux/internal/telemetry"
)

// Options configure a Table.
type Options struct {
	// Replica names this process among the replicas (sessionstore.NewReplica).
	Replica string
	// Store opens the shared store given the table's handlers; nil keeps
	// the sessions in this process (sessionstore.Local). The Table closes
	// the store on Close.
	Store func(sessionstore.Options) sessionstore.Store
	// SharedKey and OnSharedKey are sessionstore.Options' (a requestState
	// key the replicas share through the store).
	SharedKey   string
	OnSharedKey func(key string)
	// Retry, when set, is wired to the table's store, exchange and
	// background group, and takes the retries other replicas forward here.
	Retry *retryfwd.Forwarder
	// SDK serves the sessions' resident SDK sessions, Send is its sending
	// handler (in-request notifications), ResidentIdle sessionhost's.
	SDK          *mcp.Server
	Send         mcp.MethodHandler
	ResidentIdle time.Duration
	// Gate orders registration against Close.
	Gate    *callpath.Life
	Runtime *atomic.Pointer[callpath.Runtime]
	Calls   *callpath.Router
	Log     hclog.Logger
	// Telemetry records the session duration metric.
	Telemetry *telemetry.Telemetry
	// ThreadlessIdle is when an idle session that names no thread gives
	// up its stdio call sessions; default 15s.
	ThreadlessIdle time.Duration
	// Recheck is how often the sessions here are checked against their
	// records (recheck); default 10s.
	Recheck time.Duration
	// KeepAlive is how often an idle GET stream gets a keep-alive comment,
	// which finds a client gone within two of it; default
	// listenstream.KeepAlive (15 s).
	KeepAlive time.Duration
}

// Table is this replica's view of the 2025-11-25 sessions.
type Table struct {
	store   sessionstore.Store
	x       sessionstore.Exchange // requests to other replicas (holder.go)
	host    *sessionhost.Host
	replica string
	retry   *retryfwd.Forwarder // nil: none

	cache   cache
	holder  holder
	streams streams
	keeper  *listenstream.Keeper // the GET streams taken over
	bg      group                // session cleanups and background record writes

	send  mcp.MethodHandler
	gate  *callpath.Life
	rt    *atomic.Pointer[callpath.Runtime]
	calls *callpath.Router
	log   hclog.Logger
	tel   *telemetry.Telemetry
	// threadless is Options.ThreadlessIdle, recheckEvery Options.Recheck.
	threadless   time.Duration
	recheckEvery time.Duration

	hooks atomic.Pointer[Hooks] // tests only
}

// Hooks hold a table's steps for tests.
type Hooks struct {
	// BeforeCreate runs in Create before the store admits the record: a
	// test holds creates there to put them in flight together.
	BeforeCreate func()
	// AfterRead runs in a first load once the record was read, before the
	// session is registered: a test holds it there to race a DELETE.
	AfterRead func(id string)
}

// storeTimeout bounds one store operation on a request's path.
const storeTimeout = 5 * time.Second

// Defaults of Options and the config.
const (
	defaultRecheck        = 10 * time.Second // a DELETE whose notice was lost answers 404 here within it
	defaultThreadlessIdle = 15 * time.Second
	// DefaultIdleTimeout is inbound.session_idle_timeout_seconds' default.
	DefaultIdleTimeout = 30 * time.Minute
)

// Session lookup errors (Refuse answers each with its status).
var (
	errSessionForbidden = errors.New("this session belongs to another user")
	errSessionProfile   = errors.New("this session serves another profile")
	errSessionClosing   = errors.New("mcp-mux is shutting down")
)

// New returns the table: its store (o.Store's or one in process) and its
// host of resident SDK sessions. Run reaps it; Close ends it.
func New(o Options) *Table {
	t := &Table{replica: o.Replica, retry: o.Retry, send: o.Send, gate: o.Gate, rt: o.Runtime, calls: o.Calls, log: o.Log, tel: o.Telemetry,
		threadless: cmp.Or(o.ThreadlessIdle, defaultThreadlessIdle), recheckEvery: cmp.Or(o.Recheck, defaultRecheck)}
	t.holder.t = t
	t.streams.stop, t.streams.stopAll = context.WithCancel(context.Background())
	t.keeper = listenstream.NewKeeper(o.KeepAlive)
	if r := o.Retry; r != nil {
		r.Store, r.Exchange, r.Go = func() sessionstore.Store { return t.store }, &t.x, t.bg.Go
	}
	so := sessionstore.Options{Replica: t.replica, OnMessage: t.message, OnChange: t.changed,
		OnReconnect: func() { t.bg.Go(t.recheck) }, SharedKey: o.SharedKey, OnSharedKey: o.OnSharedKey}
	if o.Store != nil {
		so.TTL = DefaultIdleTimeout
		t.store = o.Store(so)
	} else {
		t.store = sessionstore.NewLocal(so) // no TTL: the idle sweep ends sessions
	}
	// Handlers of a resident session write mcp-mux's requests to the client
	// on its connection (callpath.SessionRequest).
	t.host = sessionhost.New(sessionhost.Options{SDK: o.SDK, Log: o.Log, ResidentIdle: o.ResidentIdle,
		Context: func(w sessionhost.Writer) context.Context { return callpath.WithClientWriter(context.Background(), w) }})
	return t
}

// SetHooks sets the table's test hooks.
func (t *Table) SetHooks(h Hooks) { t.hooks.Store(&h) }

// StopStreams ends every GET stream here (Drain, Close): its client
// reconnects, with its Last-Event-ID, to whichever replica the load
// balancer picks.
func (t *Table) StopStreams() { t.streams.stopAll() }

// Close lets go of what this replica holds for each session (the sessions
// live on in their records, for other replicas or none), waits (bounded by
// ctx) for their cleanups to release their upstream sessions, so no stdio
// process outlives the upstreams, and closes the store.
func (t *Table) Close(ctx context.Context) error {
	t.StopStreams()
	t.keeper.Close()
	for _, e := range t.cache.all() {
		t.forget(e.st.ID)
	}
	t.host.Close()
	cleaned := make(chan struct{})
	go func() { t.bg.Wait(); close(cleaned) }()
	select {
	case <-cleaned:
	case <-ctx.Done():
	}
	if err := t.store.Close(); err != nil {
		return fmt.Errorf("closing the session store: %w", err)
	}
	return nil
}

// group is the table's background work; Wait stops new work and waits
// for what runs.
type group struct {
	wg    sync.WaitGroup
	mu    sync.Mutex // orders Go against Wait
	ended bool       // Wait has begun
}

// Go runs fn on the group, unless Wait is already waiting for it (a change
// notice can arrive meanwhile: its work is moot then, and starting it
// would race the wait).
func (g *group) Go(fn func()) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.ended {
		g.wg.Go(fn)
	}
}

// TryGo runs fn on the group and reports true, unless Wait has begun.
func (g *group) TryGo(fn func()) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.ended {
		g.wg.Go(fn)
	}
	return !g.ended
}

// Wait stops new work and waits for what runs.
func (g *group) Wait() {
	g.mu.Lock()
	g.ended = true
	g.mu.Unlock()
	g.wg.Wait()
}
