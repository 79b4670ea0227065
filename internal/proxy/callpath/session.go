package callpath

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/internal/admission"
	"github.com/mcp-mux/mcp-mux/internal/subscriptions"
	"github.com/mcp-mux/mcp-mux/internal/upstream"
	"github.com/mcp-mux/mcp-mux/internal/wire"
)

// Session is mcp-mux's state for one downstream MCP session on this
// replica: for a 2025-11-25 session, its record (package sessionstore) as
// last read here, and what this replica does for it (package sessions
// keeps the table's own bookkeeping beside it).
type Session struct {
	ID       string            // Mcp-Session-Id; "" for a 2026-07-28 request
	User     string            // the authenticated caller
	Profile  string            // the caller's profile ("" = every tool): the catalog view it sees
	Caps     string            // upstream.Capabilities of the client: call sessions declare them
	Send     mcp.MethodHandler // the SDK's sending handler (a 2026-07-28 request's server-to-client requests)
	LastSeen atomic.Int64      // unix nanos of the last message
	// logRefresh is when WantsLog last read the record again (unix nanos).
	logRefresh atomic.Int64
	// Replica names this process in the ids of its requests to the
	// client, so that an answer reaching another replica comes back here.
	Replica string
	// Outbox sends a message to the session outside any request's stream:
	// its event log, which its GET stream follows on whichever replica.
	Outbox func(ctx context.Context, msg json.RawMessage) error
	// OnThread learns of a thread (other than its id) the session calls
	// as for the first time, to record it: its digest (ThreadDigest).
	OnThread func(digest string)
	// Refresh reads the session's record again (one store round trip)
	// and reports whether it is newer than what this replica had: under
	// tool_search a list or a deferred tool's call checks that another
	// replica's promotion, just answered, is not still on its way here.
	Refresh func() bool
	// OnPromote records tools tool_search promoted for the session before
	// the call that promoted them answers (its next request may reach any
	// replica).
	OnPromote func(ctx context.Context, names []string) error
	// ClientCaps are the capabilities the client declared: at initialize
	// for a session, in _meta for a 2026-07-28 request.
	ClientCaps *mcp.ClientCapabilities
	// Init and Protocol are a session's initialize params and negotiated
	// version: what its SDK session is rebuilt from.
	Init     *mcp.InitializeParams
	Protocol string

	// inflight counts the requests admitted on the session (Router.Admit)
	// and cancels them when it ends (Cancel).
	inflight admission.Calls

	reqSeq atomic.Uint64

	// ownReleased is set when its own-thread call sessions were released
	// and cleared when it calls as its own thread again (ReleaseOwnThread).
	ownReleased atomic.Bool

	ss atomic.Pointer[mcp.ServerSession] // the SDK's session, while one serves it

	mu      sync.Mutex
	calls   map[string]context.CancelFunc // in-flight fast-path calls by raw JSON-RPC id
	pending map[string]chan *wire.Message // fast-path requests to the client, by raw id
	Level   string                        // logging/setLevel (under mu); "" = none
	keys    []upstream.Key                // (user, thread) scopes this session called with here (few)
	threads map[string]bool               // digests of threads it called as anywhere (its record)
	Subs    subscriptions.Holder          // subscribed resource URIs

	Promo Promotions // tool_search promotions (package catalog)
}

// Server returns the SDK session serving the session now, or nil.
func (st *Session) Server() *mcp.ServerSession { return st.ss.Load() }

// SetServer records the SDK session serving the session now.
func (st *Session) SetServer(ss *mcp.ServerSession) { st.ss.Store(ss) }

// ToolsList is the session's tools/list result under cat; under
// tool_search its record is read again first (Refresh), so a promotion
// another replica just answered is in it.
func (st *Session) ToolsList(cat *Catalog) json.RawMessage {
	cat = ViewOf(cat, st.Profile)
	if cat.Searching() && st.Refresh != nil {
		st.Refresh()
	}
	return st.Promo.ToolsList(cat)
}

// Touch records activity for the idle timeout.
func (st *Session) Touch() { st.LastSeen.Store(time.Now().UnixNano()) }

// Track registers a fast-path call so notifications/cancelled can end it.
func (st *Session) Track(id string, cancel context.CancelFunc) {
	st.mu.Lock()
	if st.calls == nil {
		st.calls = make(map[string]context.CancelFunc)
	}
	st.calls[id] = cancel
	st.mu.Unlock()
}

// Untrack forgets a fast-path call that has finished (an idle session
// keeps no map).
func (st *Session) Untrack(id string) {
	st.mu.Lock()
	delete(st.calls, id)
	if len(st.calls) == 0 {
		st.calls = nil
	}
	st.mu.Unlock()
}

