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
	"math/rand/v2"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/internal/reqid"
	"github.com/mcp-mux/mcp-mux/internal/via"
	"github.com/mcp-mux/mcp-mux/internal/wire"
	"github.com/mcp-mux/mcp-mux/internal/wire/mcpwire"
	"github.com/mcp-mux/mcp-mux/secret"
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
	Logger       hclog.Logger
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

// Handler receives what an upstream server sends on a call session. ctx is
// the context of the call the message belongs to when mcp-mux can tell (the
// message arrived on that call's stream, or it is the only call in flight on
// the session), else a background context. Progress is delivered only with
// the context of the call whose token it names (WithProgressToken), and only
// from the session that carries that call; other progress is dropped.
type Handler interface {
	// ServerRequest answers sampling/createMessage, elicitation/create and roots/list.
	ServerRequest(ctx context.Context, key Key, method string, params json.RawMessage) (json.RawMessage, error)
	// ServerNotification receives notifications/progress, notifications/message
	// and notifications/resources/updated.
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
}

// Tool is one upstream tool: its raw name and its JSON exactly as listed.
type Tool struct {
	Name string
	Raw  json.RawMessage
}

// Key identifies the caller a call session belongs to. Cred distinguishes
// callers whose per-call credentials differ (a fingerprint, never a secret);
// Caps is the downstream client's capabilities (see Capabilities), which the
// session declares to the server.
type Key struct{ User, Thread, Cred, Caps string }

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
	clients clients    // SDK clients by declared capabilities
	stderr  *stderrLog // stdio servers' stderr
	// retrying is set while discovery keeps failing after its first
	// failure: stderr is then not logged again.
	retrying atomic.Bool
	http     *http.Client     // fast path
	sdkHTTP  *http.Client     // SDK transports (static headers added)
	static   *secret.Scrubber // the credentials of every request (see scrub)
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

	mu        sync.Mutex
	lists     Lists
	err       error           // last discovery error, nil when healthy
	optFailed map[string]bool // optional lists whose last listing failed

	connsMu sync.Mutex
	conns   map[*mcp.ClientSession]*conn

	control    atomic.Pointer[conn]   // the discovery session while it is up
	reconnects atomic.Int64           // sessions re-established after they ended
	era        atomic.Pointer[string] // the protocol version sessions negotiated (era.go)
	// annotations are the x-mcp-header bindings of the listed tools
	// (paramheaders.go), built once per discovered list.
	annotations atomic.Pointer[paramIndex]
	subsMu      sync.Mutex
	subs        map[string]bool // resource URIs subscribed on the discovery session
}

