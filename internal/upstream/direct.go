package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/http/httptrace"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/mcp-mux/mcp-mux/internal/telemetry"
	"github.com/mcp-mux/mcp-mux/internal/upstream/eventstream"
	"github.com/mcp-mux/mcp-mux/internal/upstream/modernreq"
	"github.com/mcp-mux/mcp-mux/internal/upstream/rawconn"
	"github.com/mcp-mux/mcp-mux/internal/wire"
)

// errSessionMissing reports an upstream that no longer knows our session
// (HTTP 404): the request was not processed, so it is safe to retry on a new one.
var errSessionMissing = errors.New("upstream session expired")

// direct sends requests on an SDK-initialized Streamable HTTP session with
// the session's id and protocol version, decoding only the JSON-RPC envelope.
// The SDK session keeps owning everything else (the GET stream, pings,
// server-initiated requests outside a call, DELETE on close).
type direct struct {
	url       string
	client    *http.Client
	header    http.Header
	sessionID string
	protocol  string
	modern    *modernreq.Request // a 2026-07-28 server: per-request _meta and headers
	seq       atomic.Uint64
	maxEvent  int
	tel       *telemetry.Telemetry // the call's trace context goes in its headers too
	async     *background          // background posts; the Upstream cuts them short and waits for them on Close
	// latest is the header set of the newest call: background posts (cancel
	// notifications, replies to server requests) carry it rather than the
	// opening headers, whose OAuth token may have been refreshed since.
	latest atomic.Pointer[http.Header]
}

var reqBuffers wire.Buffers

// call sends one request and returns its raw result. A JSON-RPC error from the
// upstream is returned as *wire.Error.
// Notifications and requests the server sends on the call's stream go to
// onMessage, in order, before call returns.
func (d *direct) call(ctx context.Context, method string, params []byte, extra http.Header, onMessage func(*wire.Message)) (json.RawMessage, error) {
	n := d.seq.Add(1)
	var idb [32]byte
	id := append(strconv.AppendUint(append(idb[:0], `"mux-`...), n, 10), '"')

	if d.modern != nil {
		params = d.modern.Params(params)
	}
	bp := reqBuffers.Get()
	body := wire.AppendRequest(*bp, id, method, params)
	defer func() { *bp = body; reqBuffers.Put(bp) }()

	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	h, err := d.requestHeader(method, params, extra)
	if err != nil {
		return nil, err
	}
	req.Header = h
	d.tel.InjectHeader(ctx, req.Header)
	resp, err := d.send(ctx, req, id)
	if err != nil {
		return nil, err
	}
	defer closeBody(resp.Body)
	if err := d.checkStatus(resp); err != nil {
		return nil, err
	}
	res, err := d.read(ctx, resp, h, id, onMessage)
	if err != nil && ctx.Err() != nil {
		d.cancelUpstream(id)
		return nil, ctx.Err()
	}
	return res, err
}

// requestHeader returns the headers of a call: the caller's (extra, when
// given, is the complete set of them) or else the session's, with the
// transport's own and, for a 2026-07-28 server, the standard ones. An
// error means the call must not be sent.
func (d *direct) requestHeader(method string, params []byte, extra http.Header) (http.Header, error) {
	base := d.header
	if extra != nil {
		base = extra
		d.noteLatest(extra)
	}
	h := make(http.Header, len(base)+4)
	for k, v := range base {
		h[k] = v
	}
	h["Content-Type"] = jsonCT
	h["Accept"] = acceptBoth
	if d.sessionID != "" {
		h["Mcp-Session-Id"] = []string{d.sessionID}
	}
	if d.protocol != "" {
		h["Mcp-Protocol-Version"] = []string{d.protocol}
	}
	if d.modern != nil {
		if err := d.modern.Headers(h, method, params); err != nil {
			return nil, err
		}
	}
	return h, nil
}

// noteLatest records extra as the newest call's headers, for the
// background posts, unless they are the ones recorded already.
func (d *direct) noteLatest(extra http.Header) {
	if p := d.latest.Load(); p == nil || !sameHeader(*p, extra) {
		d.latest.Store(&extra)
	}
}

// send posts the request of call id. At most once: a request that never
// made it onto the wire (refused connection, a dead keep-alive connection)
// fails with rawconn.ErrNotSent (the one mark for every transport) and may
// be retried elsewhere; once written, it may have run, and a lost answer is
// an error. A request the caller abandoned is cancelled upstream.
func (d *direct) send(ctx context.Context, req *http.Request, id []byte) (*http.Response, error) {
	var wrote atomic.Bool
	req = req.WithContext(httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		WroteRequest: func(i httptrace.WroteRequestInfo) {
			if i.Err == nil {
				wrote.Store(true)
			}
		},
	}))
	resp, err := d.client.Do(req)
	switch {
	case err == nil:
		return resp, nil
	case ctx.Err() != nil:
		d.cancelUpstream(id)
		return nil, ctx.Err()
	case !wrote.Load():
		return nil, errors.Join(rawconn.ErrNotSent, err)
	}
	return nil, err
}

