package callpath

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	sse "github.com/tmaxmax/go-sse"

	"github.com/mcp-mux/mcp-mux/internal/panicguard"
	"github.com/mcp-mux/mcp-mux/internal/upstream"
	"github.com/mcp-mux/mcp-mux/internal/wire"
)

// Sink delivers what an upstream sends while serving one downstream
// request (progress, log messages, sampling/elicitation/roots requests) to
// the downstream session that made it, on that request's own stream.
type Sink interface {
	// Notify sends a notification; params are final (tokens remapped).
	Notify(method string, params json.RawMessage)
	// Request sends a server-to-client Request and returns the raw result.
	Request(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error)
	Session() *Session
}

// SDKSink delivers through the SDK's ServerSession with the handler's
// context, which routes messages to the request's response stream.
type SDKSink struct {
	ctx context.Context
	st  *Session
}

// Session returns the session the request belongs to.
func (k *SDKSink) Session() *Session { return k.st }

// Notify sends a notification on the request's stream.
func (k *SDKSink) Notify(method string, params json.RawMessage) {
	DeliverNotification(k.ctx, k.st, method, params)
}

// Request sends a server-to-client request on the request's stream.
func (k *SDKSink) Request(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
	// Routing values come from the handler's context, cancellation from both.
	rctx, cancel := context.WithCancel(k.ctx)
	defer cancel()
	defer context.AfterFunc(ctx, cancel)()
	return SessionRequest(rctx, k.st, method, params)
}

// DeliverNotification sends progress, a log message (past the
// session's level) or an elicitation's completion on the stream of the
// SDK-path request whose handler context ctx is.
func DeliverNotification(ctx context.Context, st *Session, method string, params json.RawMessage) {
	if method == "notifications/message" && !st.WantsLog(params) {
		return
	}
	if w, ok := ctx.Value(writerKey{}).(ClientWriter); ok {
		_ = w.Write(ctx, &jsonrpc.Request{Method: method, Params: params})
		return
	}
	ss := st.Server()
	if ss == nil {
		return
	}
	switch method {
	case "notifications/progress":
		var p mcp.ProgressNotificationParams
		if json.Unmarshal(params, &p) == nil {
			_ = ss.NotifyProgress(ctx, &p)
		}
	case "notifications/message":
		var p mcp.LoggingMessageParams
		if json.Unmarshal(params, &p) == nil {
			_ = ss.Log(ctx, &p)
		}
	case "notifications/elicitation/complete":
		var p mcp.ElicitationCompleteParams
		if json.Unmarshal(params, &p) == nil {
			_ = ss.NotifyElicitationComplete(ctx, &p)
		}
	}
}

// ClientWriter writes a message on a session's SDK connection (package
// sessionhost): with a request handler's context, on that request's stream.
type ClientWriter interface {
	Write(ctx context.Context, msg jsonrpc.Message) error
}

type writerKey struct{}

// WithClientWriter returns ctx carrying w: the base context of a resident
// session's handlers, so that a handler's requests to the client go out
// on its own stream with mcp-mux's ids.
func WithClientWriter(ctx context.Context, w ClientWriter) context.Context {
	return context.WithValue(ctx, writerKey{}, w)
}

// SessionRequest sends a server-to-client request of a session: on the
// stream of the SDK-path request whose handler context ctx is, else
// through the session's Outbox (its GET stream, on whichever replica), else
// (a 2026-07-28 request's throwaway session) through the SDK. The params
// go out as the upstream sent them; the client's answer may come back to
// any replica (the id names this one).
func SessionRequest(ctx context.Context, st *Session, method string, params json.RawMessage) (json.RawMessage, error) {
	if method == "ping" {
		return json.RawMessage(`{}`), nil
	}
	if !serverToClient[method] {
		return nil, &wire.Error{Code: -32601, Message: fmt.Sprintf("method %q is not forwarded to clients", method)}
	}
	if !st.Supports(method) {
		return nil, &wire.Error{Code: -32601, Message: fmt.Sprintf("client does not support %s: %v", method, errNoCapability)}
	}
	if w, ok := ctx.Value(writerKey{}).(ClientWriter); ok {
		return st.ask(ctx, func(id string) error {
			rid, err := jsonrpc.MakeID(id[1 : len(id)-1])
			if err != nil {
				return err
			}
			return w.Write(ctx, &jsonrpc.Request{ID: rid, Method: method, Params: params})
		}, nil)
	}
	if st.Outbox != nil {
		return st.ask(ctx, func(id string) error {
			return st.Outbox(ctx, wire.AppendRequest(nil, json.RawMessage(id), method, params))
		}, nil)
	}
	if st.Send == nil {
		return nil, errors.New("the session cannot send requests")
	}
	res, err := st.Send(ctx, method, &mcp.ServerRequest[*rawParams]{Session: st.Server(), Params: &rawParams{raw: params}})
	if err != nil {
		return nil, err
	}
	return json.Marshal(res)
}