// New validates opts and returns an Upstream. It does no I/O; call Start.
func New(opts Options) (*Upstream, error) {
	switch opts.Transport {
	case Stdio:
		if opts.Command == "" {
			return nil, errors.New("stdio transport requires a command")
		}
	case HTTP, SSE:
		if opts.URL == "" {
			return nil, fmt.Errorf("%s transport requires a url", opts.Transport)
		}
	default:
		return nil, fmt.Errorf("unsupported transport %q", opts.Transport)
	}
	if opts.Scope == "" {
		opts.Scope = ScopeThread
	}
	if opts.MaxSessions <= 0 {
		opts.MaxSessions = DefaultMaxSessions(opts.Transport)
	}
	if opts.IdleTimeout <= 0 {
		opts.IdleTimeout = DefaultIdleTimeout(opts.Transport)
	}
	if opts.RetryMin <= 0 {
		opts.RetryMin = time.Second
	}
	if opts.RetryMax < opts.RetryMin {
		opts.RetryMax = max(60*time.Second, opts.RetryMin)
	}
	if opts.Logger == nil {
		opts.Logger = hclog.NewNullLogger()
	}
	rt := opts.RoundTripper
	if rt == nil {
		rt = &http.Transport{
			Proxy:               http.ProxyFromEnvironment,
			MaxIdleConns:        256,
			MaxIdleConnsPerHost: 128,
			IdleConnTimeout:     90 * time.Second,
			ForceAttemptHTTP2:   true,
		}
	}
	if opts.Via != nil {
		rt = opts.Via.Transport(rt)
	}
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
	u.async.ctx, u.async.stop = context.WithCancel(context.Background())
	refresh := func() { u.requestRefresh() }
	// A server whose initialize result lacked prompts or resources (it had
	// none yet) still announces them later with list_changed.
	u.clients.make = func(caps *mcp.ClientCapabilities, control bool) *mcp.Client {
		o := &mcp.ClientOptions{Capabilities: caps}
		if control || u.opts.Transport != HTTP {
			// List changes come to the discovery session (over HTTP, on its
			// stream: a 2026-07-28 client opens subscriptions/listen for
			// them, which call sessions need not).
			o.ToolListChangedHandler = func(context.Context, *mcp.ToolListChangedRequest) { refresh() }
			o.PromptListChangedHandler = func(context.Context, *mcp.PromptListChangedRequest) { u.hasPrompts.Store(true); refresh() }
			o.ResourceListChangedHandler = func(context.Context, *mcp.ResourceListChangedRequest) { u.hasResources.Store(true); refresh() }
		}
		c := mcp.NewClient(&mcp.Implementation{Name: "mcp-mux", Version: "1"}, o)
		c.AddReceivingMiddleware(u.receive)
		return c
	}
	u.static = newStaticScrubber(&u.opts)
	u.stderr = newStderrLog(opts.Logger.Named("stderr"), u.retrying.Load, func(s string) string { return u.scrubber(nil).Scrub(s) })
	u.conns = make(map[*mcp.ClientSession]*conn)
	u.pool = newPool(u, opts.MaxSessions, opts.IdleTimeout)
	return u, nil
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
func (u *Upstream) Tools() []Tool {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.lists.Tools
}

// Lists returns everything the last discovery found.
func (u *Upstream) Lists() Lists {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.lists
}

// Err returns the last discovery error, or nil while the server is healthy.
func (u *Upstream) Err() error {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.err
}

// Stderr returns the last lines a stdio server wrote on stderr (up to 20,
// oldest first).
func (u *Upstream) Stderr() []string { return u.stderr.tail() }

// stderrError is a failure reason with the server's last stderr lines.
type stderrError struct {
	err   error
	lines []string
}

func (e *stderrError) Error() string {
	return e.err.Error() + "; stderr: " + strings.Join(e.lines, " | ")
}

func (e *stderrError) Unwrap() error { return e.err }

// Sessions returns the number of pooled call sessions.
func (u *Upstream) Sessions() int { return u.pool.size() }

func (u *Upstream) requestRefresh() {
	select {
	case u.refresh <- struct{}{}:
	default:
	}
}

// run keeps a control session, rediscovering tools whenever it comes up or
// the server announces a change, and retries with capped backoff.
func (u *Upstream) run() {
	bo := backoff{min: u.opts.RetryMin, max: u.opts.RetryMax, jitter: rand.Int64N}
	failures := 0
	for {
		began := time.Now()
		c, err := u.discover()
		if u.opts.OnDiscovery != nil {
			u.opts.OnDiscovery(time.Since(began), err == nil)
		}
		if err != nil {
			if lines := u.stderr.tail(); len(lines) > 0 {
				err = &stderrError{err: err, lines: lines}
			}
			// Both before Discovered closes: whoever waits on it sees the
			// reason, in Err and in the log.
			u.setErr(err)
			if failures == 0 {
				u.log.Warn("skipping upstream server", "reason", err)
			} else {
				u.log.Debug("upstream still unavailable", "reason", err, "attempt", failures+1)
			}
		}
		if err == nil {
			u.control.Store(c) // before Discovered: who waits on it may subscribe at once
		}
		u.firstOnce.Do(func() { close(u.discovered) })
		if err != nil {
			failures++
			u.retrying.Store(true)
			select {
			case <-u.ctx.Done():
				return
			case <-time.After(bo.next()):
			}
			continue
		}
		if failures > 0 {
			u.log.Info("upstream server is up", "after_attempts", failures+1)
		}
		failures = 0
		bo.reset()
		u.retrying.Store(false)
		u.setErr(nil)
		if !u.watch(c) {
			return
		}
		u.log.Warn("upstream control session ended; reconnecting")
		u.reconnects.Add(1)
	}
}

// backoff is the rediscovery schedule: the n-th wait after a failure is
// drawn from [d/2, d] with d = min·2ⁿ⁻¹ capped at max (jittered so that
// many muxes restarted together do not retry in step).
type backoff struct {
	min, max time.Duration
	jitter   func(n int64) int64 // uniform in [0, n)
	d        time.Duration
}

func (b *backoff) next() time.Duration {
	if b.d == 0 {
		b.d = b.min
	}
	wait := b.d/2 + time.Duration(b.jitter(int64(b.d)/2+1))
	b.d = min(b.d*2, b.max)
	return wait
}

func (b *backoff) reset() { b.d = 0 }

// discover dials a control session and lists its tools, all within InitTimeout.
func (u *Upstream) discover() (_ *conn, err error) {
	ctx := u.ctx
	if u.opts.InitTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, u.opts.InitTimeout)
		defer cancel()
	}
	start := time.Now()
	var sent http.Header
	defer func() { err = u.scrub(err, sent) }()
	if u.opts.BaseHeaders != nil {
		h, err := u.opts.BaseHeaders(ctx)
		if err != nil {
			u.log.Warn("discovering without credentials", "reason", u.scrub(err, nil))
			h = u.opts.Header
		}
		sent = h
		ctx = withHeaders(ctx, h)
	}
	c, err := u.dial(ctx, Key{}, true)
	if err != nil {
		var se *StatusError
		if u.opts.OnUnauthorized != nil && sent != nil && errors.As(err, &se) && se.Code == http.StatusUnauthorized {
			u.opts.OnUnauthorized(sent)
		}
		return nil, err
	}
	lists, err := u.list(ctx, c)
	if err != nil {
		c.close()
		if ctx.Err() != nil && u.ctx.Err() == nil {
			return nil, fmt.Errorf("tool discovery timed out after %s", u.opts.InitTimeout)
		}
		return nil, err
	}
	u.publish(lists)
	u.log.Info("upstream discovered", "tools", len(lists.Tools), "prompts", len(lists.Prompts),
		"resources", len(lists.Resources), "templates", len(lists.Templates), "duration", time.Since(start).Round(time.Millisecond))
	return c, nil
}

