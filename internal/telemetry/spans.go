package telemetry

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcp-mux/mcp-mux/internal/secret"
	"github.com/mcp-mux/mcp-mux/internal/wire"
)

// Op is one MCP request as its span describes it.
type Op struct {
	Method    string // mcp.method.name
	Tool      string // gen_ai.tool.name (tools/call)
	Prompt    string // gen_ai.prompt.name (prompts/get)
	URI       string // mcp.resource.uri (resources/*)
	RequestID string // jsonrpc.request.id, the id as JSON (a string's quotes are dropped)
	Session   string // mcp.session.id
	Protocol  string // mcp.protocol.version
	Transport string // network.transport: "tcp" for HTTP, "pipe" for stdio
	// Server is the configured server a client span's request goes to
	// (mcp_mux.server); Address and Port its HTTP address.
	Server  string
	Address string
	Port    int
	// User is the caller of a server span (user.id, as configured).
	User string
}

// ServerAttr names the configured server of a client span.
const ServerAttr = attribute.Key("mcp_mux.server")

// name is the span's name: "{mcp.method.name} {target}" with the tool or
// prompt as target (never a resource URI: high cardinality).
func (o *Op) name() string {
	switch {
	case o.Tool != "":
		return o.Method + " " + o.Tool
	case o.Prompt != "":
		return o.Method + " " + o.Prompt
	}
	return o.Method
}

// attrs are the convention's attributes of o.
func (o *Op) attrs(t *Telemetry) []attribute.KeyValue {
	a := make([]attribute.KeyValue, 0, 12)
	a = append(a, semconv.McpMethodNameKey.String(o.Method))
	if o.Tool != "" {
		a = append(a, semconv.GenAIToolName(o.Tool), semconv.GenAIOperationNameExecuteTool)
	}
	if o.Prompt != "" {
		a = append(a, semconv.GenAIPromptName(o.Prompt))
	}
	if o.URI != "" {
		a = append(a, semconv.McpResourceURI(secret.RedactURI(o.URI)))
	}
	if o.RequestID != "" {
		a = append(a, semconv.JSONRPCRequestID(strings.Trim(o.RequestID, `"`)))
	}
	if o.Session != "" {
		a = append(a, semconv.McpSessionID(o.Session))
	}
	if o.Protocol != "" {
		a = append(a, semconv.McpProtocolVersion(o.Protocol))
	}
	switch o.Transport {
	case "tcp":
		a = append(a, semconv.NetworkTransportTCP, semconv.NetworkProtocolName("http"))
	case "pipe":
		a = append(a, semconv.NetworkTransportPipe)
	}
	if o.Server != "" {
		a = append(a, ServerAttr.String(o.Server))
	}
	if o.Address != "" {
		a = append(a, semconv.ServerAddress(o.Address))
		if o.Port > 0 {
			a = append(a, semconv.ServerPort(o.Port))
		}
	}
	if o.User != "" {
		if u, ok := t.userAttr(o.User); ok {
			a = append(a, u)
		}
	}
	return a
}

// Span is one request's span (when tracing is on) and duration metric;
// the zero Span does nothing.
type Span struct {
	s     trace.Span
	t     *Telemetry
	op    *Op
	start time.Time
	kind  trace.SpanKind
	ctx   context.Context // for the metric's exemplar
}

// Recording reports whether the span records anything.
func (s Span) Recording() bool { return s.s != nil && s.s.IsRecording() }

// TraceID is the span's trace id in hex ("" when not recording).
func (s Span) TraceID() string {
	if s.s == nil {
		return ""
	}
	sc := s.s.SpanContext()
	if !sc.IsValid() {
		return ""
	}
	return sc.TraceID().String()
}

// Event records a named event on the span (a reconnect, a token fetch).
func (s Span) Event(name string, attrs ...attribute.KeyValue) {
	if s.s != nil {
		s.s.AddEvent(name, trace.WithAttributes(attrs...))
	}
}

// SetTool names the tool a tools/call span is for, once the call path has
// looked it up (label: the name, or bounds' one label for a name the
// caller's view does not know): the span's name and gen_ai attributes, and
// the duration metric's label at End.
func (s Span) SetTool(label string) {
	if s.op == nil || label == "" {
		return
	}
	s.op.Tool = label
	if s.s != nil && s.s.IsRecording() {
		s.s.SetName(s.op.name())
		s.s.SetAttributes(semconv.GenAIToolName(label), semconv.GenAIOperationNameExecuteTool)
	}
}

// End ends the span with the request's outcome: err (a JSON-RPC error
// carries its code as error.type and rpc.response.status_code; a deadline is
// "timeout"; anything else "transport"), or toolError for a result with
// isError ("tool_error").
func (s Span) End(err error, toolError bool) {
	var class, code, msg string
	switch {
	case err != nil:
		class, code, msg = classify(err)
	case toolError:
		class, msg = "tool_error", "tool_error"
	}
	if s.t != nil && s.op != nil {
		s.t.record(s, class)
	}
	if s.s == nil {
		return
	}
	if s.s.IsRecording() && class != "" {
		s.s.SetAttributes(semconv.ErrorTypeKey.String(class))
		if code != "" {
			s.s.SetAttributes(semconv.RPCResponseStatusCode(code))
		}
		s.s.SetStatus(codes.Error, msg)
	}
	s.s.End()
}