// CancelCall cancels the fast-path call named by notifications/cancelled params.
func (st *Session) CancelCall(params json.RawMessage) {
	var p struct {
		RequestID json.RawMessage `json:"requestId"`
	}
	if json.Unmarshal(params, &p) != nil || p.RequestID == nil {
		return
	}
	st.mu.Lock()
	cancel := st.calls[string(p.RequestID)]
	st.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// Cancel cancels every request admitted on the session, and every later
// one: the session ended.
func (st *Session) Cancel() { st.inflight.End() }

// LogLevel returns the level the client set ("" for none).
func (st *Session) LogLevel() string {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.Level
}

// logSeverity orders MCP logging levels.
var logSeverity = map[string]int{"debug": 0, "info": 1, "notice": 2, "warning": 3, "error": 4, "critical": 5, "alert": 6, "emergency": 7}

// SetLevel records the level the client asked for with logging/SetLevel.
func (st *Session) SetLevel(level string) {
	st.mu.Lock()
	st.Level = level
	st.mu.Unlock()
}

// WantsLog reports whether a notifications/message passes the session's
// level. Like the SDK, nothing is sent before the client sets a level.
// A message the level here drops is checked once more against the
// session's record (Refresh, at most once a second): the client may have
// just set its level on another replica, whose change notice is still on
// its way here.
func (st *Session) WantsLog(params json.RawMessage) bool {
	var p struct {
		Level string `json:"level"`
	}
	_ = json.Unmarshal(params, &p)
	if passes(p.Level, st.LogLevel()) {
		return true
	}
	if st.Refresh == nil || !st.logRefreshDue() {
		return false
	}
	st.Refresh()
	return passes(p.Level, st.LogLevel())
}

// passes reports whether a message of level msg passes the session level
// set ("" for none: nothing passes).
func passes(msg, set string) bool {
	if set == "" {
		return false
	}
	sev, ok := logSeverity[msg]
	return !ok || sev >= logSeverity[set]
}

// logRefreshDue reports whether WantsLog may read the record again now
// (once a second at most, so a chatty upstream costs no store load).
func (st *Session) logRefreshDue() bool {
	now := time.Now().UnixNano()
	last := st.logRefresh.Load()
	return now-last >= int64(time.Second) && st.logRefresh.CompareAndSwap(last, now)
}

// SupportsURLElicitation reports whether the client declared URL-mode
// elicitation (2025-11-25: elicitation.url).
func (st *Session) SupportsURLElicitation() bool {
	c := st.ClientCaps
	return c != nil && c.Elicitation != nil && c.Elicitation.URL != nil
}

// Supports reports whether the client declared the capability a
// server-to-client request needs.
func (st *Session) Supports(method string) bool {
	c := st.ClientCaps
	if c == nil {
		return false
	}
	switch method {
	case "sampling/createMessage":
		return c.Sampling != nil
	case "elicitation/create":
		return c.Elicitation != nil
	case "roots/list":
		return c.RootsV2 != nil
	}
	return true
}

// RequestPrefix starts the id of every request mcp-mux sends a client;
// the replica's name and a number follow ("mux-s-<replica>-<n>"). The SDK
// numbers its own requests, so string ids never clash.
const RequestPrefix = "mux-s-"

// expect allocates an id (raw JSON) for a request mcp-mux sends the client.
func (st *Session) expect() (string, chan *wire.Message) {
	id := `"` + RequestPrefix + st.Replica + "-" + strconv.FormatUint(st.reqSeq.Add(1), 10) + `"`
	ch := make(chan *wire.Message, 1)
	st.mu.Lock()
	if st.pending == nil {
		st.pending = make(map[string]chan *wire.Message)
	}
	st.pending[id] = ch
	st.mu.Unlock()
	return id, ch
}

func (st *Session) forget(id string) {
	st.mu.Lock()
	delete(st.pending, id)
	if len(st.pending) == 0 {
		st.pending = nil
	}
	st.mu.Unlock()
}

// Resolve hands a client's response to the fast-path request waiting for it.
func (st *Session) Resolve(m *wire.Message) bool {
	st.mu.Lock()
	ch, ok := st.pending[string(m.ID)]
	delete(st.pending, string(m.ID))
	st.mu.Unlock()
	if ok {
		msg := *m
		ch <- &msg
	}
	return ok
}

// Busy reports whether the session has a request in flight.
func (st *Session) Busy() bool { return st.inflight.Active() > 0 }

// ReleaseOwnThread reports whether the session's own-thread call sessions
// (the thread of a session whose requests name none is its id) should be
// released now: it has called as its own thread since the last release.
func (st *Session) ReleaseOwnThread() bool {
	if st.ownReleased.Load() || !st.HasThread(st.ID) {
		return false
	}
	st.ownReleased.Store(true)
	return true
}

// useKey records that the session called upstreams as key.
func (st *Session) useKey(k upstream.Key) {
	if k.Thread == st.ID {
		st.ownReleased.Store(false)
	}
	st.mu.Lock()
	if !slices.Contains(st.keys, k) {
		st.keys = append(st.keys, k)
	}
	var digest string
	fresh := k.Thread != st.ID
	if fresh {
		digest = ThreadDigest(k.Thread)
		if fresh = !st.threads[digest]; fresh {
			if st.threads == nil {
				st.threads = make(map[string]bool)
			}
			st.threads[digest] = true
		}
	}
	st.mu.Unlock()
	if fresh && st.OnThread != nil {
		st.OnThread(digest)
	}
}

// ThreadDigest is what a session's record keeps of a thread it called
// as: a fixed 24 characters, however long the thread id.
func ThreadDigest(thread string) string {
	h := sha256.Sum256([]byte(thread))
	return hex.EncodeToString(h[:12])
}

// UsedKeys returns the (user, thread) scopes the session called with.
func (st *Session) UsedKeys() []upstream.Key {
	st.mu.Lock()
	defer st.mu.Unlock()
	return slices.Clone(st.keys)
}

// AddThreads records threads the session called as on any replica, by
// their digests.
func (st *Session) AddThreads(threads []string) {
	if len(threads) == 0 {
		return
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.threads == nil {
		st.threads = make(map[string]bool, len(threads))
	}
	for _, t := range threads {
		st.threads[t] = true
	}
}

// HasThread reports whether the session called upstreams as thread, here
// or (by its record) on another replica.
func (st *Session) HasThread(thread string) bool {
	digest := ThreadDigest(thread)
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.threads[digest] {
		return true
	}
	for _, k := range st.keys {
		if k.Thread == thread {
			return true
		}
	}
	return false
}

// HasKey reports whether the session called upstreams as k.
func (st *Session) HasKey(k upstream.Key) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	return slices.Contains(st.keys, k)
}