// watch holds the control session until it ends (false: the upstream is closing).
func (u *Upstream) watch(c *conn) bool {
	defer c.close()
	u.control.Store(c)
	defer u.control.CompareAndSwap(c, nil)
	u.resubscribe(c)
	for {
		select {
		case <-u.ctx.Done():
			return false
		case <-c.done:
			return true
		case <-u.refresh:
			ctx, cancel := context.WithTimeout(u.ctx, max(u.opts.InitTimeout, 5*time.Second))
			lists, err := u.list(ctx, c)
			cancel()
			if err != nil {
				u.log.Warn("refreshing lists failed", "err", u.scrub(err, headersFrom(ctx)))
				continue
			}
			u.publish(lists)
		}
	}
}

func (u *Upstream) setErr(err error) {
	u.mu.Lock()
	u.err = err
	u.mu.Unlock()
}

func (u *Upstream) publish(l Lists) {
	if u.opts.Transport == HTTP {
		ix, invalid := buildParamIndex(l.Tools)
		u.annotations.Store(&ix)
		for _, name := range invalid {
			u.log.Warn("ignoring the invalid x-mcp-header annotations of a tool (calls get no Mcp-Param headers)", "tool", name)
		}
	}
	u.mu.Lock()
	u.lists = l
	u.err = nil // healthy before OnChange looks
	u.mu.Unlock()
	if u.opts.OnChange != nil {
		u.opts.OnChange()
	}
}

