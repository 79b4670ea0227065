// Package upstream connects mcp-mux to one configured MCP server.
//
// An Upstream owns every session mcp-mux holds with that server: a control
// session used for discovery and for tools/list_changed, and a pool of call
// sessions scoped by (user, thread) with an LRU cap and an idle timeout.
// Transports are stdio (a child process in its own process group, killed as
// a group), Streamable HTTP and legacy SSE. Results travel as raw JSON so that
// nothing the server sends is lost or reshaped on the way.
//
// An Upstream never blocks its caller on a broken server: discovery runs in
// the background, retries with capped backoff, and reports tool lists through
// Options.OnTools.
package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/internal/wire"
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

// Options configure an Upstream.
type Options struct {
	Name      string
	Transport string // Stdio, HTTP or SSE

	Command string            // stdio
	Args    []string          // stdio
	Env     map[string]string // stdio, added to a small inherited base set
	Dir     string            // stdio working directory

	URL    string      // http, sse
	Header http.Header // static headers on every upstream HTTP request

	// InitTimeout bounds starting a session (spawn + initialize) and a
	// discovery round. Zero means no limit.
	InitTimeout time.Duration
	// CallTimeout bounds one tools/call. Zero means no limit.
	CallTimeout time.Duration

	Scope       string        // ScopeThread (default), ScopeUser or ScopeShared
	MaxSessions int           // pooled call sessions; default 256
	IdleTimeout time.Duration // a pooled session unused this long is closed; default 10m

	RetryMin time.Duration // first rediscovery delay after a failure; default 1s
	RetryMax time.Duration // cap of the rediscovery backoff; default 60s

	// Transport for HTTP and SSE; nil uses a dedicated keep-alive transport.
	RoundTripper http.RoundTripper
	Logger       hclog.Logger
	// OnTools receives every successfully discovered tool list.
	OnTools func([]Tool)
	// OnMessage receives notifications and requests that arrive on the
	// stream of a call made on the HTTP fast path.
	OnMessage func(*wire.Message)
}

// Tool is one upstream tool: its raw name and its JSON exactly as listed.
type Tool struct {
	Name string
	Raw  json.RawMessage
}

// Key identifies the caller a call session belongs to.
type Key struct{ User, Thread string }

// Upstream is one configured MCP server.
type Upstream struct {
	opts    Options
	log     hclog.Logger
	client  *mcp.Client
	http    *http.Client // fast path
	sdkHTTP *http.Client // SDK transports (static headers added)
	pool    *pool

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	refresh    chan struct{}
	discovered chan struct{}
	firstOnce  sync.Once

	mu    sync.Mutex
	tools []Tool
	err   error // last discovery error, nil when healthy
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
		opts.MaxSessions = 256
	}
	if opts.IdleTimeout <= 0 {
		opts.IdleTimeout = 10 * time.Minute
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
	u.client = mcp.NewClient(&mcp.Implementation{Name: "mcp-mux", Version: "1"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { u.requestRefresh() },
	})
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
	return u.tools
}

// Err returns the last discovery error, or nil while the server is healthy.
func (u *Upstream) Err() error {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.err
}

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
	delay := u.opts.RetryMin
	failures := 0
	for {
		c, err := u.discover()
		u.firstOnce.Do(func() { close(u.discovered) })
		if err != nil {
			u.setErr(err)
			if failures == 0 {
				u.log.Warn("skipping upstream server", "reason", err)
			} else {
				u.log.Debug("upstream still unavailable", "reason", err, "attempt", failures+1)
			}
			failures++
			jitter := time.Duration(rand.Int64N(int64(delay)/2 + 1))
			select {
			case <-u.ctx.Done():
				return
			case <-time.After(delay/2 + jitter):
			}
			delay = min(delay*2, u.opts.RetryMax)
			continue
		}
		if failures > 0 {
			u.log.Info("upstream server is up", "after_attempts", failures+1)
		}
		failures, delay = 0, u.opts.RetryMin
		u.setErr(nil)
		if !u.watch(c) {
			return
		}
		u.log.Warn("upstream control session ended; reconnecting")
	}
}

