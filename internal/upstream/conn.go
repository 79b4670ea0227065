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

	"github.com/mcp-mux/mcp-mux/internal/telemetry"
	"github.com/mcp-mux/mcp-mux/internal/upstream/modernreq"
	"github.com/mcp-mux/mcp-mux/internal/upstream/rawconn"
	"github.com/mcp-mux/mcp-mux/internal/upstream/stdioproc"
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
	proc    *stdioproc.Process // stdio only
	raw     *rawconn.Conn      // stdio and sse
	direct  *direct            // http only
	modern  *modernreq.Request // a 2026-07-28 stdio session: the _meta its requests carry
	cancel  context.CancelFunc
	done    chan struct{} // closed when the session has ended (end)
	ended   sync.Once
	conns   *connTable // the table that holds it once it is up; close takes it out

	mu         sync.Mutex
	seq        uint64
	inflight   map[uint64]*callRoute // stdio/sse calls in progress, for routing server-to-client traffic (returnpath.go)
	serverReqs map[string]*serverReq // server-to-client requests being answered, by raw id

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
// upstream session. The whole bring-up is bounded by InitTimeout (each
// attempt: a legacy session that turned out sessionless is dialed again,
// on 2026-07-28; era.go).
func (u *Upstream) dial(ctx context.Context, key Key, control bool) (_ *conn, err error) {
	// A session opened for a call is a step of its trace (package telemetry).
	ctx, span := u.opts.Telemetry.Internal(ctx, "connect "+u.opts.Name, nil, telemetry.ServerAttr.String(u.opts.Name))
	defer func() { span.End(err, false) }()
	c, err := u.dialOnce(ctx, key, control)
	if errors.Is(err, errLegacySessionless) {
		span.Event("reconnect: the server is sessionless; dialing it on 2026-07-28")
		return u.dialOnce(ctx, key, control)
	}
	return c, err
}