// checkStatus fails a call the server refused: errSessionMissing when it
// no longer knows the session, else a *StatusError or the JSON-RPC error
// the body carries.
func (d *direct) checkStatus(resp *http.Response) error {
	switch {
	case resp.StatusCode == http.StatusNotFound && d.sessionID != "":
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
		return errSessionMissing
	case resp.StatusCode < 200 || resp.StatusCode > 299:
		return d.statusError(resp)
	}
	return nil
}

// read reads the answer to call id from a response in either content type
// the transport allows (h is the call's request headers, for resuming a
// stream).
func (d *direct) read(ctx context.Context, resp *http.Response, h http.Header, id []byte, onMessage func(*wire.Message)) (json.RawMessage, error) {
	ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	switch ct {
	case "application/json":
		return d.readJSON(resp.Body, id)
	case "text/event-stream":
		return d.readStream(ctx, resp.Body, h, id, onMessage)
	}
	return nil, fmt.Errorf("upstream answered with content type %q", ct)
}

// sameHeader reports whether two header sets are equal (cheap for the
// common case of the caller passing the same resolved headers again).
func sameHeader(a, b http.Header) bool {
	if len(a) != len(b) {
		return false
	}
	for k, av := range a {
		bv, ok := b[k]
		if !ok || len(av) != len(bv) {
			return false
		}
		for i := range av {
			if av[i] != bv[i] {
				return false
			}
		}
	}
	return true
}

// closeBody drains what is left of a response so the connection is reused;
// the server ends a call's stream after the response, and a stream that does
// not end is cut after drainLimit.
func closeBody(b io.ReadCloser) {
	t := time.AfterFunc(drainLimit, func() { _ = b.Close() })
	_, _ = io.Copy(io.Discard, io.LimitReader(b, 256<<10))
	t.Stop()
	_ = b.Close()
}

const drainLimit = time.Second

var (
	jsonCT     = []string{"application/json"}
	acceptBoth = []string{"application/json, text/event-stream"}
)

// StatusError reports an upstream that refused a request with an HTTP status
// (401 and 403 in particular: the credentials were not accepted).
type StatusError struct {
	Code int
	// Challenges are the refusal's WWW-Authenticate values (401 and 403
	// only), bounded by challengesOf: what the server asks for (RFC 6750,
	// RFC 9728's resource_metadata), never a credential.
	Challenges []string
}

func (e *StatusError) Error() string { return fmt.Sprintf("upstream answered HTTP %d", e.Code) }

// refusalOf returns the *StatusError of a 401 or 403 response, nil for
// any other.
func refusalOf(resp *http.Response) *StatusError {
	if resp.StatusCode != http.StatusUnauthorized && resp.StatusCode != http.StatusForbidden {
		return nil
	}
	return &StatusError{Code: resp.StatusCode, Challenges: challengesOf(resp.Header)}
}

// Bounds on the WWW-Authenticate values a refusal keeps.
const (
	maxChallenges    = 4
	maxChallengeSize = 2048
)

// challengesOf returns h's WWW-Authenticate values: at most maxChallenges,
// each cut to maxChallengeSize bytes (a longer one is dropped: cut, it
// would parse as another challenge).
func challengesOf(h http.Header) []string {
	var out []string
	for _, v := range h.Values("Www-Authenticate") {
		if len(v) <= maxChallengeSize && len(out) < maxChallenges {
			out = append(out, v)
		}
	}
	return out
}