// discover dials a control session and lists its tools, all within InitTimeout.
func (u *Upstream) discover() (*conn, error) {
	ctx := u.ctx
	if u.opts.InitTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, u.opts.InitTimeout)
		defer cancel()
	}
	start := time.Now()
	c, err := u.dial(ctx)
	if err != nil {
		return nil, err
	}
	tools, err := u.listTools(ctx, c)
	if err != nil {
		c.close()
		if ctx.Err() != nil && u.ctx.Err() == nil {
			return nil, fmt.Errorf("tool discovery timed out after %s", u.opts.InitTimeout)
		}
		return nil, fmt.Errorf("listing tools: %w", err)
	}
	u.publish(tools)
	u.log.Info("upstream discovered", "tools", len(tools), "duration", time.Since(start).Round(time.Millisecond))
	return c, nil
}

// watch holds the control session until it ends (false: the upstream is closing).
func (u *Upstream) watch(c *conn) bool {
	defer c.close()
	for {
		select {
		case <-u.ctx.Done():
			return false
		case <-c.done:
			return true
		case <-u.refresh:
			ctx, cancel := context.WithTimeout(u.ctx, max(u.opts.InitTimeout, 5*time.Second))
			tools, err := u.listTools(ctx, c)
			cancel()
			if err != nil {
				u.log.Warn("refreshing tool list failed", "err", err)
				continue
			}
			u.publish(tools)
		}
	}
}

func (u *Upstream) setErr(err error) {
	u.mu.Lock()
	u.err = err
	u.mu.Unlock()
}

func (u *Upstream) publish(tools []Tool) {
	u.mu.Lock()
	u.tools = tools
	u.mu.Unlock()
	if u.opts.OnTools != nil {
		u.opts.OnTools(tools)
	}
}

const maxListPages = 1000

func (u *Upstream) listTools(ctx context.Context, c *conn) ([]Tool, error) {
	var tools []Tool
	var cursor string
	for range maxListPages {
		var params json.RawMessage
		if cursor != "" {
			params, _ = json.Marshal(map[string]string{"cursor": cursor})
		}
		raw, err := c.request(ctx, "tools/list", params, nil)
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
		return Key{}
	case ScopeUser:
		return Key{User: k.User}
	}
	return k
}

// CallTool calls the raw tool name on the session for key with raw
// arguments and _meta, and returns the raw CallToolResult. A JSON-RPC error
// from the server is returned as *wire.Error; anything else is a transport
// failure. A call that provably did not reach the server (dead stdio process,
// expired HTTP session) is retried once on a fresh session.
func (u *Upstream) CallTool(ctx context.Context, key Key, params json.RawMessage, extra http.Header) (json.RawMessage, error) {
	key = u.scope(key)
	if u.opts.CallTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, u.opts.CallTimeout)
		defer cancel()
	}
	for attempt := 0; ; attempt++ {
		c, err := u.pool.get(ctx, key)
		if err != nil {
			return nil, err
		}
		start := time.Now()
		raw, err := c.request(ctx, "tools/call", params, extra)
		if err == nil {
			u.pool.release(key, c)
			return raw, nil
		}
		var rpcErr *wire.Error
		if errors.As(err, &rpcErr) {
			u.pool.release(key, c)
			return nil, err
		}
		if ctx.Err() != nil {
			u.pool.release(key, c)
			if errors.Is(ctx.Err(), context.DeadlineExceeded) && u.opts.CallTimeout > 0 {
				return nil, fmt.Errorf("tool call timed out after %s", u.opts.CallTimeout)
			}
			return nil, ctx.Err()
		}
		notRun := errors.Is(err, errSessionMissing) || errors.Is(err, mcp.ErrSessionMissing) ||
			(c.proc != nil && c.proc.exitedBefore(start))
		if notRun || !c.alive() {
			u.pool.drop(key, c)
		} else {
			u.pool.release(key, c)
		}
		if notRun && attempt == 0 {
			u.log.Debug("upstream session gone before the call; reconnecting", "reason", err)
			continue
		}
		return nil, err
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
	u.pool.closeWhere(func(Key) bool { return true })
	return nil
}

// staticHeaders adds the configured headers to every SDK request.
type staticHeaders struct {
	base   http.RoundTripper
	header http.Header
}

func (t staticHeaders) RoundTrip(r *http.Request) (*http.Response, error) {
	if len(t.header) == 0 {
		return t.base.RoundTrip(r)
	}
	r2 := r.Clone(r.Context())
	for k, v := range t.header {
		r2.Header[k] = v
	}
	return t.base.RoundTrip(r2)
}

var _ http.RoundTripper = staticHeaders{}
