package mcptest

import (
	"context"
	"errors"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"
)

// Attributes a traced server adds to its spans besides the MCP semantic
// conventions' ones, so that a test sees where the trace context came from.
const (
	// AttrMetaTraceparent is the traceparent the request's params._meta carried.
	AttrMetaTraceparent = "mcptest.meta.traceparent"
	// AttrHeaderTraceparent is the traceparent the request's HTTP headers carried.
	AttrHeaderTraceparent = "mcptest.header.traceparent"
	// AttrBaggage is the W3C baggage of the span's parent context.
	AttrBaggage = "mcptest.baggage"
)

// envTraceEndpoint makes a re-executed stdio server a traced one (see
// StdioOptions.TraceEndpoint).
const envTraceEndpoint = "MCPTEST_TRACE_ENDPOINT"

// TracedServer returns NewServer(name, extra...) traced with Trace.
func TracedServer(t testing.TB, endpoint, name string, extra ...string) *mcp.Server {
	t.Helper()
	s := NewServer(name, extra...)
	Trace(t, s, endpoint, name)
	return s
}

// Trace makes s an instrumented MCP server until the test ends: every
// request or notification it receives gets a SERVER span of service name,
// exported before its answer is sent to the OTLP/HTTP receiver at endpoint
// (a base URL: an otlptest.Receiver's Endpoint). Call it after s's other
// receiving middleware, so that the span covers them.
//
// The span's parent is the W3C trace context (traceparent, tracestate,
// baggage) of the request's params._meta, unprefixed beside the
// io.modelcontextprotocol/ keys in either era; without one, that of the
// HTTP request's headers. When both carry different contexts, the span
// links the headers' one, as the MCP semantic conventions say. Its name
// and attributes follow those conventions (mcp.method.name,
// gen_ai.tool.name, gen_ai.operation.name, gen_ai.prompt.name,
// mcp.resource.uri, mcp.protocol.version, mcp.session.id,
// network.transport, error.type, rpc.response.status_code) plus
// AttrMetaTraceparent, AttrHeaderTraceparent and AttrBaggage. The
// JSON-RPC id is not in go-sdk's middleware's reach: jsonrpc.request.id
// is missing.
func Trace(t testing.TB, s *mcp.Server, endpoint, name string) {
	t.Helper()
	tp, err := tracerProvider(name, endpoint)
	if err != nil {
		t.Fatalf("mcptest: %v", err)
	}
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	s.AddReceivingMiddleware(traceRequests(tp))
}

// tracerProvider exports every span of service name to the OTLP/HTTP
// receiver at endpoint as it ends, without retries, so that a test has
// them as soon as the request is answered.
func tracerProvider(name, endpoint string) (*sdktrace.TracerProvider, error) {
	exp, err := otlptracehttp.New(context.Background(),
		otlptracehttp.WithEndpointURL(strings.TrimSuffix(endpoint, "/")+"/v1/traces"),
		otlptracehttp.WithRetry(otlptracehttp.RetryConfig{Enabled: false}),
		otlptracehttp.WithTimeout(5*time.Second))
	if err != nil {
		return nil, err
	}
	return sdktrace.NewTracerProvider(
		sdktrace.WithSyncer(exp),
		sdktrace.WithResource(resource.NewSchemaless(semconv.ServiceName(name))),
	), nil
}

// traceRequests is the middleware of Trace.
func traceRequests(tp trace.TracerProvider) mcp.Middleware {
	tracer := tp.Tracer("github.com/mcp-mux/mcp-mux/internal/mcptest")
	prop := propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			meta := requestMeta(req)
			var header http.Header
			if extra := req.GetExtra(); extra != nil {
				header = extra.Header
			}
			parent := prop.Extract(ctx, metaCarrier(meta))
			fromHeader := prop.Extract(ctx, propagation.HeaderCarrier(header))
			link := trace.SpanContextFromContext(fromHeader)
			if !trace.SpanContextFromContext(parent).IsValid() {
				parent, link = fromHeader, trace.SpanContext{}
			}
			attrs, target := requestAttrs(method, req, header != nil)
			if v, ok := meta["traceparent"].(string); ok {
				attrs = append(attrs, attribute.String(AttrMetaTraceparent, v))
			}
			if v := header.Get("Traceparent"); v != "" {
				attrs = append(attrs, attribute.String(AttrHeaderTraceparent, v))
			}
			if b := baggage.FromContext(parent); b.Len() > 0 {
				attrs = append(attrs, attribute.String(AttrBaggage, b.String()))
			}
			opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attrs...)}
			if link.IsValid() && !link.Equal(trace.SpanContextFromContext(parent)) {
				opts = append(opts, trace.WithLinks(trace.Link{SpanContext: link}))
			}
			spanName := method
			if target != "" {
				spanName += " " + target
			}
			ctx, span := tracer.Start(parent, spanName, opts...)
			res, err := next(ctx, method, req)
			endSpan(span, res, err)
			return res, err
		}
	}
}

