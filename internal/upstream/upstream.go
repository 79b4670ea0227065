// Package upstream connects mcp-mux to one configured MCP server.
//
// An Upstream owns every session mcp-mux holds with that server: a control
// session used for discovery and for tools/list_changed, and a pool of call
// sessions scoped by (user, thread) with an LRU cap and an idle timeout.
// Transports are stdio (a child process in its own process group under a
// supervisor, killed as a group), Streamable HTTP (either protocol era; a
// 2026-07-28 server has no sessions, see era.go) and legacy SSE. Results travel as raw JSON so that
// nothing the server sends is lost or reshaped on the way.
//
// An Upstream never blocks its caller on a broken server: discovery runs in
// the background, retries with capped backoff, and reports tool lists through
// Options.OnChange.
package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/internal/telemetry"
	"github.com/mcp-mux/mcp-mux/internal/upstream/credscrub"
	"github.com/mcp-mux/mcp-mux/internal/upstream/paramheader"
	"github.com/mcp-mux/mcp-mux/internal/upstream/stdioproc"
	"github.com/mcp-mux/mcp-mux/internal/via"
)

// Transport names.
const (
	Stdio = "stdio"
	HTTP  = "http"
	SSE   = "sse"
)

// Session scopes: which callers share an upstream session.
const (
	ScopeThread = "thread" // one session per (user, thread)
	ScopeUser   = "user"   // one session per user
	ScopeShared = "shared" // one session for everyone
)

// DefaultMaxSessions is the session cap of a transport: 16 for stdio (each
// session is a process), 256 for http and sse.
func DefaultMaxSessions(transport string) int {
	if transport == Stdio {
		return 16
	}
	return 256
}

// DefaultIdleTimeout is how long a pooled session of a transport may stay
// unused: 5 minutes for stdio, 10 for http and sse.
func DefaultIdleTimeout(transport string) time.Duration {
	if transport == Stdio {
		return 5 * time.Minute
	}
	return 10 * time.Minute
}

// Options configure an Upstream.
type Options struct {
	Name      string
	Transport string // Stdio, HTTP or SSE

	Command string            // stdio
	Args    []string          // stdio
	Env     map[string]string // stdio, added to a small inherited base set
	Dir     string            // stdio working directory
	// Supervisor is the executable (normally the mux binary itself,
	// "/proc/self/exe") that runs RunSupervisor: each stdio server starts
	// under it, so that no process of the server outlives mcp-mux, even one
	// killed with SIGKILL. Empty starts servers directly: their process
	// groups are killed on Close, but a SIGKILLed mux leaves their children.
	Supervisor string

	URL    string      // http, sse
	Header http.Header // static headers, used when BaseHeaders is nil
	// BaseHeaders returns the headers of requests that have no caller
	// (discovery and the control session), e.g. static plus OAuth. An error
	// is logged and the request goes out with the static Header.
	BaseHeaders func(context.Context) (http.Header, error)
	// OnUnauthorized is told when a request carrying sent was answered 401,
	// so that a token can be refreshed before the next attempt.
	OnUnauthorized func(sent http.Header)
	// OnRefused is told when a discovery round was refused with 401 or
	// 403, with the server's challenges (a server asking each user for a
	// token says so there).
	OnRefused func(*StatusError)

	// InitTimeout bounds starting a session (spawn + initialize) and a
	// discovery round. Zero means no limit.
	InitTimeout time.Duration
	// CallTimeout bounds one tools/call. Zero means no limit.
	CallTimeout time.Duration

	Scope string // ScopeThread (default), ScopeUser or ScopeShared
	// ProtocolVersion pins the era of an HTTP or stdio server's sessions
	// (VersionLegacy, VersionModern); VersionAuto negotiates (era.go). SSE
	// sessions are always VersionLegacy.
	ProtocolVersion string
	// ProbeTimeout is how long a stdio server's process may leave the
	// server/discover probe unanswered (stdioera.go). Zero means 10s, or
	// half of InitTimeout if that is shorter.
	ProbeTimeout time.Duration
	// MaxSessions caps pooled call sessions (for stdio: processes), busy
	// or not; a caller that needs one more waits, bounded by its context
	// and CallTimeout. Default DefaultMaxSessions.
	MaxSessions int
	// IdleTimeout closes a pooled session unused this long. Default
	// DefaultIdleTimeout.
	IdleTimeout time.Duration

	RetryMin time.Duration // first rediscovery delay after a failure; default 1s
	RetryMax time.Duration // cap of the rediscovery backoff; default 60s

	// Transport for HTTP and SSE; nil uses a dedicated keep-alive transport.
	RoundTripper http.RoundTripper
	// Telemetry starts a CLIENT span per request and carries its trace
	// context upstream (params._meta, and HTTP headers); nil: off.
	Telemetry *telemetry.Telemetry
	Logger    hclog.Logger
	// OnChange is called after any list (tools, prompts, resources,
	// resource templates) was discovered or refreshed.
	OnChange func()
	// OnDiscovery, when set, is told how long each discovery round took
	// and whether it succeeded.
	OnDiscovery func(d time.Duration, ok bool)
	// Handler receives the server-to-client traffic of call sessions.
	Handler Handler

	// Via, when set, marks every HTTP and SSE request with this mux's id
	// (internal/via), so that one that comes back to it is refused.
	Via *via.Marker
}

