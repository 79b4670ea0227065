package proxy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/internal/wire"
)

// Bounds on what one client can make mcp-mux hold.
//
// Every request body on the listener has a read deadline (limitBody, from
// GuardHosts), cleared when the body has been read, so only a slow body is
// cut off, never a long response stream. A /mcp POST body is read here,
// once, within maxBody bytes, and scanned (wire.Scan) before the era router,
// the fast path or the SDK decodes it:
// nesting deeper than wire.MaxDepth and batches of more than wire.MaxBatch
// messages are refused with a JSON-RPC error. A POST that would open a
// session past inbound.max_sessions, or past its caller's share of it
// (shares.go), is refused too. Every request a session
// runs (tools/call, prompts/get, resources/read, completion) is admitted by
// session.admit: at most MaxSessionCalls at once, each cancelled when the
// session ends (DELETE, idle timeout, shutdown) and, on the SDK path, when
// the HTTP request it came in ends (the client went away), as the fast path
// does with the request's own context.

const (
	defaultMaxSessions     = 10000            // inbound.max_sessions
	defaultSessionTimeout  = 30 * time.Minute // inbound.session_idle_timeout_seconds
	defaultBodyTimeout     = 30 * time.Second
	defaultIdleConnTimeout = 2 * time.Minute
	defaultMaxSessionCalls = 64
	// codeLimit is the JSON-RPC error code of a request refused by a bound
	// (implementation-defined server error range).
	codeLimit = -32000
)

// requestHeader carries, from mcpHandler to the receiving middleware, the
// handle of the HTTP request a message arrived in: in stateful mode go-sdk
// hands handlers each request's headers but a context of the session's.
// mcpHandler removes any copy a client sent.
const requestHeader = "Mcp-Mux-Internal-Request"

var bodyBuffers wire.Buffers

// readBody reads a /mcp POST body within maxBody bytes and the body
// deadline, and checks its shape. On failure it has answered the request and returns nil.
// The caller returns the buffer with bodyBuffers.Put(bp).
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) (bp *[]byte, sh wire.Shape) {
	s.limitBody(w, r) // GuardHosts has, unless this handler is served on its own
	bp = bodyBuffers.Get()
	buf := bytes.NewBuffer(*bp)
	n, err := buf.ReadFrom(io.LimitReader(r.Body, maxBody+1))
	*bp = buf.Bytes()
	timedOut := errors.Is(err, os.ErrDeadlineExceeded)
	body := *bp
	switch {
	case timedOut:
		s.logFor(r.Context()).Debug("request body not received in time", "timeout", s.opts.BodyTimeout)
		writeRPCError(w, http.StatusRequestTimeout, nil, jsonrpc.CodeInvalidRequest,
			fmt.Sprintf("request body not received within %s", s.opts.BodyTimeout))
	case err != nil:
		writeRPCError(w, http.StatusBadRequest, nil, jsonrpc.CodeInvalidRequest, "failed to read the request body")
	case n > maxBody:
		writeRPCError(w, http.StatusRequestEntityTooLarge, nil, jsonrpc.CodeInvalidRequest,
			fmt.Sprintf("request body exceeds %d bytes", maxBody))
	default:
		sh, err = wire.Scan(body)
		switch {
		case err != nil:
			writeRPCError(w, http.StatusBadRequest, wire.TopLevelID(body), jsonrpc.CodeInvalidRequest,
				fmt.Sprintf("request refused: %v", err))
		case sh.Batch && sh.Len > wire.MaxBatch:
			writeRPCError(w, http.StatusBadRequest, nil, jsonrpc.CodeInvalidRequest,
				fmt.Sprintf("batch of %d messages exceeds the limit of %d", sh.Len, wire.MaxBatch))
		default:
			return bp, sh
		}
	}
	bodyBuffers.Put(bp)
	return nil, sh
}