// endSpan records how the request ended and ends its span (which exports it).
func endSpan(span trace.Span, res mcp.Result, err error) {
	defer span.End()
	var werr *jsonrpc.Error
	switch {
	case errors.As(err, &werr):
		code := strconv.FormatInt(werr.Code, 10)
		span.SetAttributes(semconv.ErrorTypeKey.String(code), semconv.RPCResponseStatusCode(code))
		span.SetStatus(codes.Error, werr.Message)
	case err != nil:
		span.SetAttributes(semconv.ErrorTypeOther)
		span.SetStatus(codes.Error, err.Error())
	default:
		if r, ok := res.(*mcp.CallToolResult); ok && r != nil && r.IsError {
			span.SetAttributes(semconv.ErrorTypeKey.String("tool_error"))
			span.SetStatus(codes.Error, "tool_error")
		}
	}
}

// requestAttrs returns the semantic conventions' attributes of a request
// and the target its span is named for.
func requestAttrs(method string, req mcp.Request, overHTTP bool) ([]attribute.KeyValue, string) {
	attrs := []attribute.KeyValue{semconv.McpMethodNameKey.String(method)}
	if overHTTP {
		attrs = append(attrs, semconv.NetworkTransportTCP, semconv.NetworkProtocolName("http"))
	} else {
		attrs = append(attrs, semconv.NetworkTransportPipe)
	}
	version := ""
	if v, ok := req.(interface{ ProtocolVersion() string }); ok {
		version = v.ProtocolVersion()
	}
	if p, ok := req.GetParams().(*mcp.InitializeParams); ok && p != nil {
		version = p.ProtocolVersion
	}
	if version != "" {
		attrs = append(attrs, semconv.McpProtocolVersion(version))
	}
	if ss := req.GetSession(); ss != nil && !reflect.ValueOf(ss).IsNil() && ss.ID() != "" {
		attrs = append(attrs, semconv.McpSessionID(ss.ID()))
	}
	target := ""
	switch p := req.GetParams().(type) {
	case *mcp.CallToolParamsRaw:
		target = p.Name
		attrs = append(attrs, semconv.GenAIToolName(p.Name), semconv.GenAIOperationNameExecuteTool)
	case *mcp.GetPromptParams:
		target = p.Name
		attrs = append(attrs, semconv.GenAIPromptName(p.Name))
	case *mcp.ReadResourceParams:
		attrs = append(attrs, semconv.McpResourceURI(p.URI))
	case *mcp.SubscribeParams:
		attrs = append(attrs, semconv.McpResourceURI(p.URI))
	case *mcp.UnsubscribeParams:
		attrs = append(attrs, semconv.McpResourceURI(p.URI))
	}
	return attrs, target
}

// requestMeta is the request's params._meta (nil when it has none).
func requestMeta(req mcp.Request) mcp.Meta {
	p := req.GetParams()
	if p == nil || reflect.ValueOf(p).IsNil() {
		return nil
	}
	return p.GetMeta()
}

// metaCarrier reads and writes the W3C trace context keys of a
// params._meta, which are unprefixed (SEP-414).
type metaCarrier mcp.Meta

func (m metaCarrier) Get(key string) string {
	v, _ := m[key].(string)
	return v
}

func (m metaCarrier) Set(key, value string) { m[key] = value }

func (m metaCarrier) Keys() []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	return keys
}