// RunSupervisor runs the stdio supervisor when this process was started as
// one (Options.Supervisor) and reports its exit code; otherwise it returns
// ok false at once. Call it first in main, and in TestMain of tests whose
// Upstreams use the test binary as their Supervisor:
//
//	if code, ok := upstream.RunSupervisor(); ok {
//		os.Exit(code)
//	}
func RunSupervisor() (code int, ok bool) { return stdioproc.RunSupervisor() }

// Handler receives what an upstream server sends on a call session outside
// any call: what a call's CallSink takes goes there instead (returnpath.go).
// ctx carries no call's values; a request's ends when the server cancels
// it, the sinkless call it came during ends, or the Upstream closes.
type Handler interface {
	// ServerRequest answers sampling/createMessage, elicitation/create and roots/list.
	ServerRequest(ctx context.Context, key Key, method string, params json.RawMessage) (json.RawMessage, error)
	// ServerNotification receives notifications/message and
	// notifications/resources/updated (progress goes only to calls).
	ServerNotification(ctx context.Context, key Key, method string, params json.RawMessage)
}

// Item is one listed prompt, resource or resource template: its key (name,
// URI or URI template) and its JSON exactly as listed.
type Item struct {
	Key string
	Raw json.RawMessage
}

// Lists is what discovery found on a server.
type Lists struct {
	Tools     []Tool
	Prompts   []Item
	Resources []Item
	Templates []Item
	// Capabilities the server declared in its initialize result.
	Capabilities *mcp.ServerCapabilities
	// Hints are the caching hints a 2026-07-28 server gave its lists, by
	// list method (cachehint.go); At is when the lists were fetched.
	Hints map[string]CacheHint
	At    time.Time
	// Protocol is the version the discovery session negotiated; Eras the
	// eras the server speaks, newest first (2026-07-28, 2025-11-25).
	Protocol string
	Eras     []string
}

// Tool is one upstream tool: its raw name and its JSON exactly as listed.
type Tool struct {
	Name string
	Raw  json.RawMessage
}

// Key identifies the caller a call session belongs to. Cred distinguishes
// callers whose per-call credentials differ (a fingerprint, never a secret);
// Caps is the downstream client's capabilities (see Capabilities), which the
// session declares to the server; Era is the client's protocol era
// (VersionLegacy, VersionModern; "" for no client): a server that speaks
// both runs the session on the client's (era.go).
type Key struct{ User, Thread, Cred, Caps, Era string }

type headersKey struct{}

func withHeaders(ctx context.Context, h http.Header) context.Context {
	return context.WithValue(ctx, headersKey{}, h)
}

func headersFrom(ctx context.Context) http.Header {
	h, _ := ctx.Value(headersKey{}).(http.Header)
	return h
}

// Upstream is one configured MCP server.
type Upstream struct {
	opts    Options
	log     hclog.Logger
	clients clients              // SDK clients by declared capabilities
	proc    stdioproc.Options    // how a stdio server's process starts
	stderr  *stdioproc.StderrLog // stdio servers' stderr
	// retrying is set while discovery keeps failing after its first
	// failure: stderr is then not logged again.
	retrying atomic.Bool
	http     *http.Client        // fast path
	sdkHTTP  *http.Client        // SDK transports (static headers added)
	scrubs   *credscrub.Scrubber // the credentials of every request, out of its errors
	pool     *pool

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup // run and reap loops
	async  background     // background closes and replies; Close cuts them short and waits for them

	refresh      chan struct{}
	discovered   chan struct{}
	hasPrompts   atomic.Bool // announced prompts after initialize
	hasResources atomic.Bool // announced resources after initialize
	firstOnce    sync.Once

	catalog catalog // what discovery found

	conns connTable // open sessions

	control    atomic.Pointer[conn] // the discovery session while it is up
	reconnects atomic.Int64         // sessions re-established after they ended
	eras       eraMemory            // the protocol eras the server speaks, once known (era.go)
	// annotations are the x-mcp-header bindings of the listed tools
	// (paramheader), built once per discovered list.
	annotations atomic.Pointer[paramheader.Index]
	subs        subscriptions // resource URIs subscribed on the discovery session
}