// dialOnce is one attempt of dial.
func (u *Upstream) dialOnce(ctx context.Context, key Key, control bool) (*conn, error) {
	d := newDialing(ctx, u, key, control)
	// The caller's cancellation also aborts the bring-up.
	unwatch := context.AfterFunc(ctx, d.c.cancel)
	defer unwatch()
	transport, version, err := d.transport()
	if err != nil {
		return nil, err
	}
	hdr := headersFrom(ctx)
	if hdr == nil {
		hdr = u.opts.Header
	}
	if version == "" {
		version = d.sessionVersion(hdr)
	}
	cs, err := u.clients.forKey(key, control, d.takesLists(version)).Connect(d.connCtx, transport, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if !d.stop() || err != nil {
		return nil, d.failed(cs, err)
	}
	if d.legacySessionless(cs) {
		_ = cs.Close()
		d.c.kill()
		return nil, errLegacySessionless
	}
	c := d.adopt(cs, transport, hdr)
	u.conns.add(cs, c)
	c.conns = &u.conns
	d.watchEnd()
	d.setLogLevel()
	return c, nil
}

// watchEnd arranges for the session's done to close when it ends by
// itself. A raw connection (stdio, SSE) reports it from its reader (raw's
// Ended). Over HTTP only the discovery session can end so: its event
// stream may fail, and one goroutine per server waits for that. An HTTP
// call session's SDK side does no I/O once initialized (its calls, their
// streams and its notifications go direct; it has no standalone stream),
// so only its close ends it, and an idle pooled session costs no goroutine
// of mcp-mux's; an expired one is learnt from the 404 of its next call.
func (d *dialing) watchEnd() {
	c := d.c
	if c.raw != nil || !d.control {
		return
	}
	go func() {
		_ = c.cs.Wait()
		c.end()
	}()
}

// dialing is the bring-up of one session (dial).
type dialing struct {
	u       *Upstream
	ctx     context.Context // the caller's
	connCtx context.Context // the session's
	control bool
	c       *conn

	timedOut atomic.Bool
	stop     func() bool // stops the InitTimeout timer: false if it fired
	// The SDK reports a refused initialize only as text ("Unauthorized"), so
	// the HTTP status is recorded here and returned as a *StatusError: a 401
	// must let the caller refresh its token and retry.
	refused atomic.Pointer[StatusError]
}

func newDialing(ctx context.Context, u *Upstream, key Key, control bool) *dialing {
	// The session outlives the call that opened it and keeps only the call's
	// headers: other values of the caller's context (the SDK server's own
	// request state, such as a downstream 2026-07-28 protocol version) must
	// not reach the upstream client.
	base := context.Background()
	if h := headersFrom(ctx); h != nil {
		base = withHeaders(base, h)
	}
	connCtx, cancel := context.WithCancel(base)
	d := &dialing{u: u, ctx: ctx, connCtx: connCtx, control: control,
		c:    &conn{key: key, control: control, cancel: cancel, done: make(chan struct{})},
		stop: func() bool { return true }}
	if u.opts.InitTimeout > 0 {
		t := time.AfterFunc(u.opts.InitTimeout, func() { d.timedOut.Store(true); cancel() })
		d.stop = t.Stop
	}
	return d
}

// takesLists reports whether a session on version handles list changes:
// the discovery session does (over HTTP, on its stream; on 2026-07-28, on
// the subscriptions/listen the SDK opens for them). A call session needs
// none: over HTTP and on 2026-07-28 they would cost the server an idle
// stream or listen per session. (A legacy stdio call session's process
// sends them unasked, and they are taken.)
func (d *dialing) takesLists(version string) bool {
	return d.control || (d.u.opts.Transport != HTTP && version < VersionModern)
}

// transport returns the session's transport and, for stdio, the protocol
// version to initialize with (empty: sessionVersion decides).
func (d *dialing) transport() (mcp.Transport, string, error) {
	u := d.u
	rt := statusRecorder{base: u.sdkHTTP.Transport, refused: &d.refused}
	switch u.opts.Transport {
	case Stdio:
		return d.stdio()
	case SSE:
		return d.raw(&mcp.SSEClientTransport{Endpoint: u.opts.URL, HTTPClient: sessionClient(rt, d.connCtx)}), "", nil
	case HTTP:
		return &mcp.StreamableClientTransport{Endpoint: u.opts.URL, HTTPClient: sessionClient(rt, d.connCtx), MaxRetries: 2,
			// Only the discovery session keeps an event stream: server-initiated
			// traffic of a call rides the call's own stream, list changes and
			// resource updates arrive on the discovery session, and an idle
			// stream per call session costs the server on every call.
			DisableStandaloneSSE: !d.control}, "", nil
	}
	d.stop()
	d.c.cancel()
	return nil, "", fmt.Errorf("unsupported transport %q", u.opts.Transport)
}

// stdio starts the server process and settles the version its session
// initializes with (stdioera.go).
func (d *dialing) stdio() (mcp.Transport, string, error) {
	u := d.u
	var version string
	p, err := stdioproc.Start(&u.proc, u.stderr.Writer(false))
	if err == nil {
		version, p, err = d.stdioVersion(p) // stdioera.go
	}
	if err != nil {
		if p != nil {
			p.Stop()
		}
		d.stop()
		d.c.cancel()
		if d.timedOut.Load() {
			return nil, "", fmt.Errorf("initialize timed out after %s", u.opts.InitTimeout)
		}
		return nil, "", err
	}
	d.c.proc = p
	return d.raw(p.Transport()), version, nil
}

// raw wraps inner so that mcp-mux's own requests get raw results and the
// server-to-client requests and notifications it forwards are taken off the
// connection before the SDK sees them (rawconn).
func (d *dialing) raw(inner mcp.Transport) *rawconn.Transport {
	u, c := d.u, d.c
	return &rawconn.Transport{Inner: inner, Ended: c.end,
		Notify: func(method string, params json.RawMessage) bool {
			if !forwardedNotifications[method] {
				return false
			}
			u.onNotification(c, method, params)
			return true
		},
		Request: func(rc *rawconn.Conn, id jsonrpc.ID, method string, params json.RawMessage) bool {
			if !serverRequests[method] {
				return false
			}
			u.onRawRequest(c, rc, id, method, params)
			return true
		},
		Cancelled: func(params json.RawMessage) bool {
			id, ok := cancelledID(params)
			return ok && c.onRawCancelled(id)
		}}
}

// failed ends the bring-up of a session whose initialize failed (err) or
// outlived InitTimeout or the caller, and says why.
func (d *dialing) failed(cs *mcp.ClientSession, err error) error {
	if cs != nil {
		_ = cs.Close()
	}
	d.c.kill()
	// The caller's deadline (discovery's is InitTimeout too) may fire first.
	if d.timedOut.Load() || errors.Is(d.ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("initialize timed out after %s", d.u.opts.InitTimeout)
	}
	if err == nil {
		err = context.Canceled
	}
	if refusal := d.refused.Load(); refusal != nil {
		return fmt.Errorf("initialize: %w (%w)", err, refusal)
	}
	return fmt.Errorf("initialize: %w", err)
}

// adopt completes the conn of the initialized session cs: its connection,
// the era it negotiated and, over HTTP, the fast path (hdr its headers).
func (d *dialing) adopt(cs *mcp.ClientSession, transport mcp.Transport, hdr http.Header) *conn {
	u, c := d.u, d.c
	c.cs = cs
	if rt, ok := transport.(*rawconn.Transport); ok {
		c.raw = rt.Conn()
	}
	switch u.opts.Transport {
	case Stdio:
		c.proc.UnmuteStderr()
		v := cs.InitializeResult().ProtocolVersion
		u.eras.note(v)
		if v >= VersionModern {
			c.modern = modernreq.New(sessionCaps(c.key, d.control), nil)
		}
	case HTTP:
		v := cs.InitializeResult().ProtocolVersion
		u.eras.note(v)
		c.direct = &direct{url: u.opts.URL, client: u.http, header: hdr, sessionID: cs.ID(),
			protocol: v, maxEvent: stdioproc.MaxFrame, async: &u.async, tel: u.opts.Telemetry}
		if v >= VersionModern {
			c.direct.modern = modernreq.New(sessionCaps(c.key, d.control), &u.annotations)
		}
	}
	return c
}

// setLogLevel asks the server of a call session that logs for everything:
// each downstream session filters by its own level. (A 2026-07-28 server
// gets the level with every request instead.)
func (d *dialing) setLogLevel() {
	init := d.c.cs.InitializeResult()
	if d.control || init.Capabilities == nil || init.Capabilities.Logging == nil || init.ProtocolVersion >= VersionModern {
		return
	}
	lctx, lcancel := context.WithTimeout(d.ctx, 5*time.Second)
	_, _ = d.c.request(lctx, d.u, "logging/setLevel", json.RawMessage(`{"level":"debug"}`), nil, nil)
	lcancel()
}

func (c *conn) alive() bool {
	select {
	case <-c.done:
		return false
	default:
	}
	if c.proc != nil {
		select {
		case <-c.proc.Exited():
			return false
		default:
		}
	}
	return true
}

// notRun reports whether a request on c that began at start and failed
// with err provably did not reach the server: the session was gone (a
// dead stdio process, an expired HTTP session) or the request never left.
func (c *conn) notRun(err error, start time.Time) bool {
	return errors.Is(err, errSessionMissing) || errors.Is(err, mcp.ErrSessionMissing) || errors.Is(err, rawconn.ErrNotSent) ||
		(c.proc != nil && c.proc.ExitedBefore(start))
}

// close ends the session and, for stdio, the process group.
func (c *conn) close() {
	if c.cs != nil {
		_ = c.cs.Close()
		if c.conns != nil {
			c.conns.remove(c.cs)
		}
	}
	c.kill()
	c.end()
}

// end marks the session ended: done closes, once.
func (c *conn) end() { c.ended.Do(func() { close(c.done) }) }

func (c *conn) kill() {
	c.cancel()
	if c.proc != nil {
		c.proc.Stop()
	}
}

// request sends method with raw params and returns the raw result. What
// the server sends meanwhile goes to call r (nil: a request of mcp-mux's
// own, outside any call).
func (c *conn) request(ctx context.Context, u *Upstream, method string, params json.RawMessage, extra http.Header, r *callRoute) (json.RawMessage, error) {
	defer c.progress.bind(r)()
	if c.direct != nil {
		// What the server sends while serving this request arrives on its own
		// stream, so it needs no in-flight bookkeeping.
		return c.direct.call(ctx, method, params, extra, func(m *wire.Message) { u.onStreamMessage(c, r, m) })
	}
	defer c.track(r)()
	if c.modern != nil {
		params = c.modern.Params(params)
	}
	return c.raw.Call(ctx, method, params)
}

// sessionCaps is the client capabilities a 2026-07-28 request of a session
// declares: its caller's, or for discovery all that mcp-mux can relay.
func sessionCaps(key Key, control bool) string {
	if control {
		return discoveryCapsJSON()
	}
	return key.Caps
}

// statusRecorder notes a request refused with 401 or 403, with its
// challenges.
type statusRecorder struct {
	base    http.RoundTripper
	refused *atomic.Pointer[StatusError]
}

func (t statusRecorder) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(r)
	if err == nil {
		if refusal := refusalOf(resp); refusal != nil {
			t.refused.Store(refusal)
		}
	}
	return resp, err
}
