// Package sessionhost is the HTTP side of mcp-mux's 2025-11-25 sessions:
// it runs go-sdk's ServerSession for a session only while the session has
// requests to serve (resident), and serves its GET stream from the
// session's event log (package sessionstore) rather than from process
// memory, so any replica can serve any session.
//
// A resident session is go-sdk's StreamableServerTransport and
// ServerSession, started for a new session (initialize) or rebuilt from
// its record (mcp.ServerSessionOptions.State) when a request needs the
// SDK; it is closed after ResidentIdle without a request, and rebuilt on
// the next. Requests the fast paths answer, and the GET stream, need no
// resident at all: an idle session costs its record.
//
// mcp-mux's own requests to the client (sampling, elicitation, roots) go
// out through the resident's connection with ids that name this replica
// (Writer), never through the SDK's request machinery: the client's answer
// may reach any replica, which routes it by the id.
package sessionhost

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/internal/wire/mcpwire"
)

// DefaultResidentIdle is Options.ResidentIdle when unset.
const DefaultResidentIdle = 10 * time.Second

// Versions are the protocol versions of stateful sessions, newest first.
var Versions = []string{"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"}

// Negotiate returns the version a session that asked for v runs on: v
// when served, else the newest (go-sdk's rule).
func Negotiate(v string) string {
	if slices.Contains(Versions, v) {
		return v
	}
	return Versions[0]
}

// Writer writes a message on a resident session's connection: with a
// request handler's context it rides that request's stream.
type Writer interface {
	Write(ctx context.Context, msg jsonrpc.Message) error
}

// Options configure a Host.
type Options struct {
	// SDK is the server every session runs on.
	SDK *mcp.Server
	Log hclog.Logger
	// ResidentIdle is how long a resident session without a request stays
	// resident; default DefaultResidentIdle.
	ResidentIdle time.Duration
	// Context returns the base context of a resident session's request
	// handlers, given the session's Writer (nil: context.Background).
	Context func(w Writer) context.Context
}

// Host runs the resident sessions.
type Host struct {
	opts Options
	log  hclog.Logger

	mu     sync.Mutex
	m      map[string]*resident
	closed bool
	wg     sync.WaitGroup // closing sessions
	stop   context.CancelFunc
	done   chan struct{}
}

// resident is one session's SDK side while it has requests to serve.
type resident struct {
	id   string
	ss   *mcp.ServerSession
	tr   *mcp.StreamableServerTransport
	conn *conn
	busy int       // requests being served; under Host.mu
	idle time.Time // when busy last fell to 0
}

// conn is a resident's connection: the transport's, kept so mcp-mux can
// write its own requests on it.
type conn struct{ mcp.Connection }

// transport hands go-sdk the StreamableServerTransport's connection
// wrapped in conn.
type transport struct {
	tr *mcp.StreamableServerTransport
	c  *conn
}

// Connect implements mcp.Transport.
func (t *transport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.tr.Connect(ctx)
	if err != nil {
		return nil, err
	}
	t.c.Connection = c
	return t.c, nil
}

// New returns a Host and starts its eviction of idle residents.
func New(opts Options) *Host {
	if opts.Log == nil {
		opts.Log = hclog.NewNullLogger()
	}
	if opts.ResidentIdle <= 0 {
		opts.ResidentIdle = DefaultResidentIdle
	}
	ctx, cancel := context.WithCancel(context.Background())
	h := &Host{opts: opts, log: opts.Log, m: map[string]*resident{}, stop: cancel, done: make(chan struct{})}
	go h.evictLoop(ctx)
	return h
}

// connect starts a resident for id: a new session (state nil) or one
// rebuilt from state.
func (h *Host) connect(id string, state *mcp.ServerSessionState) (*resident, error) {
	r := &resident{id: id, tr: &mcp.StreamableServerTransport{SessionID: id}, conn: &conn{}}
	ctx := context.Background()
	if h.opts.Context != nil {
		ctx = h.opts.Context(r.conn)
	}
	var opts *mcp.ServerSessionOptions
	if state != nil {
		opts = &mcp.ServerSessionOptions{State: state}
	}
	ss, err := h.opts.SDK.Connect(ctx, &transport{tr: r.tr, c: r.conn}, opts)
	if err != nil {
		return nil, fmt.Errorf("starting session: %w", err)
	}
	r.ss = ss
	return r, nil
}

// Lease is a resident session held for one request.
type Lease struct {
	h *Host
	r *resident
}

// Session is the SDK session.
func (l *Lease) Session() *mcp.ServerSession { return l.r.ss }

// Serve serves one HTTP request of the session through the SDK.
func (l *Lease) Serve(w http.ResponseWriter, r *http.Request) { l.r.tr.ServeHTTP(w, r) }