// limitBody gives the body of r the body deadline (BodyTimeout): reading it
// fails past the deadline, and reading it to its end clears the deadline,
// so a response stream lasts as long as its call. Only the body has a
// deadline, so a connection can stay open with a slow stream but not with a
// slow body. A connection that does not support deadlines is left alone.
func (s *Server) limitBody(w http.ResponseWriter, r *http.Request) {
	if r.Body == nil || r.Body == http.NoBody {
		return
	}
	if _, ok := r.Body.(*deadlineBody); ok {
		return
	}
	rc := http.NewResponseController(w)
	if rc.SetReadDeadline(time.Now().Add(s.opts.BodyTimeout)) != nil {
		return
	}
	r.Body = &deadlineBody{ReadCloser: r.Body, rc: rc}
}

// deadlineBody clears the connection's read deadline at the end of the body.
// A body that timed out keeps it: net/http's attempt to drain the rest must
// fail at once too (the connection is closed).
type deadlineBody struct {
	io.ReadCloser
	rc   *http.ResponseController
	done bool
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && !b.done && !errors.Is(err, os.ErrDeadlineExceeded) {
		b.done = true
		_ = b.rc.SetReadDeadline(time.Time{})
	}
	return n, err
}

// admit starts one request of the session: it returns the request's context,
// cancelled when the session ends, and the function that ends the request.
// Past MaxSessionCalls requests in flight it returns a JSON-RPC error.
func (s *Server) admit(ctx context.Context, st *session) (context.Context, func(), error) {
	limit := int32(s.opts.MaxSessionCalls)
	if st.active.Add(1) > limit {
		st.active.Add(-1)
		return nil, nil, &jsonrpc.Error{Code: codeLimit,
			Message: fmt.Sprintf("this session already has %d requests in flight, the most mcp-mux runs at once per session; retry when one finishes", limit)}
	}
	ctx, cancel := context.WithCancel(ctx)
	stop := func() bool { return false }
	if st.ctx != nil { // a 2026-07-28 request's session is the request itself
		stop = context.AfterFunc(st.ctx, cancel)
	}
	return ctx, func() { stop(); cancel(); st.active.Add(-1) }, nil
}

// requestTable maps the handles mcpHandler gives SDK-path HTTP requests to
// their contexts.
type requestTable struct {
	seq atomic.Uint64
	mu  sync.Mutex
	m   map[string]context.Context
}

// bind records r under a new handle in its headers; call the returned
// function when the request has been served.
func (t *requestTable) bind(r *http.Request) func() {
	id := strconv.FormatUint(t.seq.Add(1), 10)
	t.mu.Lock()
	if t.m == nil {
		t.m = make(map[string]context.Context)
	}
	t.m[id] = r.Context()
	t.mu.Unlock()
	r.Header.Set(requestHeader, id)
	return func() {
		t.mu.Lock()
		delete(t.m, id)
		t.mu.Unlock()
	}
}

// scope returns ctx, also cancelled when the HTTP request the SDK request
// req arrived in ends. A handle whose request is already over yields a
// cancelled context: nobody is left to read the answer.
func (t *requestTable) scope(ctx context.Context, req mcp.Request) (context.Context, func()) {
	h := headerOf(req)
	id := h.Get(requestHeader)
	if id == "" {
		return ctx, func() {}
	}
	t.mu.Lock()
	rctx, ok := t.m[id]
	t.mu.Unlock()
	ctx, cancel := context.WithCancel(ctx)
	if !ok {
		cancel()
		return ctx, cancel
	}
	stop := context.AfterFunc(rctx, cancel)
	return ctx, func() { stop(); cancel() }
}

// HTTPServer returns an http.Server for Handler with mcp-mux's connection
// bounds: request headers within 10 seconds and 64 KiB, keep-alive
// connections closed after IdleConnTimeout without a request. Bodies have
// their own deadline (BodyTimeout, set per request by readBody) and there is
// no write timeout: a response stream lasts as long as its call.
func (s *Server) HTTPServer() *http.Server {
	return &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       s.opts.IdleConnTimeout,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          s.log.StandardLogger(&hclog.StandardLoggerOptions{InferLevels: true}),
	}
}