// list fetches every list the server's capabilities announce. Only tools
// are required (of a server that announces them): a prompts or resources
// list that fails — method not found, any other error — is empty, with one
// warning until it works again, so a server whose optional lists are broken
// still serves its tools, and one without tools still serves the rest.
func (u *Upstream) list(ctx context.Context, c *conn) (Lists, error) {
	l := Lists{Capabilities: c.cs.InitializeResult().Capabilities}
	caps := l.Capabilities
	if caps == nil {
		caps = &mcp.ServerCapabilities{}
	}
	var err error
	if caps.Tools != nil {
		if l.Tools, err = u.listTools(ctx, c); err != nil {
			return l, fmt.Errorf("listing tools: %w", err)
		}
	}
	optional := func(method, field, key string) ([]Item, error) {
		items, err := u.listItems(ctx, c, method, field, key)
		if err != nil && ctx.Err() != nil {
			return nil, fmt.Errorf("%s: %w", method, err) // the round timed out or is closing
		}
		u.noteOptional(method, err)
		return items, nil
	}
	if caps.Prompts != nil || u.hasPrompts.Load() {
		if l.Prompts, err = optional("prompts/list", "prompts", "name"); err != nil {
			return l, err
		}
	}
	if caps.Resources != nil || u.hasResources.Load() {
		if l.Resources, err = optional("resources/list", "resources", "uri"); err != nil {
			return l, err
		}
		if l.Templates, err = optional("resources/templates/list", "resourceTemplates", "uriTemplate"); err != nil {
			return l, err
		}
	}
	return l, nil
}

// noteOptional warns once when an optional list fails, and again only after
// it worked in between.
func (u *Upstream) noteOptional(method string, err error) {
	u.mu.Lock()
	if u.optFailed == nil {
		u.optFailed = make(map[string]bool)
	}
	warn := err != nil && !u.optFailed[method]
	u.optFailed[method] = err != nil
	u.mu.Unlock()
	if warn {
		u.log.Warn("optional list failed; serving it empty", "method", method, "err", err)
	}
}

// listItems pages through a list method, keying each item by keyField.
func (u *Upstream) listItems(ctx context.Context, c *conn, method, field, keyField string) ([]Item, error) {
	var items []Item
	var cursor string
	budget := listBudget{method: method}
	for range maxListPages {
		var params json.RawMessage
		if cursor != "" {
			params, _ = json.Marshal(map[string]string{"cursor": cursor})
		}
		raw, err := c.request(ctx, u, method, params, nil)
		if err != nil {
			return nil, err
		}
		var page map[string]json.RawMessage
		if err := json.Unmarshal(raw, &page); err != nil {
			return nil, fmt.Errorf("decoding %s result: %w", method, err)
		}
		var list []json.RawMessage
		if err := json.Unmarshal(page[field], &list); err != nil && page[field] != nil {
			return nil, fmt.Errorf("decoding %s result: %w", method, err)
		}
		if err := budget.spend(len(raw), len(list)); err != nil {
			return nil, err
		}
		for _, it := range list {
			var head map[string]json.RawMessage
			var key string
			if json.Unmarshal(it, &head) != nil || json.Unmarshal(head[keyField], &key) != nil || key == "" {
				u.log.Warn("ignoring a listed item without a "+keyField, "method", method)
				continue
			}
			items = append(items, Item{Key: key, Raw: it})
		}
		cursor = ""
		_ = json.Unmarshal(page["nextCursor"], &cursor)
		if cursor == "" {
			return items, nil
		}
	}
	return nil, fmt.Errorf("%s did not end after %d pages", method, maxListPages)
}

const maxListPages = 1000

