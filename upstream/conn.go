package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/internal/wire"
)

// ProtocolVersion is the MCP version mcp-mux initializes sessions with when
// an upstream does not speak (or is pinned below) 2026-07-28 (era.go).
const ProtocolVersion = "2025-11-25"

// conn is one initialized upstream session.
type conn struct {
	key     Key
	control bool // the discovery session: its server-to-client traffic has no caller
	cs      *mcp.ClientSession
	proc    *process       // stdio only
	raw     *rawConn       // stdio and sse
	direct  *direct        // http only
	modern  *modernRequest // a 2026-07-28 stdio session: the _meta its requests carry (era.go)
	cancel  context.CancelFunc
	done    chan struct{} // closed when the session has ended

	mu         sync.Mutex
	seq        uint64
	inflight   map[uint64]context.Context // stdio/sse calls in progress, for routing server-to-client traffic
	serverReqs map[string]*serverReq      // server-to-client requests being answered, by raw id

	progress progressCalls // the progress tokens of this session's calls in flight (progress.go)
}

// serverReq is the handling of one server-to-client request.
type serverReq struct{ cancel context.CancelFunc }

func (c *conn) trackServerRequest(id string, cancel context.CancelFunc) *serverReq {
	r := &serverReq{cancel: cancel}
	c.mu.Lock()
	if c.serverReqs == nil {
		c.serverReqs = make(map[string]*serverReq)
	}
	c.serverReqs[id] = r
	c.mu.Unlock()
	return r
}

// cancelServerRequest ends the handling of server-to-client request id
// (the server cancelled it).
func (c *conn) cancelServerRequest(id string) {
	c.mu.Lock()
	r := c.serverReqs[id]
	delete(c.serverReqs, id)
	c.mu.Unlock()
	if r != nil {
		r.cancel()
	}
}

// finishServerRequest ends r, the handling of request id, once answered.
// The id is forgotten only if it is still r's: a server may reuse an id as
// soon as it has its answer, and the newer request must not be cancelled.
func (c *conn) finishServerRequest(id string, r *serverReq) {
	c.mu.Lock()
	if c.serverReqs[id] == r {
		delete(c.serverReqs, id)
	}
	c.mu.Unlock()
	r.cancel()
}

// dial starts a session: for stdio a new process, for http/sse a new
// upstream session. The whole bring-up is bounded by InitTimeout.
func (u *Upstream) dial(ctx context.Context, key Key, control bool) (*conn, error) {
	// The session outlives the call that opened it and keeps only the call's
	// headers: other values of the caller's context (the SDK server's own
	// request state, such as a downstream 2026-07-28 protocol version) must
	// not reach the upstream client.
	base := context.Background()
	if h := headersFrom(ctx); h != nil {
		base = withHeaders(base, h)
	}
	connCtx, cancel := context.WithCancel(base)
	c := &conn{key: key, control: control, cancel: cancel, done: make(chan struct{})}
	var timedOut atomic.Bool
	stop := func() bool { return true }
	if u.opts.InitTimeout > 0 {
		t := time.AfterFunc(u.opts.InitTimeout, func() { timedOut.Store(true); cancel() })
		stop = t.Stop
	}
	// The caller's cancellation also aborts the bring-up.
	unwatch := context.AfterFunc(ctx, cancel)
	defer unwatch()

	// The SDK reports a refused initialize only as text ("Unauthorized"), so
	// the HTTP status is recorded here and returned as a *StatusError: a 401
	// must let the caller refresh its token and retry.
	var refused atomic.Int32
	rt := statusRecorder{base: u.sdkHTTP.Transport, refused: &refused}
	var transport mcp.Transport
	var version string // the session's ClientSessionOptions.ProtocolVersion
	switch u.opts.Transport {
	case Stdio:
		p, err := startProcess(&u.opts, u.log, u.stderr.writer())
		if err == nil {
			version, p, err = u.stdioVersion(connCtx, p) // stdioera.go
		}
		if err != nil {
			if p != nil {
				p.stop()
			}
			stop()
			cancel()
			if timedOut.Load() {
				return nil, fmt.Errorf("initialize timed out after %s", u.opts.InitTimeout)
			}
			return nil, err
		}
		c.proc = p
		transport = &rawTransport{inner: &lineTransport{p: p},
			notify: func(method string, params json.RawMessage) { u.onNotification(c, method, params) },
			request: func(rc *rawConn, id jsonrpc.ID, method string, params json.RawMessage) {
				u.onRawRequest(c, rc, id, method, params)
			},
			cancelled: c.onRawCancelled}
	case SSE:
		transport = &rawTransport{inner: &mcp.SSEClientTransport{Endpoint: u.opts.URL, HTTPClient: sessionClient(rt, connCtx)},
			notify: func(method string, params json.RawMessage) { u.onNotification(c, method, params) },
			request: func(rc *rawConn, id jsonrpc.ID, method string, params json.RawMessage) {
				u.onRawRequest(c, rc, id, method, params)
			},
			cancelled: c.onRawCancelled}
	case HTTP:
		transport = &mcp.StreamableClientTransport{Endpoint: u.opts.URL, HTTPClient: sessionClient(rt, connCtx), MaxRetries: 2,
			// Only the discovery session keeps an event stream: server-initiated
			// traffic of a call rides the call's own stream, list changes and
			// resource updates arrive on the discovery session, and an idle
			// stream per call session costs the server on every call.
			DisableStandaloneSSE: !control}
	default:
		stop()
		cancel()
		return nil, fmt.Errorf("unsupported transport %q", u.opts.Transport)
	}
	hdr := headersFrom(ctx)
	if hdr == nil {
		hdr = u.opts.Header
	}
	if version == "" {
		version = u.sessionVersion(connCtx, hdr)
	}
	cs, err := u.clients.forKey(key, control).Connect(connCtx, transport, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if !stop() || err != nil {
		if cs != nil {
			_ = cs.Close()
		}
		c.kill()
		// The caller's deadline (discovery's is InitTimeout too) may fire first.
		if timedOut.Load() || errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return nil, fmt.Errorf("initialize timed out after %s", u.opts.InitTimeout)
		}
		if err == nil {
			err = context.Canceled
		}
		if code := refused.Load(); code != 0 {
			return nil, fmt.Errorf("initialize: %w (%w)", err, &StatusError{Code: int(code)})
		}
		return nil, fmt.Errorf("initialize: %w", err)
	}
	c.cs = cs
	if rt, ok := transport.(*rawTransport); ok {
		c.raw = rt.conn
	}
	if u.opts.Transport == Stdio {
		if w := c.proc.mutedStderr; w != nil {
			w.muted.Store(false)
		}
		v := cs.InitializeResult().ProtocolVersion
		u.era.Store(&v)
		if v >= VersionModern {
			c.modern = newModernRequest(sessionCaps(key, control))
		}
	}
	if u.opts.Transport == HTTP {
		v := cs.InitializeResult().ProtocolVersion
		u.era.Store(&v)
		c.direct = &direct{url: u.opts.URL, client: u.http, header: hdr, sessionID: cs.ID(),
			protocol: v, maxEvent: maxFrame, async: &u.async}
		if v >= VersionModern {
			c.direct.modern = newModernRequest(sessionCaps(key, control))
			c.direct.modern.annotations = &u.annotations
		}
	}
	u.track(cs, c)
	go func() {
		_ = cs.Wait()
		u.untrack(cs)
		close(c.done)
	}()
	if caps := cs.InitializeResult().Capabilities; !control && caps != nil && caps.Logging != nil && cs.InitializeResult().ProtocolVersion < VersionModern {
		// (A 2026-07-28 server gets the level with every request instead.)
		// Ask for everything: each downstream session filters by its own level.
		lctx, lcancel := context.WithTimeout(ctx, 5*time.Second)
		_, _ = c.request(lctx, u, "logging/setLevel", json.RawMessage(`{"level":"debug"}`), nil)
		lcancel()
	}
	return c, nil
}