// New validates opts and returns an Upstream. It does no I/O; call Start.
func New(opts Options) (*Upstream, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	opts.setDefaults()
	rt := opts.roundTripper()
	ctx, cancel := context.WithCancel(context.Background())
	u := &Upstream{
		opts:       opts,
		log:        opts.Logger,
		http:       &http.Client{Transport: rt},
		sdkHTTP:    &http.Client{Transport: staticHeaders{base: rt, header: opts.Header}},
		ctx:        ctx,
		cancel:     cancel,
		refresh:    make(chan struct{}, 1),
		discovered: make(chan struct{}),
	}
	u.eras.log = opts.Logger
	u.async.ctx, u.async.stop = context.WithCancel(context.Background())
	u.clients.make = clientMaker(u)
	u.scrubs = credscrub.New(u.opts.URL, u.opts.Header, u.opts.Env)
	u.proc = stdioproc.Options{Command: opts.Command, Args: opts.Args, Env: opts.Env, Dir: opts.Dir,
		Supervisor: opts.Supervisor, Logger: opts.Logger}
	u.stderr = stdioproc.NewStderrLog(opts.Logger.Named("stderr"), u.retrying.Load, func(s string) string { return u.scrubs.For(nil).Scrub(s) })
	u.pool = newPool(u, opts.MaxSessions, opts.IdleTimeout)
	return u, nil
}

// validate checks that the transport is known and has what it needs.
func (o *Options) validate() error {
	switch o.Transport {
	case Stdio:
		if o.Command == "" {
			return errors.New("stdio transport requires a command")
		}
	case HTTP, SSE:
		if o.URL == "" {
			return fmt.Errorf("%s transport requires a url", o.Transport)
		}
	default:
		return fmt.Errorf("unsupported transport %q", o.Transport)
	}
	return nil
}

// setDefaults fills in what was left unset.
func (o *Options) setDefaults() {
	if o.Scope == "" {
		o.Scope = ScopeThread
	}
	if o.MaxSessions <= 0 {
		o.MaxSessions = DefaultMaxSessions(o.Transport)
	}
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = DefaultIdleTimeout(o.Transport)
	}
	if o.RetryMin <= 0 {
		o.RetryMin = time.Second
	}
	if o.RetryMax < o.RetryMin {
		o.RetryMax = max(60*time.Second, o.RetryMin)
	}
	if o.Logger == nil {
		o.Logger = hclog.NewNullLogger()
	}
}

// roundTripper is the HTTP transport of HTTP and SSE requests: the
// configured one or a dedicated keep-alive one, marked with Via if set.
func (o *Options) roundTripper() http.RoundTripper {
	rt := o.RoundTripper
	if rt == nil {
		rt = &http.Transport{
			Proxy:               http.ProxyFromEnvironment,
			MaxIdleConns:        256,
			MaxIdleConnsPerHost: 128,
			IdleConnTimeout:     90 * time.Second,
			ForceAttemptHTTP2:   true,
		}
	}
	if o.Via != nil {
		rt = o.Via.Transport(rt)
	}
	return rt
}

// clientMaker returns how u makes the SDK client of a capability set
// (clients.make), with list-change handlers if lists. A server whose
// initialize result lacked prompts or resources (it had none yet) still
// announces them later with list_changed.
func clientMaker(u *Upstream) func(caps *mcp.ClientCapabilities, lists bool) *mcp.Client {
	refresh := func() { u.Rediscover() }
	return func(caps *mcp.ClientCapabilities, lists bool) *mcp.Client {
		o := &mcp.ClientOptions{Capabilities: caps}
		if lists {
			o.ToolListChangedHandler = func(context.Context, *mcp.ToolListChangedRequest) { refresh() }
			o.PromptListChangedHandler = func(context.Context, *mcp.PromptListChangedRequest) { u.hasPrompts.Store(true); refresh() }
			o.ResourceListChangedHandler = func(context.Context, *mcp.ResourceListChangedRequest) { u.hasResources.Store(true); refresh() }
		}
		c := mcp.NewClient(&mcp.Implementation{Name: "mcp-mux", Version: "1"}, o)
		c.AddReceivingMiddleware(u.receive)
		return c
	}
}