func (d *direct) statusError(resp *http.Response) error {
	if e := refusalOf(resp); e != nil {
		return e
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var m wire.Message
	if wire.Decode(b, &m) == nil && m.Error != nil {
		return m.Error
	}
	return &StatusError{Code: resp.StatusCode}
}

func (d *direct) readJSON(r io.Reader, id []byte) (json.RawMessage, error) {
	b, err := io.ReadAll(io.LimitReader(r, int64(d.maxEvent)+1))
	if err != nil {
		return nil, err
	}
	if len(b) > d.maxEvent {
		return nil, fmt.Errorf("upstream response larger than %d bytes", d.maxEvent)
	}
	var m wire.Message
	if err := wire.Decode(b, &m); err != nil {
		return nil, fmt.Errorf("decoding upstream response: %w", err)
	}
	return d.result(&m, id)
}

// readStream reads a call's event stream until the call's response. When
// the stream ends first, after the server gave its events ids, the call is
// resumed (SEP-1699): after the server's retry delay, a GET with
// Last-Event-ID continues the stream, up to maxResumes times. h is the call's
// request headers.
func (d *direct) readStream(ctx context.Context, body io.Reader, h http.Header, id []byte, onMessage func(*wire.Message)) (json.RawMessage, error) {
	er := eventstream.NewReader(body, d.maxEvent)
	for resumes := 0; ; resumes++ {
		res, err := d.readEvents(er, id, onMessage)
		if res != nil || err != nil {
			return res, err
		}
		if err := resumable(er, resumes); err != nil {
			return nil, err
		}
		if err := waitRetry(ctx, er.Retry()); err != nil {
			return nil, err
		}
		rc, err := d.resume(ctx, h, er.LastID())
		if err != nil {
			return nil, fmt.Errorf("resuming the upstream stream: %w", err)
		}
		defer closeBody(rc)
		er = er.Resumed(rc)
	}
}

const (
	maxResumes    = 10
	defaultRetry  = time.Second      // when the server gave no retry field
	maxRetryDelay = 30 * time.Second // a server cannot park a call longer per resumption
)

// resumable says why a stream that ended without the response cannot be
// resumed (after resumes resumptions), if it cannot.
func resumable(er *eventstream.Reader, resumes int) error {
	if er.LastID() == "" {
		return errors.New("upstream stream ended without a response")
	}
	if resumes == maxResumes {
		return fmt.Errorf("upstream stream ended without a response after %d resumptions", maxResumes)
	}
	return nil
}

// waitRetry waits the reconnection time the server asked for (retry;
// defaultRetry if none), at most maxRetryDelay, or until ctx is done.
func waitRetry(ctx context.Context, retry time.Duration) error {
	if retry <= 0 {
		retry = defaultRetry
	}
	t := time.NewTimer(min(retry, maxRetryDelay))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// readEvents reads events until the response to id (returned), a broken
// event (an error) or the end of the stream (nil, nil).
func (d *direct) readEvents(er *eventstream.Reader, id []byte, onMessage func(*wire.Message)) (json.RawMessage, error) {
	var m wire.Message
	for {
		data, err := er.Next()
		if err != nil {
			return nil, streamEnd(err)
		}
		if len(bytes.TrimSpace(data)) == 0 {
			continue // a priming event
		}
		// The message keeps referring to its bytes; the reader reuses its buffer.
		if err := wire.Decode(bytes.Clone(data), &m); err != nil {
			return nil, fmt.Errorf("decoding upstream event: %w", err)
		}
		if m.IsResponse() && bytes.Equal(m.ID, id) {
			return d.result(&m, id)
		}
		passOn(&m, onMessage)
	}
}

// streamEnd is what the end of a call's stream with err means: an event
// too large fails the call; any other end (or break) is resumable (nil).
func streamEnd(err error) error {
	if errors.Is(err, eventstream.ErrTooLarge) {
		return err
	}
	return nil
}

// passOn hands a copy of a server's request or notification m to
// onMessage, if any; responses to other ids are dropped.
func passOn(m *wire.Message, onMessage func(*wire.Message)) {
	if m.Method != "" && onMessage != nil {
		msg := *m
		onMessage(&msg)
	}
}

// resume opens the GET that continues a stream after lastID.
func (d *direct) resume(ctx context.Context, h http.Header, lastID string) (io.ReadCloser, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, d.url, nil)
	if err != nil {
		return nil, err
	}
	for k, v := range h {
		if k != "Content-Type" {
			req.Header[k] = v
		}
	}
	req.Header["Accept"] = []string{"text/event-stream"}
	req.Header.Set("Last-Event-ID", lastID)
	resp, err := d.client.Do(req)
	if err != nil {
		return nil, err
	}
	ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if resp.StatusCode != http.StatusOK || ct != "text/event-stream" {
		closeBody(resp.Body)
		return nil, fmt.Errorf("upstream answered the resumption with HTTP %d (%q)", resp.StatusCode, ct)
	}
	return resp.Body, nil
}

func (d *direct) result(m *wire.Message, id []byte) (json.RawMessage, error) {
	if !bytes.Equal(m.ID, id) {
		return nil, errors.New("upstream answered a different request id")
	}
	if m.Error != nil {
		return nil, m.Error
	}
	if m.Result == nil {
		return nil, errors.New("upstream response has neither result nor error")
	}
	return m.Result, nil
}

// cancelUpstream tells the upstream that request id was abandoned.
func (d *direct) cancelUpstream(id []byte) {
	params := append(append([]byte(`{"requestId":`), id...), `,"reason":"cancelled by the caller"}`...)
	body := wire.AppendNotification(nil, "notifications/cancelled", params)
	d.async.Go(func() { d.post(body) })
}

// respond answers a request the server sent on a call's stream.
func (d *direct) respond(id json.RawMessage, result json.RawMessage, err error) {
	var body []byte
	if err != nil {
		code, msg, data := int64(-32603), err.Error(), json.RawMessage(nil)
		var we *wire.Error
		if errors.As(err, &we) {
			code, msg, data = we.Code, we.Message, we.Data
		}
		body = wire.AppendError(nil, id, code, msg, data)
	} else {
		body = wire.AppendResult(nil, id, result)
	}
	d.post(body)
}

// post sends one message that expects no response (HTTP 202).
func (d *direct) post(body []byte) {
	ctx, cancel := d.async.bound()
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.url, bytes.NewReader(body))
	if err != nil {
		return
	}
	h := d.header
	if p := d.latest.Load(); p != nil {
		h = *p
	}
	for k, v := range h {
		req.Header[k] = v
	}
	req.Header["Content-Type"] = jsonCT
	req.Header["Accept"] = acceptBoth
	req.Header.Set("Mcp-Session-Id", d.sessionID)
	req.Header.Set("Mcp-Protocol-Version", d.protocol)
	if resp, err := d.client.Do(req); err == nil {
		closeBody(resp.Body)
	}
}