// serverToClient are the server-to-client requests forwarded to clients.
var serverToClient = map[string]bool{"sampling/createMessage": true, "elicitation/create": true, "roots/list": true}

// rawParams are request params sent exactly as an upstream produced them.
type rawParams struct {
	mcp.ParamsBase
	raw json.RawMessage
}

// MarshalJSON returns the params as the upstream sent them ({} for none).
func (p *rawParams) MarshalJSON() ([]byte, error) {
	if len(p.raw) == 0 {
		return []byte(`{}`), nil
	}
	return p.raw, nil
}

// FastSink belongs to a fast-path tools/call. The response starts as plain
// JSON; the first related message upgrades it to an event stream, exactly as
// a server answering on the POST's own stream does.
type FastSink struct {
	st    *Session
	w     http.ResponseWriter
	prime string // the id of the event stream's priming event ("" for none)

	mu        sync.Mutex
	streaming bool
	done      bool
}

// CallStreamPrefix starts the id of a tools/call event stream's priming
// event: base64url of the call's JSON-RPC id follows. A client whose
// stream breaks resumes with it (GET, Last-Event-ID) on any replica, and
// learns there that the call was interrupted (CallStreamID).
const CallStreamPrefix = "call."

// Resumable makes the response stream, if it becomes one, start with a
// priming event naming the call id: a client whose stream breaks (its
// replica stopped) resumes and gets an answer instead of waiting forever.
func (f *FastSink) Resumable(id json.RawMessage) {
	f.prime = CallStreamPrefix + base64.RawURLEncoding.EncodeToString(id)
}

// CallStreamID returns the JSON-RPC id a call stream's priming id names.
func CallStreamID(lastEventID string) (json.RawMessage, bool) {
	rest, ok := strings.CutPrefix(lastEventID, CallStreamPrefix)
	if !ok || len(rest) > 1024 {
		return nil, false
	}
	id, err := base64.RawURLEncoding.DecodeString(rest)
	if err != nil {
		return nil, false
	}
	var v any
	if json.Unmarshal(id, &v) != nil {
		return nil, false
	}
	switch v.(type) {
	case string, float64: // what a JSON-RPC id may be
		return id, true
	}
	return nil, false
}

// Session returns the session the request belongs to.
func (f *FastSink) Session() *Session { return f.st }

var eventType = sse.Type("message")

var jsonContentType = []string{"application/json"}

// writeLocked writes one JSON-RPC message; f.mu is held.
func (f *FastSink) writeLocked(msg []byte) error {
	if !f.streaming {
		h := f.w.Header()
		h.Set("Content-Type", "text/event-stream")
		h.Set("Cache-Control", "no-cache, no-transform")
		f.w.WriteHeader(http.StatusOK)
		f.streaming = true
		if f.prime != "" {
			if _, err := io.WriteString(f.w, "id: "+f.prime+"\ndata: \n\n"); err != nil {
				return err
			}
		}
	}
	m := sse.Message{Type: eventType}
	m.AppendData(string(msg))
	if _, err := m.WriteTo(f.w); err != nil {
		return err
	}
	return http.NewResponseController(f.w).Flush()
}

// Notify writes a notification on the response stream, unless it is a
// log message below the session's level.
func (f *FastSink) Notify(method string, params json.RawMessage) {
	if method == "notifications/message" && !f.st.WantsLog(params) {
		return
	}
	msg := wire.AppendNotification(nil, method, params)
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.done {
		_ = f.writeLocked(msg)
	}
}

// Finish writes the response; later notifications are dropped.
func (f *FastSink) Finish(resp []byte) { f.FinishStatus(resp, http.StatusOK) }

// FinishStatus is Finish with the HTTP status of a response that has not
// become an event stream.
func (f *FastSink) FinishStatus(resp []byte, status int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.done = true
	if f.streaming {
		_ = f.writeLocked(resp)
		return
	}
	f.w.Header()["Content-Type"] = jsonContentType
	f.w.WriteHeader(status)
	_, _ = f.w.Write(resp)
}

var errNoCapability = errors.New("the client did not declare this capability")