// Name returns the configured server name.
func (u *Upstream) Name() string { return u.opts.Name }

// Start begins background discovery. The first round ends (successfully or
// not) when Discovered is closed.
func (u *Upstream) Start() {
	u.wg.Add(2)
	go func() { defer u.wg.Done(); u.run() }()
	go func() { defer u.wg.Done(); u.pool.reap(u.ctx) }()
}

// Discovered is closed once the first discovery attempt has finished.
func (u *Upstream) Discovered() <-chan struct{} { return u.discovered }

// Tools returns the last discovered tool list.
func (u *Upstream) Tools() []Tool { return u.catalog.current().Tools }

// Lists returns everything the last discovery found.
func (u *Upstream) Lists() Lists { return u.catalog.current() }

// Err returns the last discovery error, or nil while the server is healthy.
func (u *Upstream) Err() error { return u.catalog.lastErr() }

// Stderr returns the last distinct lines a stdio server wrote on stderr,
// oldest first, each written more than once followed by its count
// (stdioproc.StderrLog.Tail).
func (u *Upstream) Stderr() []string { return u.stderr.Tail() }

// StderrError is a failure reason with the server's last stderr lines
// (scrubbed of the credentials mcp-mux holds for it).
type StderrError struct {
	Err error
	// Lines are the last distinct lines, oldest first, with their counts
	// (Stderr); Last is the newest line as written.
	Lines []string
	Last  string
}

func (e *StderrError) Error() string {
	return e.Err.Error() + "; stderr: " + strings.Join(e.Lines, " | ")
}

func (e *StderrError) Unwrap() error { return e.Err }

// Sessions returns the number of pooled call sessions.
func (u *Upstream) Sessions() int { return u.pool.size() }

// ReleaseThread closes the call sessions that belong to thread.
func (u *Upstream) ReleaseThread(thread string) {
	u.pool.closeWhere(func(k Key) bool { return k.Thread == thread })
}

// ReleaseIdleThread closes the call sessions of thread that have no call
// in flight.
func (u *Upstream) ReleaseIdleThread(thread string) {
	u.pool.closeIdleWhere(func(k Key) bool { return k.Thread == thread })
}

// Close ends every session and stops background work. Stdio process groups
// are gone when it returns.
func (u *Upstream) Close() error {
	u.cancel()
	u.wg.Wait()
	// Cancellations and replies already queued go out before the sessions
	// close: a server's DELETE may wait for the handlers they end.
	u.async.settle()
	u.pool.shutdown()
	u.async.Wait()
	if u.opts.RoundTripper == nil { // our own transport: drop its keep-alive connections
		if t, ok := u.http.Transport.(*http.Transport); ok {
			t.CloseIdleConnections()
		}
	}
	return nil
}

// connTable is the open sessions by their SDK session, for the traffic
// that reaches the SDK (receive) and for Processes.
type connTable struct {
	mu sync.Mutex
	m  map[*mcp.ClientSession]*conn
}

func (t *connTable) add(cs *mcp.ClientSession, c *conn) {
	t.mu.Lock()
	if t.m == nil {
		t.m = make(map[*mcp.ClientSession]*conn)
	}
	t.m[cs] = c
	t.mu.Unlock()
}

func (t *connTable) remove(cs *mcp.ClientSession) {
	t.mu.Lock()
	delete(t.m, cs)
	t.mu.Unlock()
}

func (t *connTable) of(cs *mcp.ClientSession) *conn {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.m[cs]
}

// liveProcesses counts the sessions whose stdio server process has not
// exited.
func (t *connTable) liveProcesses() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, c := range t.m {
		if c.proc == nil {
			continue
		}
		select {
		case <-c.proc.Exited():
		default:
			n++
		}
	}
	return n
}

// staticHeaders adds a session's headers to every SDK request: the ones its
// context carries (the credentials of whoever opened it), else the static ones.
type staticHeaders struct {
	base   http.RoundTripper
	header http.Header
}

func (t staticHeaders) RoundTrip(r *http.Request) (*http.Response, error) {
	h := headersFrom(r.Context())
	if h == nil {
		h = t.header
	}
	if len(h) == 0 {
		return t.base.RoundTrip(r)
	}
	r2 := r.Clone(r.Context())
	for k, v := range h {
		r2.Header[k] = v
	}
	return t.base.RoundTrip(r2)
}

var _ http.RoundTripper = staticHeaders{}