// Release ends the request; an idle resident is evicted later.
func (l *Lease) Release() {
	l.h.mu.Lock()
	defer l.h.mu.Unlock()
	l.r.busy--
	if l.r.busy == 0 {
		l.r.idle = time.Now()
	}
}

// ErrClosed: the host is shutting down.
var ErrClosed = fmt.Errorf("mcp-mux is shutting down")

// Open returns a lease on the resident session id, rebuilding it from
// state() when it is not resident.
func (h *Host) Open(id string, state func() *mcp.ServerSessionState) (*Lease, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, ErrClosed
	}
	r := h.m[id]
	if r == nil {
		var err error
		if r, err = h.connect(id, state()); err != nil {
			return nil, err
		}
		h.m[id] = r
	}
	r.busy++
	return &Lease{h: h, r: r}, nil
}

// Create starts a new session id (its initialize is the request to come)
// and returns a lease on it.
func (h *Host) Create(id string) (*Lease, error) {
	return h.Open(id, func() *mcp.ServerSessionState { return nil })
}

// Ephemeral serves one request that names no session and opens none (not
// an initialize) on a session of its own, as go-sdk does.
func (h *Host) Ephemeral(w http.ResponseWriter, r *http.Request) {
	res, err := h.connect("", nil)
	if err != nil {
		http.Error(w, "failed connection", http.StatusInternalServerError)
		return
	}
	defer res.ss.Close()
	res.tr.ServeHTTP(w, r)
}

// End closes the resident session id (the session ended); the close
// finishes in the background (it waits for the session's handlers).
func (h *Host) End(id string) {
	h.mu.Lock()
	r := h.m[id]
	delete(h.m, id)
	if r != nil {
		h.wg.Add(1)
	}
	h.mu.Unlock()
	if r != nil {
		go func() {
			defer h.wg.Done()
			_ = r.ss.Close()
		}()
	}
}

// Resident reports whether id is resident now.
func (h *Host) Resident(id string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.m[id] != nil
}

// Count returns the number of resident sessions.
func (h *Host) Count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.m)
}

// evictLoop closes residents idle for ResidentIdle, checking every
// ResidentIdle/4.
func (h *Host) evictLoop(ctx context.Context) {
	defer close(h.done)
	t := time.NewTicker(max(h.opts.ResidentIdle/4, 10*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			h.evict(now)
		}
	}
}

// evict closes the residents idle since before now-ResidentIdle.
func (h *Host) evict(now time.Time) {
	h.mu.Lock()
	var idle []*resident
	for id, r := range h.m {
		if r.busy == 0 && now.Sub(r.idle) >= h.opts.ResidentIdle {
			delete(h.m, id)
			idle = append(idle, r)
		}
	}
	h.wg.Add(len(idle))
	h.mu.Unlock()
	for _, r := range idle {
		go func() {
			defer h.wg.Done()
			_ = r.ss.Close()
		}()
	}
}

// Close stops eviction and closes every resident session, waiting for
// their handlers.
func (h *Host) Close() {
	h.mu.Lock()
	h.closed = true
	all := h.m
	h.m = map[string]*resident{}
	h.mu.Unlock()
	h.stop()
	<-h.done
	for _, r := range all {
		_ = r.ss.Close()
	}
	h.wg.Wait()
}

// CheckPOST answers what go-sdk's handler refuses before a POST reaches a
// session: a body that is not JSON (415), an Accept that does not take
// both JSON and event streams, an unknown Mcp-Protocol-Version, a batch
// under a version that has none (400). It reports whether r may proceed.
func CheckPOST(w http.ResponseWriter, r *http.Request, batch bool) bool {
	if ct, _, _ := strings.Cut(r.Header.Get("Content-Type"), ";"); strings.TrimSpace(strings.ToLower(ct)) != "application/json" {
		http.Error(w, "Content-Type must be 'application/json'", http.StatusUnsupportedMediaType)
		return false
	}
	if !mcpwire.AcceptsBoth(r.Header.Values("Accept")) {
		http.Error(w, "Accept must contain both 'application/json' and 'text/event-stream'", http.StatusBadRequest)
		return false
	}
	v := r.Header.Get("Mcp-Protocol-Version")
	if v != "" && !slices.Contains(Versions, v) {
		http.Error(w, fmt.Sprintf("Bad Request: Unsupported protocol version (supported versions: %s)", strings.Join(Versions, ",")), http.StatusBadRequest)
		return false
	}
	if batch && v >= "2025-06-18" {
		http.Error(w, fmt.Sprintf("JSON-RPC batching is not supported in 2025-06-18 and later (request version: %s)", v), http.StatusBadRequest)
		return false
	}
	return true
}