func (u *Upstream) listTools(ctx context.Context, c *conn) ([]Tool, error) {
	var tools []Tool
	var cursor string
	budget := listBudget{method: "tools/list"}
	for range maxListPages {
		var params json.RawMessage
		if cursor != "" {
			params, _ = json.Marshal(map[string]string{"cursor": cursor})
		}
		raw, err := c.request(ctx, u, "tools/list", params, nil)
		if err != nil {
			return nil, err
		}
		var page struct {
			Tools      []json.RawMessage `json:"tools"`
			NextCursor string            `json:"nextCursor"`
		}
		if err := json.Unmarshal(raw, &page); err != nil {
			return nil, fmt.Errorf("decoding tools/list result: %w", err)
		}
		if err := budget.spend(len(raw), len(page.Tools)); err != nil {
			return nil, err
		}
		for _, t := range page.Tools {
			var head struct {
				Name string `json:"name"`
			}
			if err := json.Unmarshal(t, &head); err != nil || head.Name == "" {
				u.log.Warn("ignoring a tool without a name")
				continue
			}
			tools = append(tools, Tool{Name: head.Name, Raw: t})
		}
		if page.NextCursor == "" {
			return tools, nil
		}
		cursor = page.NextCursor
	}
	return nil, fmt.Errorf("tools/list did not end after %d pages", maxListPages)
}

// scope reduces a caller key to the configured session scope.
func (u *Upstream) scope(k Key) Key {
	switch u.opts.Scope {
	case ScopeShared:
		return Key{Cred: k.Cred, Caps: k.Caps}
	case ScopeUser:
		return Key{User: k.User, Cred: k.Cred, Caps: k.Caps}
	}
	return k
}

// CallTool calls tools/call with raw params on the session for key and
// returns the raw CallToolResult, bounded by CallTimeout.
func (u *Upstream) CallTool(ctx context.Context, key Key, params json.RawMessage, extra http.Header) (json.RawMessage, error) {
	if u.opts.CallTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, u.opts.CallTimeout)
		defer cancel()
		raw, err := u.Request(ctx, key, "tools/call", params, extra)
		if err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
			if errors.Is(err, errAllBusy) {
				return nil, fmt.Errorf("tool call timed out after %s waiting for a free session (all %d are busy)", u.opts.CallTimeout, u.opts.MaxSessions)
			}
			return nil, fmt.Errorf("tool call timed out after %s", u.opts.CallTimeout)
		}
		return raw, err
	}
	return u.Request(ctx, key, "tools/call", params, extra)
}

// Request sends method with raw params on the session for key and returns
// the raw result. A JSON-RPC error from the server is returned as
// *wire.Error; anything else is a transport failure. A request that provably
// did not reach the server (dead stdio process, expired HTTP session) is
// retried once on a fresh session.
//
// extra, when non-nil, is the complete header set of the caller: it is sent
// with this request and, when the request opens a new session, with that
// session's own HTTP requests (initialize, the event stream, DELETE), since
// servers bind sessions to the credentials that opened them. Callers with
// different credentials must use different keys (Key.Cred).
func (u *Upstream) Request(ctx context.Context, key Key, method string, params json.RawMessage, extra http.Header) (json.RawMessage, error) {
	key = u.scope(key)
	if extra != nil {
		ctx = withHeaders(ctx, extra)
	}
	for attempt := 0; ; attempt++ {
		c, err := u.pool.get(ctx, key)
		if err != nil {
			return nil, u.scrub(err, extra)
		}
		start := time.Now()
		raw, err := c.request(ctx, u, method, params, extra)
		if err == nil {
			u.pool.release(key, c)
			return raw, nil
		}
		var rpcErr *wire.Error
		if errors.As(err, &rpcErr) {
			u.pool.release(key, c)
			return nil, u.scrub(err, extra)
		}
		if ctx.Err() != nil {
			u.pool.release(key, c)
			return nil, ctx.Err()
		}
		notRun := errors.Is(err, errSessionMissing) || errors.Is(err, mcp.ErrSessionMissing) || errors.Is(err, errNotSent) ||
			(c.proc != nil && c.proc.exitedBefore(start))
		if notRun || !c.alive() {
			u.pool.drop(key, c)
		} else {
			u.pool.release(key, c)
		}
		if notRun && attempt == 0 {
			u.reconnects.Add(1)
			u.logFor(ctx).Debug("upstream session gone before the request; reconnecting", "reason", u.scrub(err, extra))
			continue
		}
		return nil, u.scrub(err, extra)
	}
}

// logFor is the logger for a line about a call made with ctx: it names the
// downstream request's id (internal/reqid) when ctx carries one.
func (u *Upstream) logFor(ctx context.Context) hclog.Logger { return reqid.Logger(ctx, u.log) }