// classify returns err's error.type, JSON-RPC code ("" for none) and the
// status description: the JSON-RPC message, never a transport error's text
// (it may name a URL or a header).
func classify(err error) (class, code, msg string) {
	var we *wire.Error
	if errors.As(err, &we) {
		c := strconv.FormatInt(we.Code, 10)
		return c, c, we.Message
	}
	var je *jsonrpc.Error
	if errors.As(err, &je) {
		c := strconv.FormatInt(je.Code, 10)
		return c, c, je.Message
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return "timeout", "", "timeout"
	}
	if errors.Is(err, context.Canceled) {
		return "cancelled", "", "cancelled"
	}
	return "transport", "", "transport error"
}

// Server starts the SERVER span of a downstream request: its parent is the
// trace context in the request's params._meta (meta, the raw _meta object),
// else the one in its HTTP headers h.
func (t *Telemetry) Server(ctx context.Context, op Op, meta json.RawMessage, h http.Header) (context.Context, Span) {
	if t == nil {
		return ctx, Span{}
	}
	if !t.tracing {
		return ctx, Span{t: t, op: &op, start: time.Now(), kind: trace.SpanKindServer, ctx: ctx}
	}
	return t.server(ctx, op, metaCarrier(meta), h)
}

// ServerMeta is Server for a request whose _meta the SDK decoded.
func (t *Telemetry) ServerMeta(ctx context.Context, op Op, meta map[string]any, h http.Header) (context.Context, Span) {
	if t == nil {
		return ctx, Span{}
	}
	if !t.tracing {
		return ctx, Span{t: t, op: &op, start: time.Now(), kind: trace.SpanKindServer, ctx: ctx}
	}
	var c propagation.MapCarrier
	if tp, _ := meta["traceparent"].(string); tp != "" {
		c = propagation.MapCarrier{}
		for _, k := range traceKeys {
			if v, _ := meta[k].(string); v != "" {
				c[k] = v
			}
		}
	}
	return t.server(ctx, op, c, h)
}

func (t *Telemetry) server(ctx context.Context, op Op, carrier propagation.MapCarrier, h http.Header) (context.Context, Span) {
	if c := t.parentOf(carrier, h); c != nil { // parent.go
		ctx = t.prop.Extract(ctx, c)
	}
	ctx, s := t.tracer.Start(ctx, op.name(), trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(op.attrs(t)...))
	return ctx, Span{s: s, t: t, op: &op, start: time.Now(), kind: trace.SpanKindServer, ctx: ctx}
}

// Client starts the CLIENT span of an upstream request, a child of ctx's.
func (t *Telemetry) Client(ctx context.Context, op Op) (context.Context, Span) {
	if t == nil {
		return ctx, Span{}
	}
	if !t.tracing {
		return ctx, Span{t: t, op: &op, start: time.Now(), kind: trace.SpanKindClient, ctx: ctx}
	}
	ctx, s := t.tracer.Start(ctx, op.name(), trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(op.attrs(t)...))
	return ctx, Span{s: s, t: t, op: &op, start: time.Now(), kind: trace.SpanKindClient, ctx: ctx}
}

// Internal starts an INTERNAL span under ctx's (discovery, a token
// fetch), linked to links' span contexts.
func (t *Telemetry) Internal(ctx context.Context, name string, links []trace.SpanContext, attrs ...attribute.KeyValue) (context.Context, Span) {
	if t == nil || !t.tracing {
		return ctx, Span{}
	}
	opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(attrs...)}
	for _, l := range links {
		if l.IsValid() {
			opts = append(opts, trace.WithLinks(trace.Link{SpanContext: l}))
		}
	}
	ctx, s := t.tracer.Start(ctx, name, opts...)
	return ctx, Span{s: s}
}

// metaCarrier is the trace context of a _meta object, nil without one.
func metaCarrier(meta json.RawMessage) propagation.MapCarrier {
	if len(meta) == 0 || !strings.Contains(string(meta), `"traceparent"`) {
		return nil
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(meta, &m) != nil {
		return nil
	}
	c := propagation.MapCarrier{}
	for _, k := range traceKeys {
		var v string
		if json.Unmarshal(m[k], &v) == nil && v != "" {
			c[k] = v
		}
	}
	if c["traceparent"] == "" {
		return nil
	}
	return c
}

// InjectMeta returns params (a JSON object) as they go upstream: with
// ctx's trace context in its _meta, replacing any the caller sent in any
// spelling; when t is off or ctx has no span, without the caller's (but for
// a trusted parent's traceparent and tracestate, parent.go). A nil t
// trusts no parent.
func (t *Telemetry) InjectMeta(ctx context.Context, params json.RawMessage) json.RawMessage {
	if t == nil || !t.tracing || !trace.SpanContextFromContext(ctx).IsValid() {
		return t.callerMeta(params)
	}
	c := propagation.MapCarrier{}
	t.prop.Inject(ctx, c)
	kv := make(map[string]string, len(c))
	for _, k := range traceKeys {
		if v := c[k]; v != "" {
			kv[k] = v
		}
	}
	return wire.SetMeta(params, kv, isTraceKey)
}

// InjectHeader sets ctx's trace context in h (an HTTP request's headers).
func (t *Telemetry) InjectHeader(ctx context.Context, h http.Header) {
	if t == nil || !t.tracing || !trace.SpanContextFromContext(ctx).IsValid() {
		return
	}
	t.prop.Inject(ctx, propagation.HeaderCarrier(h))
}

// SpanContext is the span context ctx carries (for a link).
func SpanContext(ctx context.Context) trace.SpanContext { return trace.SpanContextFromContext(ctx) }

// Event adds a named event to ctx's span when it records (a reconnect, a
// token fetch, an input round, a parked call); it costs nothing otherwise.
func Event(ctx context.Context, name string, attrs ...attribute.KeyValue) {
	if s := trace.SpanFromContext(ctx); s.IsRecording() {
		s.AddEvent(name, trace.WithAttributes(attrs...))
	}
}