// Request writes a server-to-client request on the response stream and
// waits for the client's answer, which comes in its own POST (Resolve).
func (f *FastSink) Request(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
	if method == "ping" {
		return json.RawMessage(`{}`), nil
	}
	if !f.st.Supports(method) {
		return nil, &wire.Error{Code: -32601, Message: fmt.Sprintf("client does not support %s: %v", method, errNoCapability)}
	}
	return f.st.ask(ctx, func(id string) error {
		msg := wire.AppendRequest(nil, json.RawMessage(id), method, params)
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.done {
			return errors.New("the request that caused this has already completed")
		}
		return f.writeLocked(msg)
	}, func(id string) {
		f.Notify("notifications/cancelled", json.RawMessage(`{"requestId":`+id+`,"reason":"cancelled upstream"}`))
	})
}

// ask sends a request to the client with send (given its id, raw JSON)
// and waits for the answer, which Resolve hands over; when ctx ends first,
// cancelled (if set) tells the client.
func (st *Session) ask(ctx context.Context, send func(id string) error, cancelled func(id string)) (json.RawMessage, error) {
	id, ch := st.expect()
	defer st.forget(id)
	if err := send(id); err != nil {
		return nil, err
	}
	select {
	case m := <-ch:
		if m.Error != nil {
			return nil, m.Error
		}
		return m.Result, nil
	case <-ctx.Done():
		if cancelled != nil {
			cancelled(id)
		}
		return nil, ctx.Err()
	}
}

// returnPath is a call's upstream.CallSink, passed down with its request
// (Call.request): what the upstream sends while serving the call goes to
// the call's Sink, its progress under the caller's own token, a panic of
// the Sink recovered (internal/panicguard).
type returnPath struct {
	sink     Sink
	panics   *panicguard.Guard
	progress progressRoute // zero: the caller asked for no progress
}

var _ upstream.CallSink = (*returnPath)(nil)

// progressRoute is one call's progress: the token mcp-mux sends upstream
// (random, minted per call) and the downstream request's own token. The
// upstream session that carries the call delivers progress to its
// returnPath only for this token (upstream.Call.ProgressToken), so a server
// reaches only calls it carries.
type progressRoute struct {
	upstream   string
	downstream json.RawMessage
}

// newProgressRoute mints the upstream token for a downstream token: random,
// so that no server can guess another call's even where one session carries
// several callers' calls (a shared scope).
func newProgressRoute(downstream json.RawMessage) progressRoute {
	return progressRoute{upstream: "mux-p-" + rand.Text(), downstream: downstream}
}

// Notify forwards a notification to the call's Sink: progress under the
// caller's token (progress naming any other token is dropped).
func (p *returnPath) Notify(method string, params json.RawMessage) {
	defer p.panics.Catch(panicguard.Upstream, nil)
	if method == "notifications/progress" {
		if params = p.progress.downward(params); params == nil {
			return
		}
	}
	p.sink.Notify(method, params)
}

// Request forwards a server-to-client request to the call's Sink.
func (p *returnPath) Request(ctx context.Context, method string, params json.RawMessage) (_ json.RawMessage, err error) {
	defer p.panics.Catch(panicguard.Upstream, &err)
	return p.sink.Request(ctx, method, params)
}

// downward is upstream progress params under the caller's own token, or
// nil when they name another token.
func (r *progressRoute) downward(params json.RawMessage) json.RawMessage {
	if r.upstream == "" {
		return nil
	}
	var p map[string]json.RawMessage
	if json.Unmarshal(params, &p) != nil {
		return nil
	}
	var tok string
	if json.Unmarshal(p["progressToken"], &tok) != nil || tok != r.upstream {
		return nil
	}
	p["progressToken"] = r.downstream
	b, err := json.Marshal(p)
	if err != nil {
		return nil
	}
	return b
}

// NewSDKSink returns the sink of a request of st handled with ctx.
func NewSDKSink(ctx context.Context, st *Session) *SDKSink { return &SDKSink{ctx: ctx, st: st} }

// Bind makes k the sink of a request of st handled with ctx.
func (k *SDKSink) Bind(ctx context.Context, st *Session) { k.ctx, k.st = ctx, st }

// NewFastSink returns the sink of a fast-path request of st answered on w.
func NewFastSink(st *Session, w http.ResponseWriter) *FastSink { return &FastSink{st: st, w: w} }

// Bind makes f the sink of a fast-path request of st answered on w.
func (f *FastSink) Bind(st *Session, w http.ResponseWriter) { f.st, f.w = st, w }

// Event answers the request with one event on its own stream, as the SDK
// answers a list.
func (f *FastSink) Event(resp []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	_ = f.writeLocked(resp)
	f.done = true
}