// Notify sends a notification on the session for key, if one is open. It
// is how a client's notifications/roots/list_changed reaches the servers its
// calls went to.
func (u *Upstream) Notify(key Key, method string, params json.RawMessage) {
	c := u.pool.peek(u.scope(key))
	if c == nil || !c.alive() {
		return
	}
	if c.direct != nil {
		body := wire.AppendNotification(nil, method, params)
		u.async.Go(func() { c.direct.post(body) })
		return
	}
	ctx, cancel := context.WithTimeout(u.ctx, 5*time.Second)
	defer cancel()
	_ = c.raw.Connection.Write(ctx, &jsonrpc.Request{Method: method, Params: params})
}

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

// ReleaseThread closes the call sessions that belong to thread.
func (u *Upstream) ReleaseThread(thread string) {
	u.pool.closeWhere(func(k Key) bool { return k.Thread == thread })
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

func (u *Upstream) track(cs *mcp.ClientSession, c *conn) {
	u.connsMu.Lock()
	u.conns[cs] = c
	u.connsMu.Unlock()
}

func (u *Upstream) untrack(cs *mcp.ClientSession) {
	u.connsMu.Lock()
	delete(u.conns, cs)
	u.connsMu.Unlock()
}

func (u *Upstream) connOf(cs *mcp.ClientSession) *conn {
	u.connsMu.Lock()
	defer u.connsMu.Unlock()
	return u.conns[cs]
}

// serverRequests are the server-to-client requests forwarded to the caller.
var serverRequests = map[string]bool{"sampling/createMessage": true, "elicitation/create": true, "roots/list": true}

// forwardedNotifications are passed to the Handler.
var forwardedNotifications = map[string]bool{"notifications/progress": true, "notifications/message": true, "notifications/resources/updated": true}

// receive is the SDK client's receiving middleware: it hands server-to-client
// traffic that reached the SDK to the Handler. On stdio and SSE the forwarded
// requests and notifications are taken off the connection before the SDK sees
// them (rawTransport), and on HTTP a call's traffic rides its own stream
// (onStreamMessage); what is left is the traffic of SDK-owned HTTP streams.
func (u *Upstream) receive(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if !serverRequests[method] && !forwardedNotifications[method] {
			return next(ctx, method, req)
		}
		cs, _ := req.GetSession().(*mcp.ClientSession)
		c := u.connOf(cs)
		if c == nil {
			c = &conn{control: true}
		}
		params, err := sdkParams(req.GetParams())
		if err != nil {
			return nil, err
		}
		if forwardedNotifications[method] {
			u.onNotification(c, method, params)
			return nil, nil
		}
		base := c.callCtx()
		if base == nil {
			base = context.WithoutCancel(ctx)
		}
		rctx, stop := mergeCancel(base, ctx)
		raw, err := u.answer(rctx, c, method, params)
		stop()
		if err != nil {
			var we *wire.Error
			if errors.As(err, &we) {
				return nil, &jsonrpc.Error{Code: we.Code, Message: we.Message, Data: we.Data}
			}
			return nil, err
		}
		return &mcpwire.RawResult{Raw: raw}, nil
	}
}

// sdkParams re-encodes params the SDK decoded, leaving out what was absent
// (the SDK's structs would say null, or "" for a missing elicitation mode).
func sdkParams(p mcp.Params) (json.RawMessage, error) {
	if p == nil || reflect.ValueOf(p).IsNil() {
		return nil, nil
	}
	b, err := json.Marshal(p)
	if err != nil {
		return nil, err
	}
	if ep, ok := p.(*mcp.ElicitParams); ok && ep.Mode == "" {
		var m map[string]json.RawMessage
		if json.Unmarshal(b, &m) == nil {
			delete(m, "mode")
			b, _ = json.Marshal(m)
		}
	}
	return b, nil
}