func (c *conn) alive() bool {
	select {
	case <-c.done:
		return false
	default:
	}
	if c.proc != nil {
		select {
		case <-c.proc.exited:
			return false
		default:
		}
	}
	return true
}

// close ends the session and, for stdio, the process group.
func (c *conn) close() {
	if c.cs != nil {
		_ = c.cs.Close()
	}
	c.kill()
}

func (c *conn) kill() {
	c.cancel()
	if c.proc != nil {
		c.proc.stop()
	}
}

// callCtx returns the context of the newest call in progress, if any: the
// request a server-to-client message most likely belongs to.
func (c *conn) callCtx() context.Context {
	c.mu.Lock()
	defer c.mu.Unlock()
	var best uint64
	var ctx context.Context
	for id, x := range c.inflight {
		if id >= best {
			best, ctx = id, x
		}
	}
	return ctx
}

// request sends method with raw params and returns the raw result.
func (c *conn) request(ctx context.Context, u *Upstream, method string, params json.RawMessage, extra http.Header) (json.RawMessage, error) {
	defer c.progress.bind(ctx)()
	if c.direct != nil {
		// What the server sends while serving this request arrives on its own
		// stream, so it needs no in-flight bookkeeping.
		return c.direct.call(ctx, method, params, extra, func(m *wire.Message) { u.onStreamMessage(ctx, c, m) })
	}
	c.mu.Lock()
	if c.inflight == nil {
		c.inflight = make(map[uint64]context.Context)
	}
	c.seq++
	id := c.seq
	c.inflight[id] = ctx
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.inflight, id)
		c.mu.Unlock()
	}()
	if c.modern != nil {
		params = c.modern.params(params)
	}
	return c.raw.call(ctx, method, params)
}

// sessionCaps is the client capabilities a 2026-07-28 request of a session
// declares: its caller's, or for discovery all that mcp-mux can relay.
func sessionCaps(key Key, control bool) string {
	if control {
		return discoveryCapsJSON()
	}
	return key.Caps
}

// statusRecorder notes a request refused with 401 or 403.
type statusRecorder struct {
	base    http.RoundTripper
	refused *atomic.Int32
}

func (t statusRecorder) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(r)
	if err == nil && (resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden) {
		t.refused.Store(int32(resp.StatusCode))
	}
	return resp, err
}