// answer handles one server-to-client request arriving on c. params are the
// server's bytes; the result is the client's.
func (u *Upstream) answer(ctx context.Context, c *conn, method string, params json.RawMessage) (json.RawMessage, error) {
	switch {
	case method == "ping":
		return json.RawMessage(`{}`), nil
	case c.control && method == "roots/list":
		// No client stands behind the discovery session: it has no roots.
		return json.RawMessage(`{"roots":[]}`), nil
	case serverRequests[method] && !c.control && u.opts.Handler != nil:
		return u.opts.Handler.ServerRequest(ctx, c.key, method, params)
	}
	return nil, &wire.Error{Code: jsonrpc.CodeMethodNotFound, Message: method + " is not available on this session"}
}

// onRawRequest answers a server request rawTransport took off a stdio or SSE
// connection, in the background; the server may cancel it.
func (u *Upstream) onRawRequest(c *conn, rc *rawConn, id jsonrpc.ID, method string, params json.RawMessage) {
	base := c.callCtx()
	if base == nil {
		base = u.ctx
	}
	ctx, stop := mergeCancel(base, u.ctx)
	key := rawID(id)
	r := c.trackServerRequest(key, stop)
	u.async.Go(func() {
		defer c.finishServerRequest(key, r)
		raw, err := u.answer(ctx, c, method, params)
		rc.respond(id, raw, err)
	})
}

// onRawCancelled ends the answering of a server request the server cancelled.
func (c *conn) onRawCancelled(id string) bool {
	c.mu.Lock()
	_, ok := c.serverReqs[id]
	c.mu.Unlock()
	if ok {
		c.cancelServerRequest(id)
	}
	return ok
}

// onNotification delivers a forwarded notification read off c.
func (u *Upstream) onNotification(c *conn, method string, params json.RawMessage) {
	if u.opts.Handler == nil || (c.control && method != "notifications/resources/updated") {
		return
	}
	var ctx context.Context
	switch method {
	case "notifications/resources/updated":
		if !u.holdsSubscription(params) {
			return // a URI mcp-mux did not subscribe to on this server
		}
		params = dropSubscriptionID(params)
	case "notifications/progress":
		if ctx = c.progress.call(params); ctx == nil {
			return // not a call this session carries (progress.go)
		}
	}
	if ctx == nil {
		ctx = c.callCtx()
	}
	if ctx == nil {
		ctx = u.ctx
	}
	u.opts.Handler.ServerNotification(ctx, c.key, method, params)
}

// onStreamMessage handles a notification or request that arrived on the
// stream of a call made with ctx on c (HTTP fast path).
func (u *Upstream) onStreamMessage(ctx context.Context, c *conn, m *wire.Message) {
	switch {
	case m.IsNotification() && m.Method == "notifications/progress":
		// Progress may name any call of this session, not just this stream's.
		if ctx := c.progress.call(m.Params); ctx != nil && u.opts.Handler != nil && !c.control {
			u.opts.Handler.ServerNotification(ctx, c.key, m.Method, m.Params)
		}
	case m.IsNotification() && m.Method == "notifications/cancelled":
		var p struct {
			RequestID json.RawMessage `json:"requestId"`
		}
		if json.Unmarshal(m.Params, &p) == nil {
			c.cancelServerRequest(string(p.RequestID))
		}
	case m.IsNotification():
		if forwardedNotifications[m.Method] && u.opts.Handler != nil && !c.control {
			u.opts.Handler.ServerNotification(ctx, c.key, m.Method, m.Params)
		}
	case m.IsCall():
		ctx, cancel := context.WithCancel(ctx)
		id := string(m.ID)
		r := c.trackServerRequest(id, cancel)
		u.async.Go(func() {
			defer c.finishServerRequest(id, r)
			raw, err := u.answer(ctx, c, m.Method, m.Params)
			c.direct.respond(m.ID, raw, err)
		})
	}
}

// mergeCancel returns a context with a's values that ends when either ends.
// Call stop when done with it.
func mergeCancel(a, b context.Context) (ctx context.Context, stop func()) {
	ctx, cancel := context.WithCancel(a)
	unwatch := context.AfterFunc(b, cancel)
	return ctx, func() { unwatch(); cancel() }
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
